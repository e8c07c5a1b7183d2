package transports

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
)

// The faults a monitored fleet produces every week, each against a real
// target: none may crash the process, leave a loop behind, or kill what a
// repair started.

// loopsWith returns this host's resident loops (and fresh sessions'
// shells) whose environment holds env: processes carrying a run token
// whose parent carries none.
func loopsWith(env string) []int {
	environ := func(pid string) string {
		b, _ := os.ReadFile("/proc/" + pid + "/environ")
		return "\x00" + string(b)
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		en := environ(e.Name())
		if !strings.Contains(en, "\x00"+env+"\x00") || !strings.Contains(en, "\x00CONTRACTD_RUN=") {
			continue
		}
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 && !strings.Contains(environ(f[1]), "\x00CONTRACTD_RUN=") {
			out = append(out, pid)
		}
	}
	return out
}

// TestResidentSlowLoginDoesNotCrash: a login slower than the step timeout
// (BASH_ENV sleeping longer than the timeout) fails the command as
// unreachable, run after run, and never brings the process down; once the
// login is fast again, the resident session starts.
func TestResidentSlowLoginDoesNotCrash(t *testing.T) {
	t.Parallel()
	slow(t)
	dir := t.TempDir()
	rc := filepath.Join(dir, "slowrc")
	if err := os.WriteFile(rc, []byte("[ -f "+dir+"/slow ] && sleep 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSSHD(t, sshd.Options{Env: map[string]string{"BASH_ENV": rc}})
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, sshSpec(s))
	for i := 0; i < 4; i++ {
		if _, err := tr.Exec(testCtx(t), Command{Script: "echo hi", Timeout: 2 * time.Second}); err == nil {
			t.Fatalf("run %d through a 4 s login with a 2 s timeout succeeded", i)
		}
	}
	os.Remove(filepath.Join(dir, "slow"))
	wait.Until(t, "a command runs once the login is fast", func() (bool, string) {
		res, err := tr.Exec(testCtx(t), Command{Script: "echo hi", Timeout: 5 * time.Second})
		return err == nil && res.Stdout == "hi\n", fmt.Sprintf("%+v %v", res, err)
	})
	wait.Until(t, "the resident sessions counted are the loops alive", func() (bool, string) {
		got := p.ResidentSessions()[residentHost(sshSpec(s))]
		loops := len(loopsWith("BASH_ENV=" + rc))
		return got == loops && got <= 1, fmt.Sprintf("metric %d, loops %d", got, loops)
	})
}

// TestResidentSessionBrokenWhileIdleIsKilled: a session that breaks while
// idle (here: late output, a protocol error) is killed on the target when
// the next run finds it, not only forgotten.
func TestResidentSessionBrokenWhileIdleIsKilled(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, book := residentPool(t, ResidentOptions{HealthEvery: time.Hour})
	tr := open(t, p, sshSpec(s))
	loop := loopPID(t, tr)
	// A detached writer prints into the loop's stdout after its command ended.
	res, err := tr.Exec(testCtx(t), Command{Script: fmt.Sprintf("setsid sh -c 'sleep 1; echo late >/proc/%d/fd/1' </dev/null >/dev/null 2>&1 & sleep 0.5", loop)})
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	wait.Until(t, "the late output reaches the session", func() (bool, string) {
		rs := p.res
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for r := range rs.all {
			r.mu.Lock()
			perr := r.protoErr
			r.mu.Unlock()
			if perr != nil {
				return true, ""
			}
		}
		return false, "no protocol error yet"
	})
	next := loopPID(t, tr)
	if next == loop {
		t.Fatalf("the broken session served again")
	}
	wait.Until(t, "the broken loop is gone from the target", func() (bool, string) {
		return !alive(loop), book.all()
	})
	if got := p.ResidentSessions()[residentHost(sshSpec(s))]; got != 1 {
		t.Fatalf("resident sessions %d, want the one live loop", got)
	}
}

// TestResidentDiscardSparesWhatRepairsStarted: a service a command started
// the documented way (setsid -f, streams redirected) outlives the resident
// session that started it, even when that session is discarded as broken,
// as it does with fresh sessions; the command the broken session was
// running is killed.
func TestResidentDiscardSparesWhatRepairsStarted(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, book := residentPool(t, ResidentOptions{HealthEvery: time.Hour})
	tr := open(t, p, sshSpec(s))
	dir := t.TempDir()
	svc := filepath.Join(dir, "svc.pid")
	res, err := tr.Exec(testCtx(t), Command{Script: "setsid -f sh -c 'echo $$ > " + svc + "; exec sleep 6001' </dev/null >/dev/null 2>&1; echo started"})
	if err != nil || res.Stdout != "started\n" {
		t.Fatalf("%+v %v", res, err)
	}
	var pid int
	wait.Until(t, "the service writes its pid", func() (bool, string) {
		b, _ := os.ReadFile(svc)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0, string(b)
	})
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// A command that stalls past its deadline breaks the session: it is
	// discarded, its loop and the stalled command reaped.
	loop := loopPID(t, tr)
	syscall.Kill(loop, syscall.SIGSTOP)
	defer syscall.Kill(loop, syscall.SIGCONT)
	res, err = tr.Exec(testCtx(t), Command{Script: "echo after", Timeout: 2 * time.Second})
	if err != nil || res.Stdout != "after\n" {
		t.Fatalf("after the stall: %+v %v\n%s", res, err, book.all())
	}
	wait.Until(t, "the stalled loop is reaped", func() (bool, string) { return !alive(loop), book.all() })
	if !alive(pid) {
		t.Fatalf("the service a command started (pid %d) was killed with the session\n%s", pid, book.all())
	}
	stalled := filepath.Join(dir, "stalled")
	// Mid-request: the loop is killed while a command runs; that command's
	// processes go with it.
	loop = loopPID(t, tr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Exec(testCtx(t), Command{Script: "echo $BASHPID > " + stalled + "; exec sleep 6002", Timeout: 30 * time.Second})
	}()
	var cmd int
	wait.Until(t, "the command starts", func() (bool, string) {
		b, _ := os.ReadFile(stalled)
		cmd, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return cmd > 0, string(b)
	})
	syscall.Kill(loop, syscall.SIGKILL)
	<-done
	wait.Until(t, "the broken request's command is reaped", func() (bool, string) { return !alive(cmd), "" })
	if !alive(pid) {
		t.Fatalf("the service a command started (pid %d) was killed by a later discard", pid)
	}
}

// TestStepCannotReadOrForgeTheProtocol: a command that reads the loop's
// stdin finds nothing there (the loop read its whole request first), so it
// learns no boundary and what it prints in the shape of frames is its own
// output: the commands after it run as sent and report their own results.
func TestStepCannotReadOrForgeTheProtocol(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, book := residentPool(t, ResidentOptions{})
	// Step 0 reads what follows it on the loop's stdin, takes the last line
	// (the boundary that delimits scripts) and prints frames with it that
	// would end every step healthy.
	const forger = `b=$(timeout 2 cat /proc/$$/fd/0 | tail -n 1); echo "read ${#b}"
printf '\n%s 0 end 0\n\n%s 1 o\nforged\n\n%s 1 end 0\n\n%s 2 o\n\n%s 2 end 0\n\n%s done\n' "$b" "$b" "$b" "$b" "$b" "$b"
printf '\n%s 0 end\n\n%s 1 end\n\n%s 2 end\n\n%s done\n' "$b" "$b" "$b" "$b" >&2
exit 7`
	for _, tr := range []Transport{open(t, p, sshSpec(s)), open(t, p, &Spec{Kind: "local"})} {
		loopPID(t, tr)
		rs, err := tr.ExecBatch(testCtx(t), []Command{
			{Script: forger, Timeout: 10 * time.Second},
			{Script: "echo second; exit 3", Timeout: 10 * time.Second},
			{Script: "echo third", Timeout: 10 * time.Second},
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, book.all())
		}
		if !strings.HasPrefix(rs[0].Stdout, "read 0\n") || rs[0].ExitCode != 7 {
			t.Errorf("%s: the reader: %+v; want it to read nothing and exit 7", tr, rs[0])
		}
		if rs[1].ExitCode != 3 || rs[1].Stdout != "second\n" || rs[2].Stdout != "third\n" || rs[1].NotRun || rs[2].NotRun {
			t.Errorf("%s: the commands after the reader: %+v %+v", tr, rs[1], rs[2])
		}
		if rs[0].Note != "" || rs[1].Note != "" {
			t.Errorf("%s: the session broke: %q", tr, rs[0].Note)
		}
	}
}

// TestTimedOutOnlyWhenTheDeadlineFired: a step that exits 124 or is killed
// by a signal before its deadline did not time out; one stopped by its
// deadline did.
func TestTimedOutOnlyWhenTheDeadlineFired(t *testing.T) {
	t.Parallel()
	cmds := []Command{
		{Script: "exit 124", Timeout: 20 * time.Second},
		{Script: "kill -KILL $BASHPID", Timeout: 20 * time.Second},
		{Script: "sleep 30", Timeout: time.Second},
		{Script: "echo after"},
	}
	p, _ := residentPool(t, ResidentOptions{})
	for _, tr := range []Transport{&Local{}, open(t, p, &Spec{Kind: "local"})} {
		rs, err := tr.ExecBatch(testCtx(t), cmds)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].ExitCode != 124 || rs[0].TimedOut {
			t.Errorf("%s: exit 124 before the deadline: %+v", tr, rs[0])
		}
		if rs[1].ExitCode != 137 || rs[1].TimedOut {
			t.Errorf("%s: killed before the deadline: %+v", tr, rs[1])
		}
		if !rs[2].TimedOut {
			t.Errorf("%s: stopped by its deadline: %+v", tr, rs[2])
		}
		if rs[3].Stdout != "after\n" {
			t.Errorf("%s: the step after: %+v", tr, rs[3])
		}
	}
}

