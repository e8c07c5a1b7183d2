package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/wait"
)

// openStore opens the state dir dir as the engine keeps it.
func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeRunner is the engine stand-in: a struct of function fields.
type fakeRunner struct {
	run func(ctx context.Context, c *contracts.Contract) (*engine.Report, error)
}

func (f *fakeRunner) Run(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
	return f.run(ctx, c)
}

// report is what a healthy run of c returns.
func report(c *contracts.Contract) *engine.Report {
	now := time.Now()
	return &engine.Report{
		Contract: c.Name, Version: c.Version, RunID: now.Format("150405.000000000"),
		StartedAt: now, FinishedAt: now, OverallSeverity: contracts.SeverityHealthy, GateOK: true,
		Agents: map[string]*engine.AgentReport{},
	}
}

// runLog records the runs a fake runner saw.
type runLog struct {
	mu      sync.Mutex
	starts  map[string][]time.Time
	version map[string][]string
	active  map[string]int
	maxAct  map[string]int
}

func newRunLog() *runLog {
	return &runLog{starts: map[string][]time.Time{}, version: map[string][]string{}, active: map[string]int{}, maxAct: map[string]int{}}
}

func (l *runLog) begin(c *contracts.Contract) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts[c.Name] = append(l.starts[c.Name], time.Now())
	l.version[c.Name] = append(l.version[c.Name], c.Version)
	l.active[c.Name]++
	l.maxAct[c.Name] = max(l.maxAct[c.Name], l.active[c.Name])
}

func (l *runLog) end(c *contracts.Contract) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active[c.Name]--
}

func (l *runLog) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts[name])
}

func (l *runLog) times(name string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.starts[name]...)
}

func (l *runLog) versions(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.version[name]...)
}

// contractTemplate is a small real contract: the daemon lints it with
// contracts.LoadFile; the fake runner never executes its step.
const contractTemplate = `---
kind: responsibility
name: %s
version: "%s"
runtime_contract: 2
agent: ops
schedule: {every: %s, on_start: %t}
%s---

# %s

A contract the scheduler tests load.

## Execution

### Step 1: Local shell {#local agent=ops on=local}

` + "```sh {id=echo timeout=5s}\necho ok\n```" + `
Expected: ` + "`ok`" + `
`

// writeContract writes NAME.md with extra front-matter lines, atomically so
// the watcher never sees half a file, and returns its path.
func writeContract(t testing.TB, dir, name, version, every string, onStart bool, extra ...string) string {
	t.Helper()
	body := fmt.Sprintf(contractTemplate, name, version, every, onStart, strings.Join(extra, ""), name)
	path := filepath.Join(dir, name+".md")
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// logBuf collects the daemon's log lines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// daemon is one running daemon under test.
type daemon struct {
	t      *testing.T
	d      *Daemon
	base   string
	cancel context.CancelFunc
	done   chan error
	logs   *logBuf
}

func startDaemon(t *testing.T, cfg Config) *daemon {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	logs := &logBuf{}
	if cfg.Logf == nil {
		cfg.Logf = logs.logf
	}
	if cfg.HeldPoll == 0 {
		cfg.HeldPoll = 50 * time.Millisecond
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = 50 * time.Millisecond
	}
	d, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := &daemon{t: t, d: d, base: "http://" + d.Addr().String(), cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { h.done <- d.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	wait.For(h.t, "daemon to answer /healthz", func() bool {
		resp, err := http.Get(h.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return h
}

// stop cancels the daemon and returns what Run returned (once).
func (h *daemon) stop() error {
	h.cancel()
	select {
	case err, ok := <-h.done:
		if !ok {
			return nil
		}
		close(h.done)
		return err
	case <-time.After(20 * time.Second):
		h.t.Fatal("daemon did not stop within 20s")
		return nil
	}
}

// reload asks the daemon to re-read its directory and returns once it has:
// the daemon's loop takes a request only when it is done with the last,
// so a second request taken means the first reload finished.
func (h *daemon) reload() {
	h.t.Helper()
	for range 2 {
		h.d.Reload()
		wait.For(h.t, "the daemon to take the reload request", func() bool { return len(h.d.reloadReq) == 0 })
	}
}

// watchedClock is the system clock that counts the waits the daemon arms
// on it, by length. A contract's loop arms one each time it goes back to
// waiting, so a count that grew says the scheduler woke and had its chance
// to act; a test waits for that, then asserts what it did or did not do.
type watchedClock struct {
	clock.Real
	mu    sync.Mutex
	waits map[time.Duration]int
	total int
}

func (c *watchedClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waits == nil {
		c.waits = map[time.Duration]int{}
	}
	c.waits[d]++
	c.total++
	return c.Real.After(d)
}

// armed returns how many waits of length d the daemon has armed.
func (c *watchedClock) armed(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits[d]
}

// armedAll returns how many waits the daemon has armed in all.
func (c *watchedClock) armedAll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// heldPolls returns once a held contract's loop has looked for a reset n
// more times on clk (the daemon's clock, with HeldPoll poll): n times it
// could have run the contract and, held, did not.
func heldPolls(t *testing.T, clk *watchedClock, poll time.Duration, n int) {
	t.Helper()
	from := clk.armed(poll)
	wait.For(t, fmt.Sprintf("%d more hold-down polls", n), func() bool { return clk.armed(poll) >= from+n })
}

func (h *daemon) get(path string, v any) int {
	h.t.Helper()
	resp, err := http.Get(h.base + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil && !errors.Is(err, io.EOF) {
			h.t.Fatalf("GET %s: decode: %v", path, err)
		}
	}
	return resp.StatusCode
}

func (h *daemon) status(name string) ContractStatus {
	h.t.Helper()
	var list ContractList
	h.get("/contracts", &list)
	for _, c := range list.Contracts {
		if c.Name == name {
			return c
		}
	}
	return ContractStatus{}
}

func (h *daemon) list() ContractList {
	h.t.Helper()
	var list ContractList
	h.get("/contracts", &list)
	return list
}

// metric returns the value of one exposition line, e.g.
// `contractd_runs_total{contract="a",result="ok"}`, and whether it exists.
func (h *daemon) metric(series string) (float64, bool) {
	h.t.Helper()
	for _, line := range h.scrape() {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				h.t.Fatalf("metric %s: %v", series, err)
			}
			return f, true
		}
	}
	return 0, false
}

func (h *daemon) scrape() []string {
	h.t.Helper()
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
