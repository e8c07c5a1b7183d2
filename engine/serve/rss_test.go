package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
)

// idleContracts is how many contracts the idle-RSS measurement loads.
const idleContracts = 50

// BenchmarkDaemonIdleRSS measures the resident memory of a daemon with 50
// contracts loaded and idle (bar: < 40 MB) and prints
// `bench: daemon_idle_rss_mb N`.
//
// With CONTRACTD_BIN set to a built contractd (named contractd: another name
// is taken as a contract's command), it measures the real binary:
// `contractd serve` over 50 copies of fixtures/contracts/sibling-supervisor.md
// scheduled hourly, so none runs while it is measured.
// Without it, it measures this package's daemon in a child process (the test
// binary re-executed as TestIdleDaemonHelper), which is the daemon plus the
// test framework: an upper bound on the daemon's own share.
func BenchmarkDaemonIdleRSS(b *testing.B) {
	dir, state := b.TempDir(), b.TempDir()
	addr := freeAddr(b)
	var cmd *exec.Cmd
	if bin := os.Getenv("CONTRACTD_BIN"); bin != "" {
		tmpl, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "contracts", "sibling-supervisor.md"))
		if err != nil {
			b.Fatal(err)
		}
		nameLine := regexp.MustCompile(`(?m)^name: .*$`)
		// Idle: no run during the measurement.
		scheduleLine := regexp.MustCompile(`(?m)^schedule: .*$`)
		tmpl = scheduleLine.ReplaceAll(tmpl, []byte("schedule: {every: 1h, on_start: false}"))
		for i := range idleContracts {
			name := fmt.Sprintf("idle-%02d", i)
			body := nameLine.ReplaceAll(tmpl, []byte("name: "+name))
			if err := os.WriteFile(filepath.Join(dir, name+".md"), body, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		cmd = owner.Command(bin, "serve", "--dir", dir, "--state-dir", state, "--listen", addr)
	} else {
		for i := range idleContracts {
			writeContract(b, dir, fmt.Sprintf("idle-%02d", i), "1", "1h", false)
		}
		cmd = owner.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SERVE_IDLE_HELPER="+strings.Join([]string{dir, state, addr}, "\x1f"))
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()

	wait.For(b, fmt.Sprintf("the daemon to load %d contracts", idleContracts), func() bool {
		select {
		case err := <-exited:
			exited <- err // for the deferred cleanup
			b.Fatalf("daemon exited before loading its contracts: %v", err)
		default:
		}
		n, err := loadedCount("http://" + addr)
		return err == nil && n == idleContracts
	})
	time.Sleep(time.Second) // let start-up garbage be collected
	b.ResetTimer()
	var mb float64
	for range b.N {
		kb, err := vmRSSKB(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		mb = float64(kb) / 1024
	}
	b.ReportMetric(mb, "daemon_idle_rss_mb")
	fmt.Printf("bench: daemon_idle_rss_mb %.1f\n", mb)
}

// serveIdle is the child process of BenchmarkDaemonIdleRSS (TestMain runs
// it when SERVE_IDLE_HELPER is set): a daemon with a fake runner until
// SIGINT. It returns the exit code.
func serveIdle(spec string) int {
	parts := strings.Split(spec, "\x1f")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := Serve(ctx, Config{Dir: parts[0], StateDir: parts[1], Listen: parts[2],
		Logf:   func(string, ...any) {},
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle daemon:", err)
		return 1
	}
	return 0
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func loadedCount(base string) (int, error) {
	resp, err := http.Get(base + "/contracts")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list ContractList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, err
	}
	return len(list.Contracts), nil
}

func vmRSSKB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
