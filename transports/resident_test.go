package transports

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
)

// residentPool returns a pool with resident sessions on, closed at cleanup.
func residentPool(t *testing.T, opts ResidentOptions) (*Pool, *logBook) {
	t.Helper()
	return newPool(t, PoolOptions{Resident: &opts})
}

// loopPID runs `echo $$` through tr: a command runs in a subshell of the
// resident loop, where $$ is the loop's own PID.
func loopPID(t *testing.T, tr Transport) int {
	t.Helper()
	res, err := tr.Exec(testCtx(t), Command{Script: "echo $$"})
	if err != nil {
		t.Fatalf("echo $$: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("echo $$: %q", res.Stdout)
	}
	return pid
}

// alive reports whether a process with pid exists on this host.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestResidentSessionServesEveryRunWithoutANewLogin(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{LogSessions: true})
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, sshSpec(s))
	first := loopPID(t, tr)
	before, err := s.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		rs, err := tr.ExecBatch(testCtx(t), []Command{
			{Script: "echo $$"},
			{Script: "echo step two; exit 4", Shell: "sh"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(rs[0].Stdout); got != strconv.Itoa(first) || rs[1].Stdout != "step two\n" || rs[1].ExitCode != 4 {
			t.Fatalf("run %d: %+v; want the same loop (%d) and step two's own output and exit", i, rs, first)
		}
		if rs[0].Note != "" || rs[1].Note != "" {
			t.Fatalf("run %d: unexpected notes %q %q", i, rs[0].Note, rs[1].Note)
		}
	}
	after, _ := s.Sessions()
	if after != before {
		t.Fatalf("sshd started %d new sessions for 5 runs through a resident session, want 0", after-before)
	}
	if got := p.ResidentSessions(); got[residentHost(sshSpec(s))] != 1 {
		t.Fatalf("resident sessions %v, want 1 on the host", got)
	}
}

func TestResidentSessionKeepsNoSecret(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, sshSpec(s))
	const secret = "s3cret-value-for-one-command"
	res, err := tr.Exec(testCtx(t), Command{
		Script: "echo \"$TOKEN\" >/dev/null; echo $$; if [ -f \"${BASH_SOURCE[0]:-$0}\" ]; then echo file; else echo no-file; fi",
		Env:    map[string]string{"TOKEN": secret},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(res.Stdout)
	if len(lines) != 2 {
		t.Fatalf("stdout %q", res.Stdout)
	}
	pid, file := lines[0], lines[1]
	if file != "no-file" {
		t.Fatalf("the command ran from a file on the target")
	}
	later, err := tr.Exec(testCtx(t), Command{Script: "echo \"${TOKEN:-unset}\""})
	if err != nil || later.Stdout != "unset\n" {
		t.Fatalf("the next command sees %q (%v); a command's exports must not outlive it", later.Stdout, err)
	}
	// The loop's environment, and its watchdog's, on the target.
	out, err := s.Run(testCtx(t), fmt.Sprintf("for p in %s $(cat /proc/%s/task/*/children); do tr '\\0' '\\n' </proc/$p/environ; echo \"--- $p\"; done", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, secret) {
		t.Fatalf("the secret is still on the target:\n%s", out)
	}
	if !strings.Contains(out, "CONTRACTD_RUN=") || strings.Count(out, "--- ") < 2 {
		t.Fatalf("could not read the loop's and its watchdog's environment:\n%s", out)
	}
}

func TestResidentBatchCasesMatchFreshSessions(t *testing.T) {
	t.Parallel()
	// The batch cases of TestExecBatch hold for resident sessions too; see
	// batchTargets, which includes them. This case covers what only a
	// resident session has: commands of one request after one that timed
	// out, and a request after a request that timed out.
	s := startSSHD(t, sshd.Options{})
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, sshSpec(s))
	for i := 0; i < 2; i++ {
		rs, err := tr.ExecBatch(testCtx(t), []Command{
			{Script: "sleep 30", Timeout: 5 * time.Second}, // the session starts within it: seconds on a loaded machine
			{Script: "echo after"},
		})
		if err != nil || rs[0].ExitCode != 124 || !rs[0].TimedOut || rs[1].Stdout != "after\n" || rs[1].TimedOut {
			t.Fatalf("run %d: %+v, %v", i, rs, err)
		}
	}
	if rs, err := tr.ExecBatch(testCtx(t), []Command{{Script: "echo ok"}, {Script: "exit 0"}}); err != nil || rs[0].TimedOut || rs[0].Stdout != "ok\n" {
		t.Fatalf("a step timeout must not stick to its index: %+v, %v", rs, err)
	}
}

// breakers damage a resident session from outside, as a target can.
var breakers = []struct {
	name  string
	note  string
	apply func(t *testing.T, p *Pool, spec *Spec, pid int)
}{
	{
		name: "the remote loop is killed",
		note: "the loop ended",
		apply: func(t *testing.T, _ *Pool, _ *Spec, pid int) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name: "the connection is closed",
		note: "ended",
		apply: func(t *testing.T, p *Pool, spec *Spec, _ int) {
			p.mu.Lock()
			c := p.conns[chainKey(spec)]
			p.mu.Unlock()
			c.mu.Lock()
			cl := c.client
			c.mu.Unlock()
			if cl == nil {
				t.Fatal("no pooled connection")
			}
			cl.Close()
		},
	},
	{
		name: "the remote loop is stalled",
		note: "no answer within",
		apply: func(t *testing.T, _ *Pool, _ *Spec, pid int) {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
		},
	},
}

// TestResidentSessionRecovers breaks the resident session between runs in
// each way a target can, and checks that the next run still gets every
// result, within its steps' timeouts, says that it used a fresh session,
// and that the run after it is resident again.
func TestResidentSessionRecovers(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	for _, b := range breakers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			// A long health interval: the run itself must meet the damage.
			p, book := residentPool(t, ResidentOptions{HealthEvery: time.Hour})
			spec := sshSpec(s)
			tr := open(t, p, spec)
			pid := loopPID(t, tr)
			b.apply(t, p, spec, pid)
			steps := []Command{
				{Script: "echo one", Timeout: 10 * time.Second},
				{Script: "echo two >&2; exit 5", Timeout: 10 * time.Second},
			}
			start := time.Now()
			rs, err := tr.ExecBatch(testCtx(t), steps)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("ExecBatch: %v\n%s", err, book.all())
			}
			if rs[0].Stdout != "one\n" || rs[1].Stderr != "two\n" || rs[1].ExitCode != 5 {
				t.Fatalf("results %+v", rs)
			}
			t.Logf("note: %s (%s)", rs[0].Note, took)
			// Either the run met the damage (a fresh session ran the
			// steps) or the session's end was seen while it was idle (a
			// new resident session ran them); the report says which.
			for i, r := range rs {
				if !(strings.Contains(r.Note, "fresh session") || strings.Contains(r.Note, "restarted")) || !strings.Contains(r.Note, b.note) {
					t.Errorf("step %d note %q: want it to say the resident session broke (%q) and what ran the step", i, r.Note, b.note)
				}
			}
			if limit := 6 * time.Second; took > limit {
				t.Errorf("the run took %s, longer than its steps' timeouts (%s)", took, limit)
			}
			if next := loopPID(t, tr); next == pid {
				t.Errorf("the next run still uses the broken loop %d", pid)
			}
			rs, err = tr.ExecBatch(testCtx(t), steps)
			if err != nil || rs[0].Note != "" {
				t.Fatalf("the run after recovery: %+v, %v", rs, err)
			}
			wait.Until(t, "the broken loop is gone", func() (bool, string) {
				return !alive(pid), fmt.Sprintf("pid %d alive", pid)
			})
		})
	}
}

