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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	need.Docker(t)
	need.Busybox(t)
	img, err := dockerimg.Build(ctx, dockerimg.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := img.Remove(context.Background()); err != nil {
			t.Error(err)
		}
	})
	name := fmt.Sprintf("contractd-transports-%s", strings.TrimPrefix(token(), "contractd")[:12])
	c, err := dockerimg.Run(ctx, img.Tag, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Remove(context.Background()) })
	return c
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
	tr := open(t, p, &Spec{Kind: "docker", Container: c.Name})
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
		viaSSH := open(t, p, &Spec{Kind: "docker", Container: c.Name, Via: sshSpec(s)})
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
		_, err := open(t, p, &Spec{Kind: "docker", Container: c.Name + "-absent"}).Exec(ctx, Command{Script: "true"})
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