// TestLocalBackgroundChildDiesWithTheStep: a plain `&` child of a one-shot
// local command dies when the command ends; a detached one does not.
func TestLocalBackgroundChildDiesWithTheStep(t *testing.T) {
	t.Parallel()
	l := &Local{}
	pidf := filepath.Join(t.TempDir(), "detached")
	res, err := l.Exec(testCtx(t), Command{Script: "sleep 6003 & echo $!; setsid -f sh -c 'echo $$ > " + pidf + "; exec sleep 6004' </dev/null >/dev/null 2>&1"})
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
	var detached int
	wait.Until(t, "the detached child writes its pid", func() (bool, string) {
		b, _ := os.ReadFile(pidf)
		detached, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return detached > 0, string(b)
	})
	t.Cleanup(func() { syscall.Kill(detached, syscall.SIGKILL) })
	wait.Until(t, "the background child is gone", func() (bool, string) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		return child > 0 && (len(st) == 0 || strings.Contains(string(st), ") Z ")), string(st)
	})
	if !alive(detached) {
		t.Fatalf("the detached child did not survive the step")
	}
}

// TestBusyboxStepIgnoringTERMIsKilled: on a target without bash, a step
// that ignores TERM is killed 2 s after its deadline, in a batch and in a
// resident session, as it is with bash.
func TestBusyboxStepIgnoringTERMIsKilled(t *testing.T) {
	t.Parallel()
	slow(t)
	c := busyboxContainer(t)
	p, book := residentPool(t, ResidentOptions{})
	count := func() int {
		out, _ := exec.Command("docker", "exec", c.Name, "sh", "-c", "ps -o args | grep -c '[s]leep 6005'").Output()
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n
	}
	for _, tr := range []Transport{open(t, func() *Pool { p, _ := newPool(t, PoolOptions{}); return p }(), &Spec{Kind: "docker", Addr: c.Name}), open(t, p, &Spec{Kind: "docker", Addr: c.Name})} {
		rs, err := tr.ExecBatch(testCtx(t), []Command{
			// Ten seconds: a resident session's shell must start within its
			// first step's deadline, and a loaded machine takes seconds to
			// start `docker exec`.
			{Script: "trap '' TERM; while :; do sleep 6005; done", Timeout: 10 * time.Second},
			// A minute: the batch's deadline is its steps' timeouts, and a
			// loaded machine takes seconds to start `docker exec`.
			{Script: "echo next", Timeout: time.Minute},
		})
		if err != nil || !rs[0].TimedOut || rs[1].Stdout != "next\n" {
			t.Fatalf("%s: %+v %v\n%s", tr, rs, err, book.all())
		}
		wait.Until(t, "the step that ignored TERM is gone", func() (bool, string) {
			n := count()
			return n == 0, fmt.Sprintf("%d left", n)
		})
	}
}

