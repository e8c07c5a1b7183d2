package transports

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
	"golang.org/x/crypto/ssh"
)

func TestPoolSharesOneConnection(t *testing.T) {
	t.Parallel()
	s := startSSHD(t, sshd.Options{})
	p, book := newPool(t, PoolOptions{})
	spec := sshSpec(s)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// A fresh Open each time, as the engine does per step: the
			// connection is the pool's, not the transport's.
			tr := open(t, p, spec)
			res, err := tr.Exec(testCtx(t), Command{Script: fmt.Sprintf("echo %d; echo \"$SSH_CONNECTION\" >&2", i)})
			if err == nil && res.Stdout != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("step %d got %q", i, res.Stdout)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(book.all(), ": connected"); n != 1 {
		t.Fatalf("%d connections dialed for 12 concurrent steps, want 1; log:\n%s", n, book.all())
	}
}

// freezer is a TCP proxy whose existing connections can be frozen: bytes
// stop flowing both ways, as on a link that died without a FIN or RST.
type freezer struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	frozen chan struct{}
}

func newFreezer(t *testing.T, target string) *freezer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l, target: target, frozen: make(chan struct{})}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *freezer) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer up.Close()
	f.mu.Lock()
	frozen := f.frozen
	f.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-frozen:
				<-make(chan struct{}) // hold the connection open, forward nothing
			default:
			}
			if n > 0 {
				dst.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(up, c)
	pipe(c, up)
}

// freeze stalls every connection opened so far; later ones flow.
func (f *freezer) freeze() {
	f.mu.Lock()
	close(f.frozen)
	f.frozen = make(chan struct{})
	f.mu.Unlock()
}

func TestKeepAliveReplacesAStalledConnection(t *testing.T) {
	t.Parallel()
	slow(t)
	s := startSSHD(t, sshd.Options{})
	f := newFreezer(t, s.Addr)
	port := f.l.Addr().(*net.TCPAddr).Port
	spec := sshSpec(s)
	spec.Port = port
	spec.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(s.HostKey))
	os.WriteFile(spec.KnownHosts, []byte(line), 0o600)

	p, book := newPool(t, PoolOptions{KeepAlive: 200 * time.Millisecond})
	tr := open(t, p, spec)
	if _, err := tr.Exec(testCtx(t), Command{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	wait.Until(t, "keepalive notices the stalled link", func() (bool, string) {
		return strings.Contains(book.all(), "keepalive unanswered"), book.all()
	})
	res, err := tr.Exec(testCtx(t), Command{Script: "echo fresh"})
	if err != nil || res.Stdout != "fresh\n" {
		t.Fatalf("after the stall: %+v, %v\nlog:\n%s", res, err, book.all())
	}
	if n := strings.Count(book.all(), ": connected"); n != 2 {
		t.Fatalf("%d connections, want 2 (the stalled one and its replacement); log:\n%s", n, book.all())
	}
}

// TestSSHAgentKeys is not parallel: it sets SSH_AUTH_SOCK for the process.
func TestSSHAgentKeys(t *testing.T) {
	s := startSSHD(t, sshd.Options{})
	need.Command(t, "ssh-agent", "openssh-client")
	sock := filepath.Join(t.TempDir(), "agent.sock")
	agentCmd := owner.Command("ssh-agent", "-D", "-a", sock)
	agentCmd.Stdout, agentCmd.Stderr = io.Discard, io.Discard
	if err := agentCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agentCmd.Process.Kill(); agentCmd.Wait() })
	wait.Until(t, "agent socket exists", func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprint(err)
	})
	add := exec.Command("ssh-add", s.IdentityFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v: %s", err, out)
	}
	t.Setenv("SSH_AUTH_SOCK", sock)
	t.Setenv("HOME", t.TempDir()) // no ~/.ssh keys to fall back on

	spec := sshSpec(s)
	spec.Identity = nil
	p, _ := newPool(t, PoolOptions{})
	res, err := open(t, p, spec).Exec(testCtx(t), Command{Script: "echo via-agent"})
	if err != nil || res.Stdout != "via-agent\n" {
		t.Fatalf("agent login: %+v, %v", res, err)
	}
}

func TestPoolMaxSessionsQueuesSteps(t *testing.T) {
	t.Parallel()
	// This server allows 2 sessions per connection, like a host whose
	// MaxSessions is lower than the steps a daemon runs at once.
	s := startSSHD(t, sshd.Options{ExtraConfig: "MaxSessions 2"})
	for _, max := range []int{2, DefaultMaxSessions} {
		t.Run(fmt.Sprintf("pool MaxSessions %d", max), func(t *testing.T) {
			p, _ := newPool(t, PoolOptions{MaxSessions: max})
			tr := open(t, p, sshSpec(s))
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for i := 0; i < 6; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					res, err := tr.Exec(testCtx(t), Command{Script: fmt.Sprintf("sleep 0.3; echo %d", i)})
					if err == nil && res.Stdout != fmt.Sprintf("%d\n", i) {
						err = fmt.Errorf("step %d: %q", i, res.Stdout)
					}
					errs <- err
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("6 concurrent steps on a 2-session server: %v", err)
				}
			}
		})
	}
}
