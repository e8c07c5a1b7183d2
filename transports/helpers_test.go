package transports

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
)

// startSSHD starts a throwaway sshd with quiet logins (the dev machine's
// ~/.bashrc is not what these tests are about, and can cost seconds per
// session under load), or skips the test with the reason.
func startSSHD(t testing.TB, opts sshd.Options) *sshd.Server {
	t.Helper()
	opts.QuietLogin = true
	return startRealSSHD(t, opts)
}

// startRealSSHD starts a throwaway sshd with opts as given.
func startRealSSHD(t testing.TB, opts sshd.Options) *sshd.Server {
	t.Helper()
	need.SSHD(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := sshd.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

// sshSpec is the spec that reaches s as its user with its key and known_hosts.
func sshSpec(s *sshd.Server) *Spec {
	return &Spec{
		Kind:       "ssh",
		User:       s.User,
		Host:       s.Host,
		Port:       s.Port,
		Identity:   []string{s.IdentityFile},
		KnownHosts: s.KnownHostsFile,
	}
}

// logBook collects a pool's log lines.
type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBook) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBook) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// newPool returns a pool closed at cleanup and the book of its log lines.
func newPool(t testing.TB, opts PoolOptions) (*Pool, *logBook) {
	t.Helper()
	book := &logBook{}
	opts.Logf = book.logf
	p := NewPool(opts)
	t.Cleanup(func() { p.Close() })
	return p, book
}

func open(t testing.TB, p *Pool, spec *Spec) Transport {
	t.Helper()
	tr, err := p.Open(spec)
	if err != nil {
		t.Fatalf("open %v: %v", spec.Chain(), err)
	}
	return tr
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fixturesDir is the repository's fixtures/ directory.
func fixturesDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Join(filepath.Dir(file), "..", "fixtures")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("fixtures dir: %v", err)
	}
	abs, _ := filepath.Abs(d)
	return abs
}

// slow skips a case that waits out real timeouts or kill graces when the
// run asked for -short.
func slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: waits out real timeouts; run without -short")
	}
}