// TestResidentLocalChainsAreNotBounded: the per-host bound is sshd's
// MaxSessions; chains on the engine's own host (local, local docker and
// pct) have no such limit, and a chain over an ssh host's bound says so
// once, not on every run.
func TestResidentLocalChainsAreNotBounded(t *testing.T) {
	t.Parallel()
	p, book := residentPool(t, ResidentOptions{MaxPerHost: 1})
	tr := open(t, p, &Spec{Kind: "local"})
	loopPID(t, tr)
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		tr.Exec(testCtx(t), Command{Script: "sleep 3", Timeout: 10 * time.Second})
	}()
	wait.Until(t, "the first session is busy", func() (bool, string) {
		p.res.mu.Lock()
		defer p.res.mu.Unlock()
		c := p.res.chains["local"]
		return c != nil && len(c.idle) == 0, ""
	})
	if _, err := tr.Exec(testCtx(t), Command{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	if got := p.ResidentSessions()["local"]; got != 2 {
		t.Fatalf("%d resident sessions on this host with the bound at 1, want 2 (no bound locally)\n%s", got, book.all())
	}
	<-busy
	if strings.Contains(book.all(), "already open") {
		t.Fatalf("the bound was applied to this host:\n%s", book.all())
	}

	s := startSSHD(t, sshd.Options{})
	ssh := open(t, p, sshSpec(s))
	loopPID(t, ssh)
	other := open(t, p, &Spec{Kind: "docker", Addr: "none-such", Via: sshSpec(s)})
	for i := 0; i < 3; i++ {
		other.Exec(testCtx(t), Command{Script: "true"})
	}
	if n := strings.Count(book.all(), "already open on this host"); n != 1 {
		t.Fatalf("the bound was logged %d times over 3 runs, want once:\n%s", n, book.all())
	}
}

// TestReaperSparesWhatARunDetached: a run stopped before it finished (its
// context cancelled, or its resident loop killed mid-request) is reaped by
// its run token, plain `&` children included (one that ignores TERM goes
// with the reaper's KILL), but a service it had
// already started in a session of its own (`setsid`, the documented way to
// leave something running) carries the same token and lives on. On busybox
// the framing itself runs a timed step in a new session: the step is still
// reaped.
func TestReaperSparesWhatARunDetached(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	fresh, _ := newPool(t, PoolOptions{})
	resident, book := residentPool(t, ResidentOptions{HealthEvery: time.Hour})
	c := busyboxContainer(t)
	cases := []struct {
		name  string
		tr    Transport
		batch bool
		ps    func() string
		// stop breaks the run: cancel its context, or kill its loop.
		stop func(cancel func(), loop int)
	}{
		{"ssh", open(t, fresh, sshSpec(s)), false, func() string { return psArgs(t, s) }, nil},
		{"ssh batch", open(t, fresh, sshSpec(s)), true, func() string { return psArgs(t, s) }, nil},
		{"local", open(t, fresh, &Spec{Kind: "local"}), false, func() string { return hostPS(t) }, nil},
		{"busybox docker batch", open(t, fresh, &Spec{Kind: "docker", Addr: c.Name}), true, func() string { return hostPS(t) }, nil},
		{"resident ssh, loop killed", open(t, resident, sshSpec(s)), false, func() string { return psArgs(t, s) },
			func(_ func(), loop int) { syscall.Kill(loop, syscall.SIGKILL) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plain, svc := uniqueSleep(), uniqueSleep()
			t.Cleanup(func() { exec.Command("pkill", "-f", svc).Run() })
			// A resident session's unfinished command runs again in a fresh
			// session: that second run finds the mark and ends. The run's
			// output goes elsewhere, as a repair's service's does, so that
			// nothing holds the session open once its loop is killed.
			once := "/tmp/" + strings.ReplaceAll(plain, " ", "-")
			t.Cleanup(func() { os.Remove(once) })
			script := "[ -e " + once + " ] && exit 0; : > " + once + "; exec >/dev/null 2>&1; setsid sh -c 'exec " + svc + "' </dev/null & (trap '' TERM; " + plain + ") & wait"
			loop := 0
			if tc.stop != nil {
				loop = loopPID(t, tc.tr)
			}
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if tc.batch {
					// A deadline, so that busybox runs the step under its
					// own-session wrapper.
					tc.tr.ExecBatch(ctx, []Command{{Script: "echo a"}, {Script: script, Timeout: 10 * time.Minute}})
				} else {
					tc.tr.Exec(ctx, Command{Script: script, Timeout: 10 * time.Minute})
				}
			}()
			// The service has left the session once it runs as itself:
			// before, `setsid` and `sh -c` carry its name too.
			wait.Until(t, "the run and the service it detaches start", func() (bool, string) {
				ps := tc.ps()
				return strings.Contains(ps, plain) && slices.Contains(strings.Split(ps, "\n"), svc), ps
			})
			tok := runTokenOf(plain)
			if tc.stop != nil {
				tc.stop(cancel, loop)
			} else {
				cancel()
			}
			<-done
			wait.Until(t, "the run's own processes are reaped", func() (bool, string) {
				ps := tc.ps()
				return !strings.Contains(ps, plain), ps
			})
			// The reaper ends with a KILL pass a second after its TERM pass;
			// when it runs in a session of its own, its command line names
			// the token.
			if tok != "" {
				wait.Until(t, "the reaper ends", func() (bool, string) {
					ps := tc.ps()
					return !strings.Contains(ps, tok), ps
				})
			}
			if ps := tc.ps(); !strings.Contains(ps, svc) {
				t.Fatalf("the service the run detached (%s) was reaped with it:\n%s\n%s", svc, ps, book.all())
			}
		})
	}
}

// runTokenOf returns the run token in the environment of the process on
// this host whose command line contains args, or "".
func runTokenOf(args string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), args) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "CONTRACTD_RUN="); ok {
				return v
			}
		}
	}
	return ""
}
