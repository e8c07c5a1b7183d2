package transports

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
	"golang.org/x/crypto/ssh"
)

// holdUntil returns a script fragment that waits until the file release
// exists, and the command line (a short sleep no other process has) that
// shows it waiting in a process list.
func holdUntil(release string) (script, marker string) {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	marker = fmt.Sprintf("sleep 0.05%06d", n.Int64())
	return fmt.Sprintf("while [ ! -e %s ]; do %s; done", quote(release), marker), marker
}

// uniqueSleep is a practically endless sleep that no other process has on
// its command line; something must kill it.
func uniqueSleep() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	return fmt.Sprintf("sleep %d", 3_000_000+n.Int64())
}

// psArgs lists the command lines of every process on the host, from a
// second, independent ssh session.
func psArgs(t *testing.T, s *sshd.Server) string {
	t.Helper()
	out, err := s.Run(testCtx(t), "ps -eo args")
	if err != nil {
		t.Fatalf("ps over a second session: %v", err)
	}
	return out
}

func TestSSHExec(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	ctx := testCtx(t)

	cases := []struct {
		name       string
		cmd        Command
		wantOut    string
		wantErr    string
		wantCode   int
		wantOutLen int64
	}{
		{name: "stdout and exit 0", cmd: Command{Script: "echo hello; echo world"}, wantOut: "hello\nworld\n", wantOutLen: 12},
		{name: "exit code passes through", cmd: Command{Script: "echo partial; exit 3"}, wantOut: "partial\n", wantCode: 3, wantOutLen: 8},
		{name: "stderr is kept apart", cmd: Command{Script: "echo oops >&2; false"}, wantErr: "oops\n", wantCode: 1},
		{name: "bash features under the default shell", cmd: Command{Script: "a=(x y z); echo ${#a[@]}"}, wantOut: "3\n", wantOutLen: 2},
		{name: "sh when asked", cmd: Command{Script: "echo $0", Shell: "sh"}, wantOut: "sh\n", wantOutLen: 3},
		{name: "quotes and newlines in the script arrive intact", cmd: Command{Script: "printf '%s|' \"it's\" 'a \"b\"'\necho"}, wantOut: "it's|a \"b\"|\n", wantOutLen: 12},
		{name: "a script that reads stdin sees EOF, not the rest of our framing", cmd: Command{Script: "cat; echo after"}, wantOut: "after\n", wantOutLen: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tr.Exec(ctx, tc.cmd)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if res.Stdout != tc.wantOut || res.Stderr != tc.wantErr || res.ExitCode != tc.wantCode {
				t.Fatalf("got stdout %q stderr %q exit %d, want %q %q %d", res.Stdout, res.Stderr, res.ExitCode, tc.wantOut, tc.wantErr, tc.wantCode)
			}
			if tc.wantOutLen != 0 && res.StdoutBytes != tc.wantOutLen {
				t.Fatalf("StdoutBytes = %d, want %d", res.StdoutBytes, tc.wantOutLen)
			}
			if res.TimedOut {
				t.Fatal("TimedOut set on a command that finished")
			}
		})
	}
}

func TestSSHOutputCap(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	cases := []struct {
		name    string
		cmd     Command
		keep    int
		total   int64
		capErrs bool
	}{
		{name: "default cap of 1 MiB on stdout", cmd: Command{Script: "head -c 3000000 /dev/zero | tr '\\0' a"}, keep: DefaultOutputCap, total: 3000000},
		{name: "explicit cap applies to stderr too", cmd: Command{Script: "head -c 5000 /dev/zero | tr '\\0' b >&2", Cap: 100}, keep: 100, total: 5000, capErrs: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tr.Exec(testCtx(t), tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			text, total := res.Stdout, res.StdoutBytes
			if tc.capErrs {
				text, total = res.Stderr, res.StderrBytes
			}
			note := fmt.Sprintf("\n[captured %d of %d bytes]", tc.keep, tc.total)
			if total != tc.total || !strings.HasSuffix(text, note) || len(text) != tc.keep+len(note) {
				t.Fatalf("total %d, len %d, tail %q; want total %d, %d bytes kept and note %q",
					total, len(text), text[max(0, len(text)-60):], tc.total, tc.keep, note)
			}
		})
	}
}

