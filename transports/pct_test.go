package transports

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
)

// pctHost starts an sshd whose sessions find the pct stand-in on PATH, with
// container 112 running (env and root dir) and 113 stopped.
func pctHost(t *testing.T) (*sshd.Server, string) {
	root := t.TempDir()
	for _, d := range []string{"112/root", "113"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "112", "env"), []byte("CT_NAME=web112\n"), 0o644)
	os.WriteFile(filepath.Join(root, "113", "stopped"), nil, 0o644)
	s := startSSHD(t, sshd.Options{
		PathPrepend: []string{filepath.Join(fixturesDir(t), "pct")},
		Env:         map[string]string{"PCT_ROOT": root},
	})
	return s, root
}

func pctSpec(s *sshd.Server, vmid int) *Spec {
	return &Spec{Kind: "pct", Addr: strconv.Itoa(vmid), Via: sshSpec(s)}
}

func TestPCTOverSSH(t *testing.T) {
	t.Parallel()
	s, root := pctHost(t)
	p, _ := newPool(t, PoolOptions{})
	ct := open(t, p, pctSpec(s, 112))
	if want := fmt.Sprintf("ssh %s@%s → pct 112", s.User, s.Addr); ct.String() != want {
		t.Errorf("String() = %q, want %q", ct.String(), want)
	}

	t.Run("runs inside the container with the exit status passed through", func(t *testing.T) {
		res, err := ct.Exec(testCtx(t), Command{Script: "echo \"$CT_NAME $PWD\"; echo to-stderr >&2; exit 4"})
		if err != nil {
			t.Fatal(err)
		}
		if want := "web112 " + filepath.Join(root, "112", "root") + "\n"; res.Stdout != want || res.Stderr != "to-stderr\n" || res.ExitCode != 4 {
			t.Fatalf("got %+v, want stdout %q, stderr to-stderr, exit 4", res, want)
		}
	})
	t.Run("batches in one pct exec", func(t *testing.T) {
		rs, err := ct.ExecBatch(testCtx(t), []Command{{Script: "echo $CT_NAME"}, {Script: "exit 9", Shell: "sh"}})
		if err != nil || len(rs) != 2 || rs[0].Stdout != "web112\n" || rs[1].ExitCode != 9 {
			t.Fatalf("batch: %+v, %v", rs, err)
		}
	})
	refusals := []struct {
		name string
		vmid int
		want string
	}{
		{"unknown VMID fails like Proxmox", 999, "Configuration file 'nodes/"},
		{"stopped container", 113, "container '113' not running"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			for _, batch := range []bool{false, true} {
				tr := open(t, p, pctSpec(s, tc.vmid))
				var err error
				if batch {
					_, err = tr.ExecBatch(testCtx(t), []Command{{Script: "true"}, {Script: "true"}})
				} else {
					_, err = tr.Exec(testCtx(t), Command{Script: "true"})
				}
				if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("batch=%v: err = %v, want ErrUnreachable mentioning %q", batch, err, tc.want)
				}
			}
		})
	}
	t.Run("timeout kills the process in the container", func(t *testing.T) {
		slow(t)
		sleep := uniqueSleep()
		res, err := ct.Exec(testCtx(t), Command{Script: sleep + " & echo $!; wait; echo survived", Timeout: 1500 * time.Millisecond})
		if err != nil || !res.TimedOut || strings.Contains(res.Stdout, "survived") || strings.TrimSpace(res.Stdout) == "" {
			t.Fatalf("got %+v, %v; want a timed-out result", res, err)
		}
		wait.Until(t, "the sleep is gone", func() (bool, string) {
			ps := psArgs(t, s)
			return !strings.Contains(ps, sleep), ps
		})
	})
}

// TestPCTOnTheEnginesHost covers an engine running on the Proxmox node
// itself: pct with no via. Not parallel: it sets PATH for the process.
func TestPCTOnTheEnginesHost(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "200"), 0o755)
	os.WriteFile(filepath.Join(root, "200", "env"), []byte("CT_NAME=local200\n"), 0o644)
	t.Setenv("PATH", filepath.Join(fixturesDir(t), "pct")+":"+os.Getenv("PATH"))
	t.Setenv("PCT_ROOT", root)
	p, _ := newPool(t, PoolOptions{})

	res, err := open(t, p, &Spec{Kind: "pct", Addr: "200"}).Exec(testCtx(t), Command{Script: "echo $CT_NAME; exit 1"})
	if err != nil || res.Stdout != "local200\n" || res.ExitCode != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}
	_, err = open(t, p, &Spec{Kind: "pct", Addr: "404"}).Exec(testCtx(t), Command{Script: "true"})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "404.conf' does not exist") {
		t.Fatalf("unknown VMID: err = %v, want ErrUnreachable", err)
	}
}
