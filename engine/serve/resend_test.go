package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/wait"
)

// The series a rule needs without hard-coding a schedule: the interval,
// the next run (absent while held down), a maintenance series per agent
// that follows windows opened from outside the daemon, and every counter
// at zero from the load, per route too, so increase() sees the first
// event.
func TestScheduleSeriesAndZeroCounters(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "sched", "1", "1h", false,
		"notify:\n  - {log: {path: /dev/null}}\n  - {webhook: {url: \"http://127.0.0.1:9/x\", name: hook}}\n")
	writeContract(t, dir, "held", "1", "2m", false)
	held := SchedulerState{Contract: "held"}
	held.ConsecutiveFailed, held.HeldDown, held.Alerted = 3, true, true
	if err := writeState(state, held); err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: state,
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}})
	wait.For(h.t, "both contracts loaded", func() bool { return len(h.list().Contracts) == 2 })

	next := h.status("sched").NextRunAt
	if next == nil {
		t.Fatal("sched has no next_run_at")
	}
	want := map[string]float64{
		`contractd_contract_interval_seconds{contract="sched"}`:                              3600,
		`contractd_contract_interval_seconds{contract="held"}`:                               120,
		`contractd_next_run_timestamp_seconds{contract="sched"}`:                             float64(next.UnixNano()) / 1e9,
		`contractd_maintenance{agent="ops",contract="sched"}`:                                0,
		`contractd_maintenance{agent="*",contract="sched"}`:                                  0,
		`contractd_repair_verifications_total{contract="sched",result="remediated"}`:         0,
		`contractd_repair_verifications_total{contract="sched",result="remediation_failed"}`: 0,
		`contractd_notify_delivered_total{contract="sched",notifier="log"}`:                  0,
		`contractd_notify_failures_total{contract="sched",notifier="hook"}`:                  0,
		`contractd_notify_dropped_total{contract="sched",notifier="hook"}`:                   0,
		`contractd_run_duration_seconds_count{contract="sched"}`:                             0,
		`contractd_held_down{contract="held"}`:                                               1,
		`contractd_repair_verifications_total{contract="held",result="remediation_failed"}`:  0,
		`contractd_runs_total{contract="held",result="failed"}`:                              0,
		`contractd_skipped_overlap_total{contract="held"}`:                                   0,
		`contractd_run_panics_total{contract="held"}`:                                        0,
		`contractd_alerts_sent_total{contract="held"}`:                                       0,
		`contractd_repairs_total{contract="held",result="failed"}`:                           0,
		`contractd_maintenance{agent="ops",contract="held"}`:                                 0,
		`contractd_notify_failures_total{contract="sched",notifier="log"}`:                   0,
		`contractd_notify_delivered_total{contract="sched",notifier="hook"}`:                 0,
		`contractd_repair_verifications_total{contract="held",result="remediated"}`:          0,
		`contractd_runs_total{contract="sched",result="cancelled"}`:                          0,
		`contractd_runs_total{contract="sched",result="skipped_overlap"}`:                    0,
		`contractd_runs_total{contract="sched",result="ok"}`:                                 0,
		`contractd_repairs_total{contract="sched",result="ran"}`:                             0,
		`contractd_notify_dropped_total{contract="sched",notifier="log"}`:                    0,
		`contractd_maintenance{agent="*",contract="held"}`:                                   0,
		`contractd_contracts{state="loaded"}`:                                                2,
		`contractd_held_down{contract="sched"}`:                                              0,
		`contractd_run_panics_total{contract="sched"}`:                                       0,
		`contractd_alerts_sent_total{contract="sched"}`:                                      0,
		`contractd_skipped_overlap_total{contract="sched"}`:                                  0,
		`contractd_repairs_total{contract="sched",result="failed"}`:                          0,
		`contractd_runs_total{contract="sched",result="failed"}`:                             0,
		`contractd_runs_total{contract="held",result="ok"}`:                                  0,
	}
	for series, v := range want {
		got, ok := h.metric(series)
		if !ok {
			t.Errorf("series %s missing from /metrics", series)
		} else if math.Abs(got-v) > 0.001 {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if v, ok := h.metric(`contractd_next_run_timestamp_seconds{contract="held"}`); ok {
		t.Errorf("a held-down contract has a next run: %v", v)
	}

	// A window opened from outside the daemon (`contractd maintenance`
	// writes the ledger) shows at the next scrape: the agent's own, then
	// the whole contract's over every agent.
	st, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := engine.SetMaintenance(t.Context(), st, "sched", "ops", time.Hour, "upgrade", now); err != nil {
		t.Fatal(err)
	}
	for series, v := range map[string]float64{`contractd_maintenance{agent="ops",contract="sched"}`: 1, `contractd_maintenance{agent="*",contract="sched"}`: 0} {
		if got, ok := h.metric(series); !ok || got != v {
			t.Errorf("with the agent's window: %s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	if _, err := engine.SetMaintenance(t.Context(), st, "sched", "ops", 0, "", now); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.SetMaintenance(t.Context(), st, "sched", "", time.Hour, "network", now); err != nil {
		t.Fatal(err)
	}
	for series, v := range map[string]float64{`contractd_maintenance{agent="ops",contract="sched"}`: 1, `contractd_maintenance{agent="*",contract="sched"}`: 1,
		`contractd_maintenance{agent="ops",contract="held"}`: 0} {
		if got, ok := h.metric(series); !ok || got != v {
			t.Errorf("with the contract's window: %s = %v (present %v), want %v", series, got, ok, v)
		}
	}
}

// resender is a Runner that also resends, recording each resend and
// whether a run of the contract was going at the time.
type resender struct {
	fakeRunner
	every time.Duration
	mu    sync.Mutex
	calls int
	clash int // resends made while a run was going
	runs  int
	going bool
	reply func(n int) ([]engine.Resend, error)
}

func (r *resender) ResendEvery(*contracts.Contract) time.Duration { return r.every }

func (r *resender) Resend(ctx context.Context, c *contracts.Contract) ([]engine.Resend, error) {
	r.mu.Lock()
	r.calls++
	if r.going {
		r.clash++
	}
	n := r.calls
	r.mu.Unlock()
	return r.reply(n)
}

func (r *resender) count() (calls, clash, runs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.clash, r.runs
}

// Between runs the daemon resends every resend interval, never beside a
// run of the contract; each failed resend counts in
// contractd_notify_failures_total, is logged only when new, and a run
// holding the lock (ErrLocked) is no failure.
func TestDaemonResendsBetweenRunsAndNeverBesideOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "am", "1", "200ms", true, "notify:\n  - {alertmanager: {url: \"http://127.0.0.1:9\", name: am}}\n")
	refused := errors.New("post http://127.0.0.1:9: 400 Bad Request: bad label")
	r := &resender{every: 30 * time.Millisecond}
	r.reply = func(n int) ([]engine.Resend, error) {
		switch {
		case n%5 == 0:
			return nil, fmt.Errorf("resend am: lock am: %w", store.ErrLocked)
		case n <= 6:
			return []engine.Resend{{Route: "am", Incidents: 1, Err: refused, New: n == 1}}, nil
		case n == 7:
			return []engine.Resend{{Route: "am", Incidents: 1, Recovered: true}}, nil
		}
		return []engine.Resend{{Route: "am", Incidents: 1}}, nil
	}
	clk := &watchedClock{}
	ended := make(chan struct{}) // the test is over: runs end at once
	r.run = func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		r.mu.Lock()
		r.going, r.runs = true, r.runs+1
		r.mu.Unlock()
		// The run lasts until the contract's loop has woken twice for a
		// resend that fell due during it (resends are every 30ms, its
		// runs every 200ms) and gone back to waiting.
		from := clk.armedAll()
		wait.Poll(ctx, wait.Interval, func() bool {
			select {
			case <-ended:
				return true
			default:
				return clk.armedAll() >= from+2
			}
		})
		r.mu.Lock()
		r.going = false
		r.mu.Unlock()
		return report(c), nil
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: r, Clock: clk})
	t.Cleanup(func() { close(ended) }) // before the daemon stops
	wait.For(h.t, "12 resends and 3 runs", func() bool {
		calls, _, runs := r.count()
		return calls >= 12 && runs >= 3
	})
	if _, clash, _ := r.count(); clash != 0 {
		t.Errorf("%d resends ran beside a run of the contract", clash)
	}
	// Calls 1–4 and 6 failed (5 was locked out by a run).
	if got, _ := h.metric(`contractd_notify_failures_total{contract="am",notifier="am"}`); got != 5 {
		t.Errorf("contractd_notify_failures_total = %v, want 5 (each failed resend, not the locked one)", got)
	}
	h.logs.mu.Lock()
	failed, back := 0, 0
	for _, l := range h.logs.lines {
		failed += strings.Count(l, "resend of 1 open incident(s) failed: "+refused.Error())
		back += strings.Count(l, "notify am: resend works again")
	}
	h.logs.mu.Unlock()
	if failed != 1 || back != 1 {
		t.Errorf("logged the failure %d times and the recovery %d times, want once each", failed, back)
	}
}