func TestSSHTimeoutKillsRemoteProcess(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	for _, shell := range []string{"bash", "sh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			sleep := uniqueSleep()
			// The sleep is a child of the shell, not exec'd: the kill must
			// reach the whole tree, not just the shell. Its printed PID
			// proves it was running.
			res, err := tr.Exec(testCtx(t), Command{Script: sleep + " & echo $!; wait; echo survived", Shell: shell, Timeout: 1500 * time.Millisecond})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if !res.TimedOut || strings.Contains(res.Stdout, "survived") || strings.TrimSpace(res.Stdout) == "" {
				t.Fatalf("result %+v: want TimedOut, the sleep's PID and no output after it", res)
			}
			wait.Until(t, "the remote sleep is gone", func() (bool, string) {
				ps := psArgs(t, s)
				return !strings.Contains(ps, sleep), ps
			})
			// The pooled connection survives a timed-out session.
			res, err = tr.Exec(testCtx(t), Command{Script: "echo still here"})
			if err != nil || res.Stdout != "still here\n" {
				t.Fatalf("after timeout: %+v, %v", res, err)
			}
		})
	}
}

// writeKnownHosts writes a known_hosts file with one line for s's address
// holding key.
func writeKnownHosts(t *testing.T, s *sshd.Server, key ssh.PublicKey) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "known_hosts")
	line := fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, ssh.MarshalAuthorizedKey(key))
	if err := os.WriteFile(f, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func newKey(t *testing.T) (ssh.PublicKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(pub)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	f := filepath.Join(t.TempDir(), "id_other")
	if err := os.WriteFile(f, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return sp, f
}

func TestSSHRefusals(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	otherKey, otherIdentity := newKey(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	// A listener that accepts and then says nothing, like a hung sshd.
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		silent.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	})
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	silentPort := silent.Addr().(*net.TCPAddr).Port

	cases := []struct {
		name string
		edit func(*Spec)
		want []string // substrings of the error
	}{
		{
			name: "host key mismatch names host and presented fingerprint",
			edit: func(sp *Spec) { sp.KnownHosts = writeKnownHosts(t, s, otherKey) },
			want: []string{"HOST KEY MISMATCH", s.Addr, s.HostKeyFingerprint, ssh.FingerprintSHA256(otherKey)},
		},
		{
			name: "host key mismatch is refused under accept-new too",
			edit: func(sp *Spec) {
				sp.KnownHosts = writeKnownHosts(t, s, otherKey)
				sp.HostKeyPolicy = HostKeyAcceptNew
			},
			want: []string{"HOST KEY MISMATCH", s.HostKeyFingerprint},
		},
		{
			name: "unknown host refused under strict",
			edit: func(sp *Spec) { sp.KnownHosts = filepath.Join(t.TempDir(), "known_hosts") },
			want: []string{"unknown host key", s.Addr, s.HostKeyFingerprint, "strict"},
		},
		{
			name: "auth failure",
			edit: func(sp *Spec) { sp.Identity = []string{otherIdentity} },
			want: []string{"authentication failed", s.User},
		},
		{
			name: "dial refused",
			edit: func(sp *Spec) { sp.Port = closedPort },
			want: []string{"dial", "refused"},
		},
		{
			name: "connect timeout on a server that never speaks",
			edit: func(sp *Spec) { sp.Port, sp.ConnectTimeout = silentPort, 300*time.Millisecond },
			want: []string{"handshake", "deadline exceeded"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, book := newPool(t, PoolOptions{})
			spec := sshSpec(s)
			tc.edit(spec)
			proof := filepath.Join(t.TempDir(), "ran")
			res, err := open(t, p, spec).Exec(testCtx(t), Command{Script: "touch " + proof})
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("err = %v (result %+v), want ErrUnreachable", err, res)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, statErr := os.Stat(proof); statErr == nil {
				t.Error("the script ran although the connection was refused")
			}
			if !strings.Contains(book.all(), err.Error()) {
				t.Errorf("log %q does not carry the error", book.all())
			}
		})
	}
}

func TestSSHAcceptNewRecordsHostKey(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	kh := filepath.Join(t.TempDir(), "sub", "known_hosts") // neither file nor dir exists yet
	spec := sshSpec(s)
	spec.KnownHosts, spec.HostKeyPolicy = kh, HostKeyAcceptNew
	p, book := newPool(t, PoolOptions{})
	res, err := open(t, p, spec).Exec(testCtx(t), Command{Script: "echo in"})
	if err != nil || res.Stdout != "in\n" {
		t.Fatalf("accept-new exec: %+v, %v", res, err)
	}
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	wantLine := fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
	if strings.TrimSpace(string(b)) != wantLine {
		t.Fatalf("known_hosts = %q, want %q", b, wantLine)
	}
	if !strings.Contains(book.all(), "accepted new host key") || !strings.Contains(book.all(), s.HostKeyFingerprint) {
		t.Errorf("log %q does not record the accepted key", book.all())
	}
	// The recorded key now satisfies a strict pool.
	strict := sshSpec(s)
	strict.KnownHosts = kh
	p2, _ := newPool(t, PoolOptions{})
	if _, err := open(t, p2, strict).Exec(testCtx(t), Command{Script: "true"}); err != nil {
		t.Fatalf("strict with the recorded key: %v", err)
	}
}

func TestSSHServerKilledThenBack(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	p, book := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	ctx := testCtx(t)
	if _, err := tr.Exec(ctx, Command{Script: "true"}); err != nil {
		t.Fatal(err)
	}

	sleep := uniqueSleep()
	errc := make(chan error, 1)
	go func() {
		_, err := tr.Exec(ctx, Command{Script: sleep, Timeout: 30 * time.Second})
		errc <- err
	}()
	wait.Until(t, "the remote sleep starts", func() (bool, string) {
		ps := psArgs(t, s)
		return strings.Contains(ps, sleep), ps
	})
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("command running while sshd died: err = %v, want ErrUnreachable (connection lost)", err)
	}
	if _, err := tr.Exec(ctx, Command{Script: "true"}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("while sshd is down: err = %v, want ErrUnreachable", err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Exec(ctx, Command{Script: "echo back"})
	if err != nil || res.Stdout != "back\n" {
		t.Fatalf("after restart the same transport should reconnect: %+v, %v\nlog:\n%s", res, err, book.all())
	}
}

func TestSSHJumpHost(t *testing.T) {
	t.Parallel()
	jump := startSSHD(t, sshd.Options{})
	inner := startSSHD(t, sshd.Options{})
	spec := sshSpec(inner)
	spec.Via = sshSpec(jump)

	p, _ := newPool(t, PoolOptions{})
	tr := open(t, p, spec)
	if want := fmt.Sprintf("ssh %s@%s → ssh %s@%s", jump.User, jump.Addr, inner.User, inner.Addr); tr.String() != want {
		t.Errorf("String() = %q, want %q", tr.String(), want)
	}
	res, err := tr.Exec(testCtx(t), Command{Script: "echo \"$SSH_CONNECTION\""})
	if err != nil {
		t.Fatal(err)
	}
	// SSH_CONNECTION is "client-ip client-port server-ip server-port".
	if f := strings.Fields(res.Stdout); len(f) != 4 || f[3] != fmt.Sprint(inner.Port) {
		t.Fatalf("SSH_CONNECTION = %q, want the inner server's port %d", res.Stdout, inner.Port)
	}

	// Without the jump host the chain is unreachable, though the inner
	// host is up: the connection really goes through the jump.
	if err := jump.Kill(); err != nil {
		t.Fatal(err)
	}
	p2, _ := newPool(t, PoolOptions{})
	_, err = open(t, p2, spec).Exec(testCtx(t), Command{Script: "true"})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), jump.Addr) {
		t.Fatalf("with the jump host down: err = %v, want ErrUnreachable naming %s", err, jump.Addr)
	}
}

