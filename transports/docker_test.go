package transports

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/dockerimg"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
)

// busyboxContainer starts a FROM-scratch busybox container, or skips.
func busyboxContainer(t *testing.T) *dockerimg.Container {
	t.Helper()
	return containerWith(t, nil)
}

// hostPS lists command lines of every process on the host, containers' included.
func hostPS(t *testing.T) string {
	out, err := exec.Command("ps", "-eo", "args").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestDockerContainer(t *testing.T) {
	t.Parallel()
	c := busyboxContainer(t)
	p, book := newPool(t, PoolOptions{})
	tr := open(t, p, &Spec{Kind: "docker", Addr: c.Name})
	ctx := testCtx(t)

	cases := []struct {
		name     string
		cmd      Command
		wantOut  string
		wantErr  string
		wantCode int
	}{
		{"stdout and exit code", Command{Script: "echo in-container; exit 3"}, "in-container\n", "", 3},
		{"stderr", Command{Script: "echo bad >&2"}, "", "bad\n", 0},
		{"bash asked for but absent falls back to sh", Command{Script: "echo $0", Shell: "bash"}, "sh\n", "", 0},
		{"secrets exported and redacted", Command{Script: "echo $PASS", Env: map[string]string{"PASS": "hunter2-xyz"}}, "***\n", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tr.Exec(ctx, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tc.wantOut || res.Stderr != tc.wantErr || res.ExitCode != tc.wantCode {
				t.Fatalf("got %q %q %d, want %q %q %d", res.Stdout, res.Stderr, res.ExitCode, tc.wantOut, tc.wantErr, tc.wantCode)
			}
		})
	}
	t.Run("batch with a hung step", func(t *testing.T) {
		slow(t)
		sleep := uniqueSleep()
		rs, err := tr.ExecBatch(ctx, []Command{
			{Script: "echo one"},
			{Script: "echo started; " + sleep, Timeout: time.Second},
			{Script: "exit 6"},
		})
		if err != nil || len(rs) != 3 || rs[0].Stdout != "one\n" || !rs[1].TimedOut || rs[1].Stdout != "started\n" || rs[2].ExitCode != 6 {
			t.Fatalf("batch: %+v, %v", rs, err)
		}
		wait.Until(t, "the hung step's sleep is gone", func() (bool, string) {
			ps := hostPS(t)
			return !strings.Contains(ps, sleep), ps
		})
	})
	t.Run("through ssh", func(t *testing.T) {
		s := startSSHD(t, sshd.Options{})
		viaSSH := open(t, p, &Spec{Kind: "docker", Addr: c.Name, Via: sshSpec(s)})
		rs, err := viaSSH.ExecBatch(ctx, []Command{{Script: "echo a"}, {Script: "hostname; exit 2"}})
		if err != nil || len(rs) != 2 || rs[0].Stdout != "a\n" || rs[1].ExitCode != 2 || strings.TrimSpace(rs[1].Stdout) == "" {
			t.Fatalf("docker via ssh: %+v, %v", rs, err)
		}
		hostname, _ := os.Hostname()
		if strings.TrimSpace(rs[1].Stdout) == hostname {
			t.Fatalf("ran on the host (%s), not in the container", hostname)
		}
	})
	t.Run("timeout kills the process in the container", func(t *testing.T) {
		slow(t)
		sleep := uniqueSleep()
		res, err := tr.Exec(ctx, Command{Script: sleep + " & echo $!; wait; echo survived", Timeout: 2 * time.Second})
		if err != nil || !res.TimedOut || strings.Contains(res.Stdout, "survived") || strings.TrimSpace(res.Stdout) == "" {
			t.Fatalf("got %+v, %v; want timed out", res, err)
		}
		wait.Until(t, "the sleep in the container is gone", func() (bool, string) {
			ps := hostPS(t)
			return !strings.Contains(ps, sleep), ps
		})
	})
	t.Run("cancelling the run kills the process in the container", func(t *testing.T) {
		slow(t)
		sleep := uniqueSleep()
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := tr.Exec(cctx, Command{Script: "(" + sleep + ") & wait"})
			done <- err
		}()
		wait.Until(t, "the sleep in the container starts", func() (bool, string) {
			ps := hostPS(t)
			return strings.Contains(ps, sleep), ps
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		wait.Until(t, "the sleep in the container is gone", func() (bool, string) {
			ps := hostPS(t)
			return !strings.Contains(ps, sleep), ps
		})
	})
	t.Run("missing container is unreachable", func(t *testing.T) {
		_, err := open(t, p, &Spec{Kind: "docker", Addr: c.Name + "-absent"}).Exec(ctx, Command{Script: "true"})
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "No such container") {
			t.Fatalf("err = %v, want ErrUnreachable with docker's message", err)
		}
	})
	t.Run("stopped container is unreachable", func(t *testing.T) {
		slow(t)
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for _, batch := range []bool{false, true} {
			var err error
			if batch {
				_, err = tr.ExecBatch(ctx, []Command{{Script: "true"}, {Script: "true"}})
			} else {
				_, err = tr.Exec(ctx, Command{Script: "true"})
			}
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "is not running") {
				t.Fatalf("batch=%v: err = %v, want ErrUnreachable (is not running)", batch, err)
			}
		}
	})
	if strings.Contains(book.all(), "hunter2-xyz") {
		t.Fatal("secret in the log")
	}
}