func TestPageURL(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"127.0.0.1:9464": "http://127.0.0.1:9464",
		"[::1]:9464":     "http://[::1]:9464",
		"ops.example:80": "http://ops.example:80",
		":9464":          "http://" + net.JoinHostPort(host, "9464"),
		"0.0.0.0:9464":   "http://" + net.JoinHostPort(host, "9464"),
		"not an address": "",
	}
	for listen, want := range cases {
		if got := PageURL(listen); got != want {
			t.Errorf("PageURL(%q) = %q, want %q", listen, got, want)
		}
	}
}

// hangingStore is a state store whose ledger reads hang, once hang is
// set, until released, as etcd's do without a quorum.
type hangingStore struct {
	*store.Store
	hang    atomic.Bool
	release chan struct{}
}

func (h *hangingStore) ReadLedger(name string, decode func([]byte) error) error {
	if h.hang.Load() {
		<-h.release
	}
	return h.Store.ReadLedger(name, decode)
}

// A store that does not answer never holds a scrape up: /metrics answers
// at once with what the store last said, and with the windows read fresh
// once it answers again.
func TestScrapeNeverWaitsOnTheStore(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "slow", "1", "1h", false)
	files, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	hs := &hangingStore{Store: files, release: make(chan struct{})}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Store: hs,
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}})
	var once sync.Once
	release := func() { once.Do(func() { close(hs.release) }) }
	defer release()
	wait.For(h.t, "the contract loaded and its windows read", func() bool {
		v, ok := h.metric(`contractd_maintenance{agent="ops",contract="slow"}`)
		return ok && v == 0
	})
	hs.hang.Store(true)
	if _, err := engine.SetMaintenance(t.Context(), files, "slow", "ops", time.Hour, "upgrade", time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		v, ok := h.metric(`contractd_maintenance{agent="ops",contract="slow"}`)
		if took := time.Since(start); took > 10*time.Second || !ok || v != 0 { // the store hangs until released: any bound tells an answer from a wait
			t.Fatalf("scrape %d with the store hanging: %s, maintenance %v (present %v); want at once what it last said, 0", i, took, v, ok)
		}
	}
	release()
	wait.For(h.t, "the window once the store answers", func() bool {
		v, ok := h.metric(`contractd_maintenance{agent="ops",contract="slow"}`)
		return ok && v == 1
	})
}