func TestSSHSecretsStayHidden(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, book := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	secret := "tok-" + strings.TrimPrefix(uniqueSleep(), "sleep ")
	release := filepath.Join(t.TempDir(), "release")
	hold, sleep := holdUntil(release)

	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := tr.Exec(testCtx(t), Command{
			Script: "echo \"token=$API_TOKEN\"; " + hold + "; echo \"$API_TOKEN\" >&2; curl_like() { echo \"$1\"; }; curl_like \"$API_TOKEN\"",
			Env:    map[string]string{"API_TOKEN": secret},
		})
		done <- out{res, err}
	}()
	var seen string
	wait.Until(t, "the step is running", func() (bool, string) {
		seen = psArgs(t, s)
		return strings.Contains(seen, sleep), seen
	})
	os.WriteFile(release, nil, 0o600)
	if strings.Contains(seen, secret) {
		t.Fatalf("secret visible in the remote process list:\n%s", seen)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.res.Stdout != "token=***\n***\n" || o.res.Stderr != "***\n" {
		t.Fatalf("result not redacted: stdout %q stderr %q", o.res.Stdout, o.res.Stderr)
	}
	if strings.Contains(fmt.Sprintf("%+v", o.res), secret) || strings.Contains(book.all(), secret) {
		t.Fatal("secret leaked into the result or the log")
	}
}