// containerProcs lists the processes in container c as "pid state ppid
// comm", from the container's own /proc (zombies included, which `docker
// top` leaves out), without the lister itself.
func containerProcs(t *testing.T, c *dockerimg.Container) []string {
	t.Helper()
	out, err := exec.Command("docker", "exec", c.Name, "sh", "-c", `echo $$; for f in /proc/[0-9]*/stat; do read -r l <"$f" && echo "$l"; done 2>/dev/null`).Output()
	if err != nil {
		t.Fatalf("listing the processes in %s: %v", c.Name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	self := lines[0]
	var procs []string
	for _, l := range lines[1:] {
		// pid (comm) state ppid …: comm holds no space in this image.
		f := strings.Fields(l)
		if len(f) < 4 || f[0] == self || f[3] == self {
			continue
		}
		procs = append(procs, strings.Join(f[:4], " "))
	}
	return procs
}

// bashFiles are the files that make the host's bash run in a FROM-scratch
// image: the binary and the libraries ldd names, at their host paths.
func bashFiles(t *testing.T) map[string]string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("no bash on the host: %v", err)
	}
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bash, err)
	}
	files := map[string]string{"/bin/bash": bash}
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				files[f] = f
			}
		}
	}
	return files
}

// TestDockerLeavesNothingInTheContainer: a container whose PID 1 does not
// reap (an application, here `sleep`) inherits every process a probe
// leaves behind, and keeps each as a zombie for good: one per timed step
// would fill a container's pid limit and stop the service the contract
// watches. On a busybox image and on one with bash, timed commands, timed
// batch steps and a resident session's requests leave nothing: once each
// is answered, PID 1 (and the resident loop, while it is open) is all the
// container runs. None of them waits for its deadline's timer or says a
// word of its own on stderr.
func TestDockerLeavesNothingInTheContainer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files func(*testing.T) map[string]string
		shell string
	}{
		{"busybox", func(*testing.T) map[string]string { return nil }, "sh"},
		{"bash", bashFiles, "bash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := containerWith(t, tc.files(t))
			leavesNothing(t, c, tc.shell)
		})
	}
}

// containerWith starts a FROM-scratch busybox container holding files too
// (image path → host file), whose PID 1 is `sleep`, or skips.
func containerWith(t *testing.T, files map[string]string) *dockerimg.Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	need.Docker(t)
	need.Busybox(t)
	img, err := dockerimg.Build(ctx, dockerimg.Spec{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := img.Remove(context.Background()); err != nil {
			t.Error(err)
		}
	})
	c, err := dockerimg.Run(ctx, img.Tag, fmt.Sprintf("contractd-transports-%s", strings.TrimPrefix(token(), "contractd")[:12]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Remove(context.Background()) })
	return c
}