// A resend that hangs (an Alertmanager that takes the connection and never
// answers) holds the contract's next run until it ends, never a run beside
// it; meanwhile the daemon answers, and the ticks that fall due are counted
// as overlaps; once the resend ends, the run goes.
func TestRunWaitsForAHangingResendAndServeAnswers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "am", "1", "200ms", true, "notify:\n  - {alertmanager: {url: \"http://127.0.0.1:9\", name: am}}\n")
	release := make(chan struct{})
	r := &resender{every: 30 * time.Millisecond}
	r.reply = func(n int) ([]engine.Resend, error) {
		if n == 1 {
			<-release
		}
		return []engine.Resend{{Route: "am", Incidents: 1}}, nil
	}
	r.run = func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		r.mu.Lock()
		r.going, r.runs = true, r.runs+1
		r.mu.Unlock()
		defer func() { r.mu.Lock(); r.going = false; r.mu.Unlock() }()
		return report(c), nil
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: r})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	wait.For(h.t, "the first resend under way", func() bool { calls, _, _ := r.count(); return calls >= 1 })
	_, _, runs := r.count()
	wait.For(h.t, "two ticks that found the run waiting", func() bool {
		v, _ := h.metric(`contractd_skipped_overlap_total{contract="am"}`)
		return v >= 2
	})
	if len(h.list().Contracts) != 1 {
		t.Fatal("the daemon did not answer while a resend hung")
	}
	if _, clash, now := r.count(); now != runs || clash != 0 {
		t.Fatalf("%d runs started beside the hanging resend (%d clashes)", now-runs, clash)
	}
	close(release)
	released = true
	wait.For(h.t, "the run once the resend ended", func() bool { _, _, n := r.count(); return n > runs })
}
