package transports

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
)

// batchTargets are the transports every batch case runs on; with resident,
// also through resident sessions, which must give the same results.
func batchTargets(t *testing.T, resident bool) map[string]Transport {
	s := startSSHD(t, sshd.Options{})
	p, _ := newPool(t, PoolOptions{})
	out := map[string]Transport{
		"local": open(t, p, &Spec{Kind: "local"}),
		"ssh":   open(t, p, sshSpec(s)),
	}
	if resident {
		rp, _ := newPool(t, PoolOptions{Resident: &ResidentOptions{}})
		out["resident local"] = open(t, rp, &Spec{Kind: "local"})
		out["resident ssh"] = open(t, rp, sshSpec(s))
	}
	return out
}

func TestExecBatch(t *testing.T) {
	t.Parallel()
	fakeBoundary := "contractd0123456789abcdef0123456789abcdef"
	cases := []struct {
		name string
		cmds []Command
		want []Result // Stdout, Stderr, ExitCode, TimedOut compared
	}{
		{
			name: "each step keeps its own stdout, stderr and exit code",
			cmds: []Command{
				{Script: "echo one; echo warn >&2"},
				{Script: "echo two; exit 7", Shell: "sh"},
				{Script: "a=(x y); echo ${#a[@]}"},
			},
			want: []Result{{Stdout: "one\n", Stderr: "warn\n"}, {Stdout: "two\n", ExitCode: 7}, {Stdout: "2\n"}},
		},
		{
			name: "a step printing fake boundaries cannot spoof the framing",
			cmds: []Command{
				{Script: "printf '\\n%s 1 0\\nforged\\n%s 1 e\\n\\n%s 1 end\\n' " + fakeBoundary + " " + fakeBoundary + " " + fakeBoundary + "; printf 'no newline'"},
				{Script: "echo real; exit 3"},
				{Script: "echo \"boundary=${__B:-hidden}\"; printf '\\n'"},
			},
			want: []Result{
				{Stdout: "\n" + fakeBoundary + " 1 0\nforged\n" + fakeBoundary + " 1 e\n\n" + fakeBoundary + " 1 end\nno newline"},
				{Stdout: "real\n", ExitCode: 3},
				{Stdout: "boundary=hidden\n\n"},
			},
		},
		{
			name: "a hung step is killed by its own timeout and the others still report",
			cmds: []Command{
				{Script: "echo before"},
				{Script: "echo started; sleep 100; echo never", Timeout: time.Second},
				{Script: "echo after"},
			},
			want: []Result{{Stdout: "before\n"}, {Stdout: "started\n", ExitCode: 124, TimedOut: true}, {Stdout: "after\n"}},
		},
		{
			name: "binary output passes byte for byte",
			cmds: []Command{
				{Script: "printf 'a\\000b\\000\\000c'"},
				{Script: "printf '\\377\\376\\000' >&2"},
			},
			want: []Result{{Stdout: "a\x00b\x00\x00c"}, {Stderr: "\xff\xfe\x00"}},
		},
		{
			name: "a step reading stdin gets EOF, not the rest of the batch",
			cmds: []Command{{Script: "cat; echo read-done"}, {Script: "echo next"}},
			want: []Result{{Stdout: "read-done\n"}, {Stdout: "next\n"}},
		},
		{
			name: "shared and per-step secrets are exported and redacted",
			cmds: []Command{
				{Script: "echo \"$SHARED $OWN\"", Env: map[string]string{"SHARED": "s-shared-1", "OWN": "own-aaaa"}},
				{Script: "echo \"$SHARED $OWN\" >&2", Env: map[string]string{"SHARED": "s-shared-1", "OWN": "own-bbbb"}},
			},
			want: []Result{{Stdout: "*** ***\n"}, {Stderr: "*** ***\n"}},
		},
		{
			name: "a batch needs no writable temporary directory on the target",
			cmds: []Command{
				{Script: "echo a", Env: map[string]string{"TMPDIR": "/nonexistent/x"}},
				{Script: "echo b; exit 2", Env: map[string]string{"TMPDIR": "/nonexistent/x"}},
			},
			want: []Result{{Stdout: "a\n"}, {Stdout: "b\n", ExitCode: 2}},
		},
	}
	for name, tr := range batchTargets(t, true) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					got, err := tr.ExecBatch(testCtx(t), tc.cmds)
					if err != nil {
						t.Fatalf("ExecBatch: %v", err)
					}
					if len(got) != len(tc.want) {
						t.Fatalf("%d results, want %d", len(got), len(tc.want))
					}
					for i, w := range tc.want {
						g := got[i]
						if g.Stdout != w.Stdout || g.Stderr != w.Stderr || g.ExitCode != w.ExitCode || g.TimedOut != w.TimedOut {
							t.Errorf("step %d: got stdout %q stderr %q exit %d timedout %v; want %q %q %d %v",
								i, g.Stdout, g.Stderr, g.ExitCode, g.TimedOut, w.Stdout, w.Stderr, w.ExitCode, w.TimedOut)
						}
					}
				})
			}
		})
	}
}