func leavesNothing(t *testing.T, c *dockerimg.Container, shell string) {
	ctx := testCtx(t)
	only := func(t *testing.T, what string, keep func(p string) bool) {
		t.Helper()
		wait.Until(t, what+" left nothing in the container (PID 1 never reaps)", func() (bool, string) {
			ps := containerProcs(t, c)
			var extra []string
			for _, p := range ps {
				if !strings.HasPrefix(p, "1 ") && !keep(p) {
					extra = append(extra, p)
				}
			}
			return len(extra) == 0, fmt.Sprintf("left behind: %q (all: %q)", extra, ps)
		})
	}
	none := func(string) bool { return false }
	steps := []Command{
		{Script: "echo one", Shell: shell, Timeout: 30 * time.Second},
		{Script: "echo two; exit 3", Shell: shell, Timeout: 30 * time.Second},
	}

	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, &Spec{Kind: "docker", Addr: c.Name})
	// The deadline's timer must stop when the command is done, every
	// time: a command that waited for its timer would take its whole
	// timeout (30 s), far beyond half of it even on a loaded machine.
	for i := 0; i < 20; i++ {
		start := time.Now()
		res, err := tr.Exec(ctx, Command{Script: "echo timed", Shell: shell, Timeout: 30 * time.Second})
		if took := time.Since(start); err != nil || res.Stdout != "timed\n" || res.Stderr != "" || res.ExitCode != 0 || took > 15*time.Second {
			t.Fatalf("timed command %d: %+v, %v, after %s", i, res, err, took)
		}
	}
	only(t, "twenty timed commands", none)
	for i := 0; i < 10; i++ {
		start := time.Now()
		rs, err := tr.ExecBatch(ctx, steps)
		if took := time.Since(start); err != nil || len(rs) != 2 || rs[0].Stdout != "one\n" || rs[0].Stderr != "" || rs[1].ExitCode != 3 || rs[1].Stderr != "" || took > 15*time.Second {
			t.Fatalf("batch %d: %+v, %v, after %s", i, rs, err, took)
		}
	}
	only(t, "ten batches of timed steps", none)

	rp, _ := residentPool(t, ResidentOptions{})
	rtr := open(t, rp, &Spec{Kind: "docker", Addr: c.Name})
	var loop string
	for i := 0; i < 10; i++ {
		start := time.Now()
		rs, err := rtr.ExecBatch(ctx, steps)
		if took := time.Since(start); err != nil || len(rs) != 2 || rs[0].Stdout != "one\n" || rs[0].Stderr != "" || rs[1].ExitCode != 3 || rs[1].Stderr != "" || took > 15*time.Second {
			t.Fatalf("resident request %d: %+v, %v, after %s", i, rs, err, took)
		}
		if loop == "" {
			for _, p := range containerProcs(t, c) {
				if f := strings.Fields(p); f[0] != "1" && f[3] == "0" {
					loop = f[0] // the loop is the exec's root: its parent is outside the container
				}
			}
		}
	}
	if loop == "" {
		t.Fatalf("no resident loop in the container: %q", containerProcs(t, c))
	}
	// The loop's own watchdog (bash) is its child and lives with it.
	only(t, "ten resident requests", func(p string) bool {
		f := strings.Fields(p)
		return f[0] == loop || f[3] == loop
	})
	rp.Close()
	only(t, "the resident session, closed,", none)
}

// TestBusyboxDeadlinesReportedAsTheyHappened: on a busybox container (no
// bash, busybox's timeout), a step that obeys TERM at its 2 s deadline is
// reported timed out after 2.x s, not with the KILL grace added; a step
// that kills its parent (`kill $PPID`) after 1 s ended then, with its
// output, and is not timed out: only the deadline firing is a timeout. The
// same holds for a lone command, a batch step and a resident session's.
func TestBusyboxDeadlinesReportedAsTheyHappened(t *testing.T) {
	slow(t)
	t.Parallel()
	c := busyboxContainer(t)
	ctx := testCtx(t)
	for _, resident := range []bool{false, true} {
		opts := PoolOptions{}
		if resident {
			opts.Resident = &ResidentOptions{}
		}
		p, _ := newPool(t, opts)
		tr := open(t, p, &Spec{Kind: "docker", Addr: c.Name})
		for _, batch := range []bool{false, true} {
			run := func(cmd Command) Result {
				t.Helper()
				if !batch {
					res, err := tr.Exec(ctx, cmd)
					if err != nil {
						t.Fatal(err)
					}
					return res
				}
				rs, err := tr.ExecBatch(ctx, []Command{{Script: "echo first", Timeout: 5 * time.Second}, cmd})
				if err != nil || len(rs) != 2 || rs[0].Stdout != "first\n" {
					t.Fatalf("batch: %+v, %v", rs, err)
				}
				return rs[1]
			}
			how := fmt.Sprintf("resident=%v batch=%v", resident, batch)
			res := run(Command{Script: "sleep 10", Timeout: 2 * time.Second})
			if !res.TimedOut || res.ExitCode != ExitTimedOut || res.Duration < 2*time.Second || res.Duration >= 3*time.Second {
				t.Errorf("%s: sleep 10 under timeout=2s: timed out %v after %s (exit %d); want timed out after 2.x s, exit %d", how, res.TimedOut, res.Duration, res.ExitCode, ExitTimedOut)
			}
			res = run(Command{Script: "sleep 1; echo out; kill $PPID", Timeout: 4 * time.Second})
			if res.TimedOut || res.Stdout != "out\n" || res.Duration < time.Second || res.Duration >= 2*time.Second {
				t.Errorf("%s: kill $PPID after 1 s under timeout=4s: timed out %v after %s (exit %d, stdout %q); want not timed out, out, after 1.x s", how, res.TimedOut, res.Duration, res.ExitCode, res.Stdout)
			}
		}
	}
}