func TestResidentSessionLostMidCommandIsNotRunTwice(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, sshSpec(s))
	pid := loopPID(t, tr)
	marker := t.TempDir() + "/ran"
	errc := make(chan error, 1)
	go func() {
		_, err := tr.Exec(testCtx(t), Command{Script: "echo x >>" + quote(marker) + "; sleep 30", Timeout: 20 * time.Second})
		errc <- err
	}()
	wait.Until(t, "the command runs", func() (bool, string) {
		_, err := os.Stat(marker)
		return err == nil, fmt.Sprint(err)
	})
	syscall.Kill(pid, syscall.SIGKILL)
	err := <-errc
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable: a command the loop acknowledged is not run again", err)
	}
	b, _ := os.ReadFile(marker)
	if string(b) != "x\n" {
		t.Fatalf("the command ran %d times", strings.Count(string(b), "x"))
	}
}

func TestResidentSessionIdleTTL(t *testing.T) {
	t.Parallel()
	p, book := residentPool(t, ResidentOptions{})
	spec := &Spec{Kind: "local", ResidentTTL: 300 * time.Millisecond}
	tr := open(t, p, spec)
	pid := loopPID(t, tr)
	wait.Until(t, "the idle session is closed", func() (bool, string) {
		return len(p.ResidentSessions()) == 0 && !alive(pid), fmt.Sprintf("%v, pid %d alive %v", p.ResidentSessions(), pid, alive(pid))
	})
	if !strings.Contains(book.all(), "time to live") {
		t.Errorf("log does not say why it closed:\n%s", book.all())
	}
	if next := loopPID(t, tr); next == pid {
		t.Fatalf("a closed session served again")
	}
}

