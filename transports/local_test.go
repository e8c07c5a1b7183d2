package transports

import (
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLocalExec(t *testing.T) {
	t.Parallel()
	p, book := newPool(t, PoolOptions{})
	tr := open(t, p, &Spec{Kind: "local"})
	cases := []struct {
		name     string
		cmd      Command
		wantOut  string
		wantErr  string
		wantCode int
		timedOut bool
	}{
		{name: "stdout and exit code", cmd: Command{Script: "echo out; exit 5"}, wantOut: "out\n", wantCode: 5},
		{name: "stderr", cmd: Command{Script: "echo err >&2"}, wantErr: "err\n"},
		{name: "killed by a signal reports 128+N", cmd: Command{Script: "kill -KILL $$"}, wantCode: 137},
		{name: "env exported, values redacted in stdout and stderr",
			cmd:     Command{Script: "echo \"$A-$B\"; echo \"$B\" >&2", Env: map[string]string{"A": "alpha-1", "B": "beta-22"}},
			wantOut: "***-***\n", wantErr: "***\n"},
		{name: "env values with quotes and newlines survive export",
			cmd:     Command{Script: "printf '%s' \"$Q\" | wc -c", Env: map[string]string{"Q": "it's \"q\"\n$(x)"}},
			wantOut: "13\n"},
		{name: "timeout stops the command and the run goes on",
			cmd:     Command{Script: "echo before; sleep 60; echo after", Timeout: 300 * time.Millisecond},
			wantOut: "before\n", wantCode: ExitTimedOut, timedOut: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tr.Exec(testCtx(t), tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(res.Stdout) != strings.TrimSpace(tc.wantOut) || res.Stderr != tc.wantErr || res.ExitCode != tc.wantCode || res.TimedOut != tc.timedOut {
				t.Fatalf("got %q %q exit %d timedout %v; want %q %q %d %v", res.Stdout, res.Stderr, res.ExitCode, res.TimedOut, tc.wantOut, tc.wantErr, tc.wantCode, tc.timedOut)
			}
		})
	}
	for _, secret := range []string{"alpha-1", "beta-22"} {
		if strings.Contains(book.all(), secret) {
			t.Fatalf("secret %q in the log", secret)
		}
	}
}

func TestLocalTimeoutKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	slow(t)
	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, &Spec{Kind: "local"})
	sleep := uniqueSleep()
	// A background child and a child that ignores SIGTERM must both go.
	res, err := tr.Exec(testCtx(t), Command{
		Script:  "(" + sleep + ") & (trap '' TERM; " + sleep + ") & wait",
		Timeout: 300 * time.Millisecond,
	})
	if err != nil || !res.TimedOut {
		t.Fatalf("got %+v, %v; want timed out", res, err)
	}
	// Exec reaps before returning: nothing is left, no polling needed.
	if ps := hostPS(t); strings.Contains(ps, sleep) {
		t.Fatalf("a child survived the timeout:\n%s", ps)
	}
}

func TestOpenRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, PoolOptions{})
	cases := []struct {
		name string
		spec *Spec
		want string
	}{
		{"unknown kind", &Spec{Kind: "telnet"}, `unknown kind "telnet"`},
		{"ssh without host", &Spec{Kind: "ssh", User: "root"}, "ssh needs user and host"},
		{"ssh bad policy", &Spec{Kind: "ssh", User: "root", Host: "h", HostKeyPolicy: "yolo"}, `host key policy "yolo"`},
		{"ssh through docker", &Spec{Kind: "ssh", User: "root", Host: "h", Via: &Spec{Kind: "docker", Addr: "c"}}, "can only hop through another ssh host"},
		{"pct without vmid", &Spec{Kind: "pct", Via: &Spec{Kind: "local"}}, "VMID"},
		{"docker name with shell characters", &Spec{Kind: "docker", Addr: "web; rm -rf /"}, `container name "web; rm -rf /"`},
		{"bad parent", &Spec{Kind: "pct", Addr: "1", Via: &Spec{Kind: "ssh"}}, "ssh needs user and host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Open(tc.spec)
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidSpec mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("closed pool", func(t *testing.T) {
		q := NewPool(PoolOptions{})
		q.Close()
		if _, err := q.Open(&Spec{Kind: "local"}); !errors.Is(err, ErrPoolClosed) {
			t.Fatalf("err = %v, want ErrPoolClosed", err)
		}
	})
}

func TestParseSSHAddr(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in         string
		user, host string
		port       int
		bad        bool
	}{
		{in: "root@h", user: "root", host: "h", port: 22},
		{in: "root@h:2222", user: "root", host: "h", port: 2222},
		{in: "deploy@10.0.0.5:22", user: "deploy", host: "10.0.0.5", port: 22},
		{in: "root@[::1]:2200", user: "root", host: "::1", port: 2200},
		{in: "root@[fe80::1]", user: "root", host: "fe80::1", port: 22},
		{in: "h", bad: true},
		{in: "@h", bad: true},
		{in: "root@", bad: true},
		{in: "root@h:0", bad: true},
		{in: "root@h:99999", bad: true},
		{in: "root@h:ssh", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			u, h, p, err := ParseSSHAddr(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrInvalidSpec) {
					t.Fatalf("got %q %q %d %v, want ErrInvalidSpec", u, h, p, err)
				}
				return
			}
			if err != nil || u != tc.user || h != tc.host || p != tc.port {
				t.Fatalf("got %q %q %d %v, want %q %q %d", u, h, p, err, tc.user, tc.host, tc.port)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		in      string
		secrets []string
		want    string
	}{
		{"every occurrence", "a=s3cr3t b=s3cr3t", []string{"s3cr3t"}, "a=*** b=***"},
		{"empty secrets ignored", "keep", []string{"", ""}, "keep"},
		{"longer secret wins over its prefix", "pw=hunter2x", []string{"hunter2", "hunter2x"}, "pw=***"},
		{"no secrets", "plain", nil, "plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in, tc.secrets); got != tc.want {
				t.Fatalf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("a secret cut by the output cap does not leak its first half", func(t *testing.T) {
		c := newCapture(10)
		c.Write([]byte("token=abcdefgh-rest"))
		if got := c.text([]string{"abcdefgh-rest"}); strings.Contains(got, "abcd") {
			t.Fatalf("capped text %q leaks the secret's prefix", got)
		}
	})
}

func TestRegistryRejectsDuplicates(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate kind did not panic")
		}
	}()
	registry(localKind, localKind)
}

// slowFirstWrite is a reader of a command's output that is not scheduled
// for a while (a loaded machine): its first Write returns after delay.
type slowFirstWrite struct {
	delay time.Duration
	once  sync.Once
	mu    sync.Mutex
	b     strings.Builder
}

func (w *slowFirstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { time.Sleep(w.delay) })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *slowFirstWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestLocalKeepsOutputItHasNotReadYet: a command that has exited keeps
// all it wrote, however long the copy of its output takes (a probe's
// "down" lost this way made a run unknown and lost an incident); only a
// descendant that keeps the pipe open is cut off, after the kill grace.
func TestLocalKeepsOutputItHasNotReadYet(t *testing.T) {
	t.Parallel()
	out := &slowFirstWrite{delay: killAfter + time.Second}
	code, err := (&Local{}).run(testCtx(t), []string{"sh", "-c", "echo first; sleep 0.2; echo second"}, strings.NewReader(""), out, io.Discard)
	if err != nil || code != 0 || out.String() != "first\nsecond\n" {
		t.Fatalf("exit %d, %v, output %q; want all of it", code, err, out.String())
	}
	// A detached child holding stdout does not keep run waiting for ever.
	sleep := uniqueSleep()
	t.Cleanup(func() { exec.Command("pkill", "-f", sleep).Run() })
	var held strings.Builder
	code, err = (&Local{}).run(testCtx(t), []string{"sh", "-c", "setsid " + sleep + " & echo started"}, strings.NewReader(""), &held, io.Discard)
	if err != nil || code != 0 || held.String() != "started\n" {
		t.Fatalf("with a detached child holding stdout: exit %d, %v, output %q", code, err, held.String())
	}
}