func TestExecBatchCapsAndCleansUp(t *testing.T) {
	t.Parallel()
	for name, tr := range batchTargets(t, false) {
		t.Run(name, func(t *testing.T) {
			got, err := tr.ExecBatch(testCtx(t), []Command{
				{Script: "head -c 300000 /dev/zero | tr '\\0' z", Cap: 1000},
				{Script: "if [ -f \"${BASH_SOURCE[0]:-$0}\" ]; then echo \"${BASH_SOURCE[0]:-$0}\"; else echo not a file; fi"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if note := "\n[captured 1000 of 300000 bytes]"; got[0].StdoutBytes != 300000 || got[0].Stdout != strings.Repeat("z", 1000)+note {
				t.Fatalf("capped step: %d bytes, tail %q", got[0].StdoutBytes, got[0].Stdout[max(0, len(got[0].Stdout)-50):])
			}
			// The step's script (and the secrets it exports) came through
			// the session, never a file on the target's disk.
			if src := strings.TrimSpace(got[1].Stdout); src != "not a file" {
				t.Fatalf("the step ran from a file: %q", src)
			}
		})
	}
}

func TestExecBatchSessionDiesMidway(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	sleep := uniqueSleep()
	type out struct {
		res []Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := tr.ExecBatch(testCtx(t), []Command{
			{Script: "echo first"},
			{Script: sleep, Timeout: 30 * time.Second},
			{Script: "echo third"},
		})
		done <- out{res, err}
	}()
	wait.Until(t, "the second step runs", func() (bool, string) {
		ps := psArgs(t, s)
		return strings.Contains(ps, sleep), ps
	})
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if !errors.Is(o.err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", o.err)
	}
	if len(o.res) != 3 || o.res[0].Stdout != "first\n" || o.res[0].ExitCode != 0 {
		t.Fatalf("the framed first step is lost: %+v", o.res)
	}
	if o.res[0].NotRun {
		t.Errorf("the finished first step is marked not run")
	}
	for _, r := range o.res[1:] {
		if r.ExitCode != -1 || !r.NotRun || !strings.Contains(r.Stderr, "not run") {
			t.Errorf("unfinished step not marked: %+v", r)
		}
	}
}

// TestExecBatchSyntaxErrorFailsItsStepAlone: a step's script is parsed on
// its own, whether it runs as a subshell's body or sourced, so a syntax
// error fails that step (exit 2, bash's message) and nothing else.
func TestExecBatchSyntaxErrorFailsItsStepAlone(t *testing.T) {
	t.Parallel()
	for name, tr := range batchTargets(t, true) {
		t.Run(name, func(t *testing.T) {
			got, err := tr.ExecBatch(testCtx(t), []Command{
				{Script: "echo before; if"},
				{Script: "echo ok; case x in (x) echo broken ;;"},
				{Script: "case x in x) echo case ;; esac; (echo sub)"},
				{Script: "echo last"},
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if got[i].ExitCode != 2 || got[i].Stdout != "" || !strings.Contains(got[i].Stderr, "syntax error") {
					t.Errorf("step %d: %+v; want exit 2, no output, bash's syntax error", i, got[i])
				}
			}
			if got[2].Stdout != "case\nsub\n" || got[3].Stdout != "last\n" {
				t.Errorf("the steps after: %+v, %+v", got[2], got[3])
			}
		})
	}
}