func TestResidentSessionHealthCheckReplacesAStalledLoop(t *testing.T) {
	t.Parallel()
	slow(t)
	p, book := residentPool(t, ResidentOptions{HealthEvery: 200 * time.Millisecond, AckTimeout: 500 * time.Millisecond})
	tr := open(t, p, &Spec{Kind: "local"})
	pid := loopPID(t, tr)
	syscall.Kill(pid, syscall.SIGSTOP)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	wait.Until(t, "the health check closes the stalled session", func() (bool, string) {
		return len(p.ResidentSessions()) == 0, book.all()
	})
	res, err := tr.Exec(testCtx(t), Command{Script: "echo fine"})
	if err != nil || res.Stdout != "fine\n" || !strings.Contains(res.Note, "restarted") || !strings.Contains(res.Note, "health check") {
		t.Fatalf("after the health check: %+v, %v; want a new resident session, noted", res, err)
	}
	wait.Until(t, "the stalled loop is killed", func() (bool, string) { return !alive(pid), "alive" })
}

func TestResidentSessionsPerHostAreBounded(t *testing.T) {
	t.Parallel()
	s, _ := pctHost(t)
	p, book := residentPool(t, ResidentOptions{MaxPerHost: 2})
	host := residentHost(sshSpec(s))
	trs := []Transport{open(t, p, sshSpec(s)), open(t, p, pctSpec(s, 112)), open(t, p, &Spec{Kind: "pct", Addr: "112", Via: sshSpec(s), Sudo: false, Name: "again"})}
	for i, tr := range trs[:2] {
		if _, err := tr.Exec(testCtx(t), Command{Script: "true"}); err != nil {
			t.Fatalf("transport %d: %v", i, err)
		}
	}
	if got := p.ResidentSessions()[host]; got != 2 {
		t.Fatalf("%d resident sessions on the host, want 2", got)
	}
	// A third chain on the same host (a docker container there, say)
	// runs in a fresh session while two are open.
	third := open(t, p, &Spec{Kind: "docker", Addr: "none-such", Via: sshSpec(s)})
	third.Exec(testCtx(t), Command{Script: "true"})
	if got := p.ResidentSessions()[host]; got != 2 {
		t.Fatalf("%d resident sessions on the host after a third chain, want 2", got)
	}
	if !strings.Contains(book.all(), "already open on this host") {
		t.Errorf("the bound is not logged:\n%s", book.all())
	}
	// The same chain opened again shares its session.
	if res, err := trs[2].Exec(testCtx(t), Command{Script: "echo $CT_NAME"}); err != nil || res.Stdout != "web112\n" {
		t.Fatalf("pct 112 again: %+v, %v", res, err)
	}
	if got := p.ResidentSessions()[host]; got != 2 {
		t.Fatalf("%d resident sessions on the host, want 2", got)
	}
}