func TestSSHDialerReachesLoopbackOfHost(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	p, _ := newPool(t, PoolOptions{})
	d, err := p.Dialer(sshSpec(s))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := client.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from "+l.Addr().String() {
		t.Fatalf("body = %q", body)
	}

	if _, err := p.Dialer(&Spec{Kind: "docker", Addr: "web"}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("Dialer for docker: err = %v, want ErrInvalidSpec", err)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := closed.Addr().String()
	closed.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	// The ssh host answered and its end of the forward found the port
	// closed: nothing answered there, as a local probe of a closed port
	// sees; not an unreachable target.
	var refused *ssh.OpenChannelError
	if _, err := d.DialContext(ctx, "tcp", addr); err == nil || errors.Is(err, ErrUnreachable) || !errors.As(err, &refused) {
		t.Fatalf("forward to a closed port: err = %v, want the ssh server's refusal, not ErrUnreachable", err)
	}
}

func TestSSHLoginNoiseStaysOutOfResults(t *testing.T) {
	t.Parallel()
	rc := filepath.Join(t.TempDir(), "noisy-rc")
	os.WriteFile(rc, []byte("echo motd-on-stdout; echo warning-on-stderr >&2\n"), 0o644)
	// bash sources BASH_ENV for every non-interactive shell: the login's
	// and ours, both before the script starts.
	s := startSSHD(t, sshd.Options{Env: map[string]string{"BASH_ENV": rc}})
	p, book := newPool(t, PoolOptions{})
	tr := open(t, p, sshSpec(s))
	res, err := tr.Exec(testCtx(t), Command{Script: "echo out; echo err >&2"})
	if err != nil || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Fatalf("got %+v, %v; want only the script's output", res, err)
	}
	rs, err := tr.ExecBatch(testCtx(t), []Command{{Script: "echo a"}, {Script: "echo b >&2"}})
	if err != nil || rs[0].Stdout != "a\n" || rs[0].Stderr != "" || rs[1].Stdout != "" || rs[1].Stderr != "b\n" {
		t.Fatalf("batch got %+v, %v; want only the steps' output", rs, err)
	}
	if !strings.Contains(book.all(), "warning-on-stderr") {
		t.Fatalf("the login's output is not logged:\n%s", book.all())
	}
}

// TestSSHCancelKillsRemoteProcess covers a run stopped by cancellation with
// no deadline, where no `timeout` on the target can help and sshd ignores
// signal requests from root logins: the reaper must find the processes.
func TestSSHCancelKillsRemoteProcess(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	p, _ := newPool(t, PoolOptions{})
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			tr := open(t, p, sshSpec(s))
			sleep := uniqueSleep()
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			done := make(chan error, 1)
			go func() {
				var err error
				if batch {
					_, err = tr.ExecBatch(ctx, []Command{{Script: "echo a"}, {Script: "(" + sleep + ") & wait"}})
				} else {
					_, err = tr.Exec(ctx, Command{Script: "(" + sleep + ") & wait"})
				}
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
			wait.Until(t, "the remote sleep is gone", func() (bool, string) {
				ps := psArgs(t, s)
				return !strings.Contains(ps, sleep), ps
			})
		})
	}
}