// TestResidentSessionBusyDoesNotBlockAnotherStage: a command hanging in one
// stage's resident session must not hold up another stage on the same chain.
func TestResidentSessionBusyDoesNotBlockAnotherStage(t *testing.T) {
	t.Parallel()
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, &Spec{Kind: "local"})
	loopPID(t, tr)
	release := t.TempDir() + "/release"
	hold, _ := holdUntil(release)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tr.Exec(testCtx(t), Command{Script: hold, Timeout: 30 * time.Second})
	}()
	wait.Until(t, "the first command holds its session", func() (bool, string) {
		p.res.mu.Lock()
		defer p.res.mu.Unlock()
		return len(p.res.chains["local"].idle) == 0, "idle"
	})
	res, err := tr.Exec(testCtx(t), Command{Script: "echo meanwhile"})
	os.WriteFile(release, nil, 0o644)
	wg.Wait()
	if err != nil || res.Stdout != "meanwhile\n" {
		t.Fatalf("second stage: %+v, %v", res, err)
	}
	if got := p.ResidentSessions()["local"]; got != 2 {
		t.Fatalf("%d resident sessions, want 2 (one per concurrent user)", got)
	}
}

func TestResidentSessionCancelKillsTheCommand(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	p, _ := residentPool(t, ResidentOptions{})
	tr := open(t, p, sshSpec(s))
	pid := loopPID(t, tr)
	sleep := uniqueSleep()
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := tr.ExecBatch(ctx, []Command{{Script: "echo a"}, {Script: "(" + sleep + ") & wait"}})
		done <- err
	}()
	wait.Until(t, "the remote sleep starts", func() (bool, string) {
		ps := psArgs(t, s)
		return strings.Contains(ps, sleep), ps
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("cancelled run: %v", err)
	}
	wait.Until(t, "the remote sleep and the loop are gone", func() (bool, string) {
		ps := psArgs(t, s)
		return !strings.Contains(ps, sleep) && !alive(pid), ps
	})
}

func TestResidentSessionClosesWithThePool(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p := NewPool(PoolOptions{Resident: &ResidentOptions{}})
	pid := loopPID(t, open(t, p, sshSpec(s)))
	lpid := loopPID(t, open(t, p, &Spec{Kind: "local"}))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || alive(lpid) {
		t.Fatalf("loops alive after Close: ssh %v, local %v", alive(pid), alive(lpid))
	}
}

func TestResidentPCTAndDockerLoopsLiveInTheContainer(t *testing.T) {
	t.Parallel()
	s, root := pctHost(t)
	p, _ := residentPool(t, ResidentOptions{})
	ct := open(t, p, pctSpec(s, 112))
	for i := 0; i < 2; i++ {
		res, err := ct.Exec(testCtx(t), Command{Script: "echo \"$CT_NAME $PWD\""})
		if want := "web112 " + root + "/112/root\n"; err != nil || res.Stdout != want {
			t.Fatalf("pct run %d: %+v, %v; want %q", i, res, err, want)
		}
	}
	// A stopped container fails as it does without resident sessions.
	_, err := open(t, p, pctSpec(s, 113)).Exec(testCtx(t), Command{Script: "true"})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("stopped container: %v", err)
	}

	c := busyboxContainer(t)
	dk := open(t, p, &Spec{Kind: "docker", Addr: c.Name})
	first := ""
	for i := 0; i < 2; i++ {
		// Without bash a command runs as its own sh, a child of the loop.
		rs, err := dk.ExecBatch(testCtx(t), []Command{{Script: "echo $PPID"}, {Script: "cat /etc/hostname >/dev/null; echo busy"}})
		if err != nil || rs[1].Stdout != "busy\n" {
			t.Fatalf("docker run %d: %+v, %v", i, rs, err)
		}
		if first == "" {
			first = rs[0].Stdout
		} else if rs[0].Stdout != first {
			t.Fatalf("docker run %d used another loop: %q, first %q", i, rs[0].Stdout, first)
		}
	}
}

// dockerExecClients returns the pids of this host's `docker exec -i NAME`
// processes: what carries a resident session into the container.
func dockerExecClients(name string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.HasPrefix(string(b), "docker\x00exec\x00-i\x00"+name+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// TestResidentDockerSessionRecovers breaks a resident session inside a
// real container the three ways a target can, between runs: the next run
// gets every result within its steps' timeouts and says what happened.
func TestResidentDockerSessionRecovers(t *testing.T) {
	t.Parallel()
	slow(t)
	c := busyboxContainer(t)
	dockerDo := func(args ...string) {
		if out, err := exec.Command("docker", append([]string{"exec", c.Name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("docker exec %v: %v: %s", args, err, out)
		}
	}
	cases := []struct {
		name  string
		note  string
		apply func(t *testing.T, loop string)
	}{
		{"the loop in the container is killed", "ended", func(t *testing.T, loop string) { dockerDo("kill", "-9", loop) }},
		{"the loop in the container is stalled", "no answer within", func(t *testing.T, loop string) {
			dockerDo("kill", "-STOP", loop)
			t.Cleanup(func() { exec.Command("docker", "exec", c.Name, "kill", "-CONT", loop).Run() })
		}},
		{"the docker exec carrying it is killed", "ended", func(t *testing.T, _ string) {
			pids := dockerExecClients(c.Name)
			if len(pids) != 1 {
				t.Fatalf("%d docker exec clients for the container, want the resident session's 1", len(pids))
			}
			syscall.Kill(pids[0], syscall.SIGKILL)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, book := residentPool(t, ResidentOptions{HealthEvery: time.Hour})
			dk := open(t, p, &Spec{Kind: "docker", Addr: c.Name})
			rs, err := dk.ExecBatch(testCtx(t), []Command{{Script: "echo $PPID"}, {Script: "true"}})
			if err != nil {
				t.Fatal(err)
			}
			loop := strings.TrimSpace(rs[0].Stdout)
			tc.apply(t, loop)
			start := time.Now()
			rs, err = dk.ExecBatch(testCtx(t), []Command{{Script: "echo $PPID", Timeout: 10 * time.Second}, {Script: "echo again", Timeout: 10 * time.Second}})
			took := time.Since(start)
			if err != nil || rs[1].Stdout != "again\n" {
				t.Fatalf("after the damage: %+v, %v\n%s", rs, err, book.all())
			}
			for i, r := range rs {
				if !strings.Contains(r.Note, tc.note) || !(strings.Contains(r.Note, "fresh session") || strings.Contains(r.Note, "restarted")) {
					t.Errorf("step %d note %q: want it to say the resident session broke (%q) and what ran the step", i, r.Note, tc.note)
				}
			}
			if limit := 6 * time.Second; took > limit {
				t.Errorf("the run took %s, longer than its steps' timeouts (%s)", took, limit)
			}
			if next, err := dk.Exec(testCtx(t), Command{Script: "echo $PPID"}); err != nil || strings.TrimSpace(next.Stdout) == loop || next.Note != "" {
				t.Errorf("the run after: %+v, %v; want a new resident loop and no note", next, err)
			}
		})
	}
}

// levelBook collects a pool's log records at INFO and above, as the
// daemon logs them by default, one "LEVEL msg" line each.
type levelBook struct {
	mu    sync.Mutex
	lines []string
}

func (b *levelBook) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (b *levelBook) Handle(_ context.Context, r slog.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, r.Level.String()+" "+r.Message)
	return nil
}
func (b *levelBook) WithAttrs([]slog.Attr) slog.Handler { return b }
func (b *levelBook) WithGroup(string) slog.Handler      { return b }

// matching returns the lines that contain s.
func (b *levelBook) matching(s string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// leveledPool returns a resident pool logging into a levelBook.
func leveledPool(t *testing.T, opts ResidentOptions) (*Pool, *levelBook) {
	t.Helper()
	book := &levelBook{}
	p := NewPool(PoolOptions{Resident: &opts, Log: slog.New(book)})
	t.Cleanup(func() { p.Close() })
	return p, book
}

// TestResidentReplacementSaidOnce: an idle ssh loop stopped (SIGSTOP, a
// hung target) is replaced, and the replacement is noted once, on the
// stage it affected, and logged once, at WARN: when two stages meet it at
// once (one waits on the stopped loop and runs in a fresh session, the
// other starts a new resident session) and when the health check finds it
// first (the stage whose run starts the new session says so).
func TestResidentReplacementSaidOnce(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	steps := []Command{{Script: "echo a", Timeout: 10 * time.Second}, {Script: "echo b", Timeout: 10 * time.Second}}
	for _, tc := range []struct {
		name string
		opts ResidentOptions
		why  string
	}{
		{"met by two stages", ResidentOptions{HealthEvery: time.Hour, AckTimeout: time.Second}, "no answer within"},
		{"found by the health check", ResidentOptions{HealthEvery: 200 * time.Millisecond, AckTimeout: 500 * time.Millisecond}, "health check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, book := leveledPool(t, tc.opts)
			tr := open(t, p, sshSpec(s))
			pid := loopPID(t, tr)
			syscall.Kill(pid, syscall.SIGSTOP)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
			if tc.opts.HealthEvery < time.Hour {
				wait.Until(t, "the health check closes the stopped loop", func() (bool, string) {
					return len(p.ResidentSessions()) == 0, fmt.Sprint(p.ResidentSessions())
				})
			}
			var mu sync.Mutex
			var notes []string
			for run := 0; run < 2; run++ {
				var wg sync.WaitGroup
				for stage := 0; stage < 2; stage++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rs, err := tr.ExecBatch(testCtx(t), steps)
						if err != nil || len(rs) != 2 || rs[0].Stdout != "a\n" || rs[1].Stdout != "b\n" || rs[0].Note != rs[1].Note {
							t.Errorf("run %d stage %d: %+v, %v", run, stage, rs, err)
							return
						}
						if rs[0].Note != "" {
							mu.Lock()
							notes = append(notes, fmt.Sprintf("run %d stage %d: %s", run, stage, rs[0].Note))
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
			}
			logged := book.matching(tc.why)
			if len(notes) != 1 || !strings.Contains(notes[0], tc.why) || len(logged) != 1 || !strings.HasPrefix(logged[0], "WARN ") {
				t.Errorf("the replacement of the stopped loop is noted on %q and logged as %q; want one note and one WARN line saying %q\nall: %q", notes, logged, tc.why, book.lines)
			}
		})
	}
}

// TestExpectedResidentLifeEventsAreInfo: an idle loop that ends (exit 137,
// as a container's redeploy ends it) is an expected life event: its
// replacement is noted and logged once at INFO, and nothing is a WARN.
func TestExpectedResidentLifeEventsAreInfo(t *testing.T) {
	t.Parallel()
	p, book := leveledPool(t, ResidentOptions{})
	tr := open(t, p, &Spec{Kind: "local"})
	pid := loopPID(t, tr)
	syscall.Kill(pid, syscall.SIGKILL)
	wait.Until(t, "the idle loop's end is seen", func() (bool, string) {
		return len(p.ResidentSessions()) == 0, fmt.Sprint(p.ResidentSessions())
	})
	for i := 0; i < 2; i++ {
		res, err := tr.Exec(testCtx(t), Command{Script: "echo fine"})
		if err != nil || res.Stdout != "fine\n" || (i == 0) != strings.Contains(res.Note, "ended while idle (the loop ended (exit 137)") {
			t.Fatalf("run %d after the loop ended: %+v, %v; want the first noted", i, res, err)
		}
	}
	if warns, said := book.matching("WARN "), book.matching("exit 137"); len(warns) != 0 || len(said) != 1 || !strings.HasPrefix(said[0], "INFO ") {
		t.Errorf("log: %q; want the end said once at INFO and no WARN", book.lines)
	}
}

// TestSlowLoginReapSaidOnce: on a host whose login takes longer than the
// reaper's deadline, every command stopped at its deadline leaves a reap
// that cannot finish; that is expected there (the target's own timeout
// still stops the command), so it is said once, at INFO, not a WARN a run.
func TestSlowLoginReapSaidOnce(t *testing.T) {
	t.Parallel()
	slow(t)
	dir := t.TempDir()
	rc := dir + "/slow-login"
	if err := os.WriteFile(rc, []byte("sleep "+strconv.Itoa(int(reapTimeout/time.Second)+2)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// bash reads BASH_ENV before it runs a session's command: a slow login.
	s := startSSHD(t, sshd.Options{Env: map[string]string{"BASH_ENV": rc}})
	book := &levelBook{}
	p := NewPool(PoolOptions{Log: slog.New(book)})
	t.Cleanup(func() { p.Close() })
	tr := open(t, p, sshSpec(s))
	for i := 0; i < 2; i++ {
		if _, err := tr.Exec(testCtx(t), Command{Script: "true", Timeout: time.Second}); !errors.Is(err, ErrTimeout) {
			t.Fatalf("run %d: err = %v, want the login to outlast the deadline", i, err)
		}
	}
	if reaps := book.matching("reap "); len(reaps) != 1 || !strings.HasPrefix(reaps[0], "INFO ") {
		t.Errorf("reap lines %q; want one, at INFO\nall: %q", reaps, book.lines)
	}
}
