package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/wait"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestScheduledRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "every-second", "1", "1s", true)
	writeContract(t, dir, "hourly", "1", "1h", false)
	log := newRunLog()
	t0 := time.Now()
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		log.begin(c)
		defer log.end(c)
		return report(c), nil
	}}})

	wait.For(h.t, "3 runs of every-second", func() bool { return log.count("every-second") >= 3 })
	for k, start := range log.times("every-second") {
		// Ticks are anchored to the schedule and timers never fire early:
		// run k (the on_start run is run 0) cannot begin before k seconds.
		if early := t0.Add(time.Duration(k) * time.Second).Sub(start); early > 0 {
			t.Errorf("run %d began %s before its slot; schedule is every 1s", k, early)
		}
	}
	if n := log.count("hourly"); n != 0 {
		t.Errorf("hourly (on_start: false) ran %d times in the first seconds", n)
	}
	st := h.status("every-second")
	if st.LastResult != ResultOK || st.LastRunAt == nil || st.NextRunAt == nil || st.Schedule.Every != "1s" || !st.Schedule.OnStart {
		t.Errorf("status after runs = %+v", st)
	}
	if hr := h.status("hourly"); hr.NextRunAt == nil || time.Until(*hr.NextRunAt) < 59*time.Minute {
		t.Errorf("hourly next run = %v, want about an hour from now", hr.NextRunAt)
	}
	var det ContractDetail
	if code := h.get("/contracts/every-second", &det); code != http.StatusOK || det.LastReport == nil || det.LastReport.Contract != "every-second" {
		t.Errorf("GET /contracts/every-second = %d, last report %+v", code, det.LastReport)
	}
	if code := h.get("/contracts/nope", nil); code != http.StatusNotFound {
		t.Errorf("GET /contracts/nope = %d, want 404", code)
	}
}

func TestOverlapIsRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "slow", "1", "1s", true)
	log := newRunLog()
	var calls atomic.Int32
	overlapped := make(chan struct{})
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		log.begin(c)
		defer log.end(c)
		if calls.Add(1) == 1 {
			// The first run lasts until a tick has found it running.
			select {
			case <-overlapped:
			case <-ctx.Done():
			}
		}
		return report(c), nil
	}}})

	wait.For(h.t, "a skipped_overlap tick", func() bool { return h.status("slow").SkippedOverlap >= 1 })
	close(overlapped)
	wait.For(h.t, "the run after the slow one", func() bool { return log.count("slow") >= 2 })
	if v, _ := h.metric(`contractd_skipped_overlap_total{contract="slow"}`); v < 1 {
		t.Errorf("contractd_skipped_overlap_total = %v, want >= 1", v)
	}
	if v, _ := h.metric(`contractd_runs_total{contract="slow",result="skipped_overlap"}`); v < 1 {
		t.Errorf("runs_total{result=skipped_overlap} = %v, want >= 1", v)
	}
	log.mu.Lock()
	maxAct := log.maxAct["slow"]
	log.mu.Unlock()
	if maxAct != 1 {
		t.Errorf("%d runs of one contract overlapped", maxAct)
	}
	if !h.logs.contains("slow: skipped_overlap") {
		t.Error("no skipped_overlap line in the log")
	}
}

func TestAnotherProcessHoldingTheLockCountsAsOverlapNotFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "locked", "1", "1s", true)
	var calls atomic.Int32
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		calls.Add(1)
		r := report(c)
		r.Skipped = "another run holds the lock"
		return r, nil
	}}})
	wait.For(h.t, "two locked runs", func() bool { return calls.Load() >= 2 })
	wait.For(h.t, "status to settle", func() bool { return h.status("locked").State == "idle" })
	st := h.status("locked")
	if st.ConsecutiveFailures != 0 || st.HeldDown || st.LastResult != ResultSkippedOverlap || st.SkippedOverlap < 1 {
		t.Errorf("status = %+v; a lock held elsewhere is an overlap, never a failure", st)
	}
}

func TestHoldDownAfterThreeFailuresSurvivesRestartAndResetResumes(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "broken", "1", "200ms", true)
	log := newRunLog()
	var failing atomic.Bool
	failing.Store(true)
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		log.begin(c)
		defer log.end(c)
		if failing.Load() {
			return nil, errors.New("state store: disk full")
		}
		return report(c), nil
	}}
	var alertMu sync.Mutex
	var alerts []string
	notify := func(ctx context.Context, c *contracts.Contract, text string) error {
		alertMu.Lock()
		defer alertMu.Unlock()
		alerts = append(alerts, text)
		return nil
	}
	alertCount := func() int { alertMu.Lock(); defer alertMu.Unlock(); return len(alerts) }
	const poll = 40 * time.Millisecond
	cfg := Config{Dir: dir, StateDir: state, Runner: runner, Notify: notify, HeldPoll: poll}

	clk := &watchedClock{}
	cfg.Clock = clk
	h := startDaemon(t, cfg)
	wait.For(h.t, "hold-down", func() bool { return h.status("broken").HeldDown })
	wait.For(h.t, "the hold-down alert", func() bool { return alertCount() >= 1 })
	heldPolls(t, clk, poll, 3) // three chances to run again, or to alert again
	if n := log.count("broken"); n != HoldDownAfter {
		t.Errorf("%d runs before and during hold-down, want exactly %d", n, HoldDownAfter)
	}
	starts := log.times("broken")
	if len(starts) == 3 {
		if g := starts[2].Sub(starts[1]); g < 380*time.Millisecond {
			t.Errorf("second retry came %s after the first; backoff should double the 200ms interval", g)
		}
	}
	if n := alertCount(); n != 1 {
		t.Fatalf("%d hold-down alerts, want 1: %q", n, alerts)
	}
	if !strings.Contains(alerts[0], "broken") || !strings.Contains(alerts[0], "disk full") || !strings.Contains(alerts[0], "contractd reset broken") {
		t.Errorf("alert text %q should name the contract, the error and the way out", alerts[0])
	}
	st := h.status("broken")
	if st.State != "held_down" || st.ConsecutiveFailures != 3 || st.LastError != "state store: disk full" || st.NextRunAt != nil {
		t.Errorf("held status = %+v", st)
	}
	if v, _ := h.metric(`contractd_held_down{contract="broken"}`); v != 1 {
		t.Errorf("contractd_held_down = %v, want 1", v)
	}
	if v, _ := h.metric(`contractd_runs_total{contract="broken",result="failed"}`); v != 3 {
		t.Errorf("runs_total{failed} = %v, want 3", v)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// A restarted daemon keeps the hold-down and does not alert again.
	clk2 := &watchedClock{}
	cfg.Clock = clk2
	h2 := startDaemon(t, cfg)
	if st := h2.status("broken"); !st.HeldDown {
		t.Fatalf("after restart: %+v, want still held down", st)
	}
	heldPolls(t, clk2, poll, 3)
	if n := log.count("broken"); n != HoldDownAfter {
		t.Errorf("a held contract ran after restart: %d runs", n)
	}
	if n := alertCount(); n != 1 {
		t.Errorf("%d alerts after restart, want still 1", n)
	}

	// The operator fixes the cause and releases the hold-down.
	failing.Store(false)
	if err := ReleaseHoldDown(context.Background(), state, "broken"); err != nil {
		t.Fatal(err)
	}
	wait.For(h2.t, "a run after reset", func() bool { return log.count("broken") > HoldDownAfter })
	wait.For(h2.t, "a healthy status", func() bool {
		st := h2.status("broken")
		return !st.HeldDown && st.LastResult == ResultOK && st.ConsecutiveFailures == 0
	})
	if v, _ := h2.metric(`contractd_held_down{contract="broken"}`); v != 0 {
		t.Errorf("contractd_held_down after reset = %v, want 0", v)
	}
	if n := alertCount(); n != 1 {
		t.Errorf("%d alerts after reset, want 1", n)
	}
}

func TestResetOutsideTheDaemon(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		arg     string
		wantErr bool
	}{
		{"never scheduled: nothing to release", "ghost", false},
		{"a path, not a name", "../etc/passwd", true},
		{"dot dot", "..", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			err := ReleaseHoldDown(context.Background(), state, tc.arg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ReleaseHoldDown(%q) = %v, want error %v", tc.arg, err, tc.wantErr)
			}
			if left, _ := os.ReadDir(state); len(left) != 0 {
				t.Errorf("ReleaseHoldDown wrote %d files for a contract it knows nothing of", len(left))
			}
		})
	}
}

func TestHoldDownAlertThatFailsIsRetriedOnceAtNextStart(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "flaky-notifier", "1", "100ms", true)
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		return nil, errors.New("engine: run deadline exceeded")
	}}
	var attempts, delivered atomic.Int32
	var notifierDown atomic.Bool
	notifierDown.Store(true)
	cfg := Config{Dir: dir, StateDir: state, Runner: runner, Notify: func(ctx context.Context, c *contracts.Contract, text string) error {
		attempts.Add(1)
		if notifierDown.Load() {
			return errors.New("zulip: 502 bad gateway")
		}
		delivered.Add(1)
		return nil
	}}
	h := startDaemon(t, cfg)
	wait.For(h.t, "hold-down", func() bool { return h.status("flaky-notifier").HeldDown })
	wait.For(h.t, "the failed alert attempt", func() bool { return attempts.Load() == 1 })
	wait.For(h.t, "the failure to be logged", func() bool { return h.logs.contains("hold-down alert not delivered") })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	notifierDown.Store(false)
	h2 := startDaemon(t, cfg)
	wait.For(h2.t, "the retried alert", func() bool { return delivered.Load() == 1 })
	wait.For(h2.t, "the sent mark to be saved", func() bool {
		st, err := ReadState(state, "flaky-notifier")
		return err == nil && st.Alerted
	})
	if err := h2.stop(); err != nil {
		t.Fatal(err)
	}

	// A start with the alert delivered sends none: it would go out as the
	// contract loads, before its loop polls for a reset.
	clk := &watchedClock{}
	cfg.Clock, cfg.HeldPoll = clk, 40*time.Millisecond
	h3 := startDaemon(t, cfg)
	heldPolls(t, clk, cfg.HeldPoll, 2)
	if !h3.status("flaky-notifier").HeldDown {
		t.Error("hold-down lost across restarts")
	}
	if a, d := attempts.Load(), delivered.Load(); a != 2 || d != 1 {
		t.Errorf("%d attempts, %d delivered; want 2 and 1 (one alert per hold-down)", a, d)
	}
}

func TestCorruptStateIsMovedAsideAndReported(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	path := StatePath(state, "x")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(state, "x")
	if !errors.Is(err, ErrCorruptState) {
		t.Fatalf("ReadState = %v, want ErrCorruptState", err)
	}
	if st.HeldDown || st.ConsecutiveFailed != 0 || st.Contract != "x" {
		t.Errorf("state after corrupt file = %+v, want fresh", st)
	}
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("corrupt file not moved aside: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != "{not json" {
		t.Errorf("moved-aside content = %q", b)
	}
}

func TestReloadOnEditKeepsLastGoodVersionOnBadEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeContract(t, dir, "edited", "1", "300ms", true)
	log := newRunLog()
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		log.begin(c)
		defer log.end(c)
		return report(c), nil
	}}})
	wait.For(h.t, "a run of version 1", func() bool { return log.count("edited") >= 1 })

	writeContract(t, dir, "edited", "2", "300ms", true)
	wait.For(h.t, "a run of version 2", func() bool {
		v := log.versions("edited")
		return v[len(v)-1] == "2"
	})

	writeContract(t, dir, "edited", "3", "300ms", true, "bogus: key\n")
	wait.For(h.t, "the bad edit to be reported", func() bool { return len(h.status("edited").RejectedEdit) > 0 })
	st := h.status("edited")
	if st.Version != "2" || !strings.Contains(st.RejectedEdit[0], path+":8:1: error: unknown key \"bogus\" in front matter") {
		t.Errorf("after a bad edit: version %q, rejected %q", st.Version, st.RejectedEdit)
	}
	n := log.count("edited")
	wait.For(h.t, "runs to go on after the bad edit", func() bool { return log.count("edited") >= n+2 })
	for _, v := range log.versions("edited")[n:] {
		if v != "2" {
			t.Fatalf("version %q ran after a bad edit; want the last good version 2", v)
		}
	}
	if !h.logs.contains("unknown key") {
		t.Error("the diagnostic is not in the log")
	}
	if v, _ := h.metric(`contractd_contracts{state="stale"}`); v != 1 {
		t.Errorf(`contractd_contracts{state="stale"} = %v, want 1`, v)
	}

	// A new file that fails lint is kept out and listed.
	bad := writeContract(t, dir, "newbad", "1", "oops", true)
	wait.For(h.t, "the new bad file to be listed", func() bool { return len(h.list().Rejected) == 1 })
	list := h.list()
	if list.Rejected[0].Path != bad || len(list.Contracts) != 1 {
		t.Errorf("list = %+v, want newbad rejected and only edited loaded", list)
	}

	// Deleting a file stops its contract.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wait.For(h.t, "edited to be unloaded", func() bool { return len(h.list().Contracts) == 0 })
	if _, ok := h.metric(`contractd_runs_total{contract="edited",result="ok"}`); ok {
		t.Error("series of a removed contract are still exported")
	}
}

func TestReloadOnSignalWithoutWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hup := make(chan os.Signal, 1)
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), DisableWatch: true, Reload: hup, Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		return report(c), nil
	}}})
	if n := len(h.list().Contracts); n != 0 {
		t.Fatalf("%d contracts in an empty dir", n)
	}
	writeContract(t, dir, "late", "1", "1h", false)
	hup <- syscall.SIGHUP
	wait.For(h.t, "late to load after SIGHUP", func() bool { return h.status("late").Name == "late" })
	if !h.logs.contains("reload requested") {
		t.Error("reload not logged")
	}
}

func TestOnDemandRunOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "manual", "7", "1h", false)
	tokenFile := writeToken(t)
	release := make(chan struct{})
	var blockNext atomic.Bool
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		if blockNext.CompareAndSwap(true, false) {
			<-release
		}
		r := report(c)
		r.OverallSeverity = contracts.SeverityDegraded
		return r, nil
	}}
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), TokenFile: tokenFile, Runner: runner})
	noToken := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: runner})

	post := func(base, path, auth string) (int, map[string]any) { return postAPI(t, base+path, auth, "") }
	cases := []struct {
		name string
		base string
		path string
		auth string
		want int
	}{
		{"no token", h.base, "/contracts/manual/run", "", http.StatusUnauthorized},
		{"wrong token", h.base, "/contracts/manual/run", "Bearer s3cret-tokeN", http.StatusUnauthorized},
		{"not bearer", h.base, "/contracts/manual/run", "Basic czNjcmV0LXRva2Vu", http.StatusUnauthorized},
		{"unknown contract", h.base, "/contracts/ghost/run", "Bearer s3cret-token", http.StatusNotFound},
		{"daemon without token file", noToken.base, "/contracts/manual/run", "Bearer s3cret-token", http.StatusForbidden},
		{"right token", h.base, "/contracts/manual/run", "Bearer s3cret-token", http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.base, tc.path, tc.auth)
			if code != tc.want {
				t.Fatalf("POST %s = %d %v, want %d", tc.path, code, body, tc.want)
			}
			if code == http.StatusOK && (body["contract"] != "manual" || body["version"] != "7" || body["overall_severity"] != "degraded") {
				t.Errorf("report = %v", body)
			}
		})
	}
	if st := h.status("manual"); st.LastResult != ResultOK || st.LastSeverity != contracts.SeverityDegraded {
		t.Errorf("status after on-demand run = %+v", st)
	}

	t.Run("overlapping request", func(t *testing.T) {
		blockNext.Store(true)
		first := make(chan int, 1)
		go func() { code, _ := post(h.base, "/contracts/manual/run", "Bearer s3cret-token"); first <- code }()
		wait.For(h.t, "the first run to start", func() bool { return h.status("manual").State == "running" })
		code, body := post(h.base, "/contracts/manual/run", "Bearer s3cret-token")
		close(release)
		if code != http.StatusConflict {
			t.Errorf("second POST while running = %d %v, want 409", code, body)
		}
		if c := <-first; c != http.StatusOK {
			t.Errorf("first POST = %d, want 200", c)
		}
	})
}

// TestMetricsScrape: /metrics follows the Prometheus conventions, checked
// by promlint: each state a 0/1 series, standard go_* and process_*
// collectors, contractd_build_info, a last-run timestamp, repairs counted
// only when their command ran, and the fields a contract exports. On
// 02630f2 severity was one gauge of codes 0–5, the collectors were renamed
// contractd_go_*/contractd_process_*, there was no build info and no
// last-run time, and repairs_total counted pending and blocked repairs.
func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "scraped", "1", "1h", true)
	exit0, exit1 := 0, 1
	var ran atomic.Bool
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Build: BuildInfo{Version: "1.2.3", Revision: "abc", Date: "2026-12-01T10:00:00Z", GoVersion: "go1.x"},
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
			r := report(c)
			r.OverallSeverity = contracts.SeverityCritical
			r.Agents = map[string]*engine.AgentReport{
				"abiba": {Agent: "abiba", Severity: contracts.SeverityCritical},
				"koby":  {Agent: "koby", Severity: contracts.SeverityHealthy},
				"ace":   {Agent: "ace", Severity: contracts.SeverityUnknown, UnknownRuns: 4},
			}
			r.Stages = []*engine.StageReport{{ID: "disk", Agent: "abiba", Steps: []*engine.StepReport{
				{ID: "df", Metrics: map[string]float64{"used_pct": 91.5, "inodes.used": 7}},
			}}}
			r.Actions = []*engine.ActionReport{
				{Agent: "abiba", Kind: engine.KindRepair, Action: "pm2 restart abiba-zulip", Status: "ran", ExitCode: &exit0, Verify: "remediated"},
				{Agent: "abiba", Kind: engine.KindRepair, Action: "pm2 restart abiba-zulip", Status: "merged"},
				{Agent: "abiba", Kind: engine.KindRepair, Action: "systemctl restart dsh-web", Status: "failed", ExitCode: &exit1, Verify: "remediation failed"},
				{Agent: "abiba", Kind: engine.KindRepair, Action: "systemctl restart dsh-web", Status: "alert"}, // crash loop: alerted instead
				{Agent: "abiba", Kind: engine.KindRepair, Action: "systemctl restart koby", Status: "pending"},
				{Agent: "abiba", Kind: engine.KindRepair, Action: "systemctl restart koby", Status: "blocked"},
				{Agent: "abiba", Kind: engine.KindAlert, Action: "alert", Status: "alert"},
				{Agent: "abiba", Kind: engine.KindLog, Action: "log", Status: "logged"},
			}
			// What the metrics count is what the routes really did.
			delivered := func(route string) engine.RouteDelivery {
				return engine.RouteDelivery{Route: route, Outcome: store.OutcomeDelivered, Tried: true, Attempts: 1}
			}
			r.Alerts = []*engine.AlertReport{
				{Key: "scraped/abiba/down", Kind: "open", Routes: []engine.RouteDelivery{
					delivered("log"), {Route: "webhook", Outcome: store.OutcomeQueued, Tried: true, Attempts: 1, Error: "connection refused"}}},
				{Key: "scraped/koby/down", Kind: "open", Retry: true, Sent: true, ReachedBefore: true, Routes: []engine.RouteDelivery{delivered("webhook")}},
				{Key: "scraped/abiba/repair", Kind: "repair", Routes: []engine.RouteDelivery{
					delivered("log"), {Route: "webhook", Outcome: store.OutcomeQueued, Error: "not tried: webhook failed earlier in this run"}}},
				{Key: "scraped/ace/down", Kind: "open", Retry: true, Routes: []engine.RouteDelivery{
					{Route: "webhook", Outcome: store.OutcomeDropped, Tried: true, Attempts: 40, Error: "connection refused"}}},
			}
			ran.Store(true)
			return r, nil
		}}})
	before := time.Now()
	wait.For(h.t, "the on_start run", func() bool { return ran.Load() && h.status("scraped").LastResult == ResultOK })

	want := map[string]float64{
		`contractd_runs_total{contract="scraped",result="ok"}`:                                 1,
		`contractd_runs_total{contract="scraped",result="failed"}`:                             0,
		`contractd_run_duration_seconds_count{contract="scraped"}`:                             1,
		`contractd_agent_state{agent="abiba",contract="scraped",state="critical"}`:             1,
		`contractd_agent_state{agent="abiba",contract="scraped",state="healthy"}`:              0,
		`contractd_agent_state{agent="abiba",contract="scraped",state="unknown"}`:              0,
		`contractd_agent_state{agent="koby",contract="scraped",state="healthy"}`:               1,
		`contractd_agent_state{agent="koby",contract="scraped",state="critical"}`:              0,
		`contractd_agent_state{agent="ace",contract="scraped",state="unknown"}`:                1,
		`contractd_agent_unknown_runs{agent="ace",contract="scraped"}`:                         4,
		`contractd_agent_unknown_runs{agent="abiba",contract="scraped"}`:                       0,
		`contractd_contract_state{contract="scraped",state="critical"}`:                        1,
		`contractd_contract_state{contract="scraped",state="healthy"}`:                         0,
		`contractd_repairs_total{contract="scraped",result="ran"}`:                             1,
		`contractd_repairs_total{contract="scraped",result="failed"}`:                          1,
		`contractd_repair_verifications_total{contract="scraped",result="remediated"}`:         1,
		`contractd_repair_verifications_total{contract="scraped",result="remediation_failed"}`: 1,
		`contractd_probe_used_pct{agent="abiba",contract="scraped",stage="disk",step="df"}`:    91.5,
		`contractd_probe_inodes_used{agent="abiba",contract="scraped",stage="disk",step="df"}`: 7,
		`contractd_alerts_sent_total{contract="scraped"}`:                                      2,
		`contractd_notify_delivered_total{contract="scraped",notifier="log"}`:                  2,
		`contractd_notify_delivered_total{contract="scraped",notifier="webhook"}`:              1,
		`contractd_notify_failures_total{contract="scraped",notifier="webhook"}`:               2,
		`contractd_notify_dropped_total{contract="scraped",notifier="webhook"}`:                1,
		`contractd_held_down{contract="scraped"}`:                                              0,
		`contractd_skipped_overlap_total{contract="scraped"}`:                                  0,
		`contractd_contracts{state="loaded"}`:                                                  1,
		`contractd_contracts{state="rejected"}`:                                                0,
	}
	for series, v := range want {
		t.Run(series, func(t *testing.T) {
			got, ok := h.metric(series)
			if !ok {
				t.Fatalf("series %s missing from /metrics", series)
			}
			if got != v {
				t.Errorf("%s = %v, want %v", series, got, v)
			}
		})
	}
	// The build's version, revision and date, as the Makefile stamps them.
	if v, ok := h.metric(`contractd_build_info{build_date="2026-12-01T10:00:00Z",goversion="go1.x",revision="abc",version="1.2.3"}`); !ok || v != 1 {
		t.Errorf("contractd_build_info with the build's labels = %v (present %v), want 1", v, ok)
	}
	last, ok := h.metric(`contractd_last_run_timestamp_seconds{contract="scraped"}`)
	if !ok || last < float64(before.Add(-time.Second).Unix()) || last > float64(time.Now().Unix()+1) {
		t.Errorf("contractd_last_run_timestamp_seconds = %v (present %v), want the run's end, about %d", last, ok, before.Unix())
	}
	for _, series := range []string{
		`contractd_repairs_total{contract="scraped",result="merged"}`,
		`contractd_repairs_total{contract="scraped",result="logged"}`,
		`contractd_repairs_total{contract="scraped",result="pending"}`,
		`contractd_repairs_total{contract="scraped",result="blocked"}`,
		`contractd_repairs_total{contract="scraped",result="alert"}`,
	} {
		if _, ok := h.metric(series); ok {
			t.Errorf("%s is exported: only repairs whose command ran count", series)
		}
	}
	lines := h.scrape()
	var sawGo, sawProcess bool
	for _, line := range lines {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		sawGo = sawGo || strings.HasPrefix(line, "go_goroutines ")
		sawProcess = sawProcess || strings.HasPrefix(line, "process_resident_memory_bytes ")
		if !strings.HasPrefix(line, "contractd_") && !strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") {
			t.Errorf("series of no known family: %s", line)
		}
	}
	if !sawGo || !sawProcess {
		t.Errorf("standard runtime collectors missing (go_goroutines %v, process_resident_memory_bytes %v)", sawGo, sawProcess)
	}
	problems, err := promlint.New(strings.NewReader(strings.Join(lines, "\n") + "\n")).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(time.Now())
	h := startDaemon(t, Config{Dir: t.TempDir(), StateDir: t.TempDir(), Clock: clock,
		Heartbeat: time.Hour, StuckAfter: 30 * time.Second,
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}})
	var hz Health
	if code := h.get("/healthz", &hz); code != http.StatusOK || hz.Status != "ok" || hz.TickAgeSeconds > 30 {
		t.Fatalf("fresh daemon /healthz = %d %+v", code, hz)
	}
	// The scheduler loop has not ticked for a minute (its next beat is an
	// hour away): the daemon must say so.
	clock.Advance(time.Minute)
	if code := h.get("/healthz", &hz); code != http.StatusServiceUnavailable || hz.Status != "stuck" || hz.TickAgeSeconds < 60 {
		t.Errorf("stuck daemon /healthz = %d %+v, want 503 stuck", code, hz)
	}
	if v, _ := h.metric("contractd_scheduler_tick_age_seconds"); v < 60 {
		t.Errorf("contractd_scheduler_tick_age_seconds = %v, want >= 60", v)
	}
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		grace      time.Duration
		finishesIn time.Duration // the run finishes by itself after this; 0 means only on cancel
		wantCancel bool
	}{
		{"running run finishes within grace", 5 * time.Second, 300 * time.Millisecond, false},
		{"run past grace is cancelled", 200 * time.Millisecond, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeContract(t, dir, "long", "1", "1h", true)
			started := make(chan struct{})
			type outcome struct {
				cancelled bool
				at        time.Time
			}
			ended := make(chan outcome, 1)
			state := t.TempDir()
			h := startDaemon(t, Config{Dir: dir, StateDir: state, ShutdownGrace: tc.grace, Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
				close(started)
				var timer <-chan time.Time
				if tc.finishesIn > 0 {
					timer = time.After(tc.finishesIn)
				}
				select {
				case <-timer:
					ended <- outcome{false, time.Now()}
					return report(c), nil
				case <-ctx.Done():
					ended <- outcome{true, time.Now()}
					return nil, ctx.Err()
				}
			}}})
			<-started
			err := h.stop()
			stopped := time.Now()
			if err != nil {
				t.Fatalf("Run returned %v on a clean stop", err)
			}
			var o outcome
			select {
			case o = <-ended:
			default:
				t.Fatal("Run returned while a run was still going")
			}
			if o.cancelled != tc.wantCancel {
				t.Errorf("run cancelled = %v, want %v", o.cancelled, tc.wantCancel)
			}
			if o.at.After(stopped) {
				t.Error("the run ended after Run returned")
			}
			st, err := ReadState(state, "long")
			if err != nil {
				t.Fatal(err)
			}
			want := ResultOK
			if tc.wantCancel {
				want = ResultCancelled
			}
			if st.LastResult != want || st.ConsecutiveFailed != 0 {
				t.Errorf("saved state: last result %q, %d failures; want %q and 0 (a shutdown is not a failed run)", st.LastResult, st.ConsecutiveFailed, want)
			}
		})
	}
}

func TestDetailShowsSnapshotAndHistoryFromTheStateDir(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "kept", "1", "1h", true)
	st, err := store.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Bool
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		// What the engine keeps in the state dir after a run.
		if err := st.WriteSnapshot(c.Name, map[string]any{"zulip_server_status": "healthy"}); err != nil {
			return nil, err
		}
		if err := st.AppendHistory(c.Name, store.RunRecord{RunID: "r-1", StartedAt: time.Now().UTC(), OverallSeverity: "healthy"}); err != nil {
			return nil, err
		}
		ran.Store(true)
		return report(c), nil
	}}})
	wait.For(h.t, "the on_start run", func() bool { return ran.Load() && h.status("kept").LastResult == ResultOK })
	var det struct {
		Snapshot struct {
			Snapshot map[string]any `json:"snapshot"`
		} `json:"snapshot"`
		LastRecord map[string]any `json:"last_record"`
	}
	if code := h.get("/contracts/kept", &det); code != http.StatusOK {
		t.Fatalf("GET /contracts/kept = %d", code)
	}
	if det.Snapshot.Snapshot["zulip_server_status"] != "healthy" {
		t.Errorf("snapshot = %v", det.Snapshot)
	}
	if det.LastRecord["run_id"] != "r-1" {
		t.Errorf("last_record = %v", det.LastRecord)
	}
}

func TestHoldDownAlertGoesToTheContractsOwnRoutes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	posts := func() []map[string]any { mu.Lock(); defer mu.Unlock(); return append([]map[string]any(nil), got...) }

	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "routed", "1", "100ms", true, "notify:\n  - {webhook: {url: \""+hook.URL+"/hook\"}}\n")
	cfg := Config{Dir: dir, StateDir: state, Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		return nil, errors.New("engine: lock: permission denied")
	}}}
	h := startDaemon(t, cfg)
	wait.For(h.t, "the webhook to receive the hold-down alert", func() bool { return len(posts()) == 1 })
	wait.For(h.t, "the alert to be counted", func() bool {
		v, _ := h.metric(`contractd_alerts_sent_total{contract="routed"}`)
		return v == 1
	})
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// The restarted daemon, held, polls for a reset and posts nothing: the
	// alert was delivered before the restart.
	clk := &watchedClock{}
	cfg.Clock, cfg.HeldPoll = clk, 40*time.Millisecond
	h2 := startDaemon(t, cfg)
	heldPolls(t, clk, cfg.HeldPoll, 2)
	if !h2.status("routed").HeldDown {
		t.Fatal("not held down after restart")
	}
	p := posts()
	if len(p) != 1 {
		t.Fatalf("%d webhook posts, want exactly 1 across a restart: %v", len(p), p)
	}
	if p[0]["kind"] != "holddown" || p[0]["contract"] != "routed" || p[0]["severity"] != "critical" || !strings.Contains(fmt.Sprint(p[0]["text"]), "permission denied") {
		t.Errorf("webhook message = %v", p[0])
	}
	if v, _ := h2.metric(`contractd_alerts_sent_total{contract="routed"}`); v != 0 {
		// A fresh process counts from zero; the first daemon counted it.
		t.Errorf("alerts_sent_total after restart = %v, want 0 (no new alert)", v)
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir", Config{StateDir: t.TempDir(), Runner: runner}, "Config.Dir is required"},
		{"missing dir", Config{Dir: filepath.Join(dir, "typo"), StateDir: t.TempDir(), Runner: runner}, "no such file or directory"},
		{"dir is a file", Config{Dir: file, StateDir: t.TempDir(), Runner: runner}, "not a directory"},
		{"no runner", Config{Dir: dir, StateDir: t.TempDir()}, "Config.Runner is required"},
		{"state dir under a file", Config{Dir: dir, StateDir: filepath.Join(file, "state"), Runner: runner}, "state dir"},
		{"address in use", Config{Dir: dir, StateDir: t.TempDir(), Runner: runner, Listen: busy.Addr().String()}, "address already in use"},
		{"mistyped token file", Config{Dir: dir, StateDir: t.TempDir(), Runner: runner, TokenFile: filepath.Join(dir, "tokne")}, "token file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(context.Background(), tc.cfg)
			if err == nil {
				d.ln.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestRenamedFileAndDuplicateNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "alpha", "1", "1h", false)
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		return report(c), nil
	}}})
	path := func(name string) string { return filepath.Join(dir, name) }

	t.Run("a renamed file keeps its contract loaded", func(t *testing.T) {
		if err := os.Rename(path("alpha.md"), path("renamed.md")); err != nil {
			t.Fatal(err)
		}
		wait.For(h.t, "alpha to load from renamed.md", func() bool { return h.status("alpha").Path == path("renamed.md") })
		h.reload() // and a reload with nothing changed leaves it be
		if list := h.list(); len(list.Contracts) != 1 || len(list.Rejected) != 0 {
			t.Errorf("after a rename: %+v", list)
		}
	})

	t.Run("a duplicate name is kept out until its twin goes away", func(t *testing.T) {
		b, err := os.ReadFile(path("renamed.md"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path("twin.md"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		wait.For(h.t, "twin.md to be rejected", func() bool { return len(h.list().Rejected) == 1 })
		if r := h.list().Rejected[0]; r.Path != path("twin.md") || !strings.Contains(r.Diagnostics[0], `duplicate contract name "alpha"`) {
			t.Errorf("rejected = %+v", r)
		}
		if err := os.Remove(path("renamed.md")); err != nil {
			t.Fatal(err)
		}
		wait.For(h.t, "alpha to load from twin.md", func() bool { return h.status("alpha").Path == path("twin.md") })
		if n := len(h.list().Rejected); n != 0 {
			t.Errorf("%d files still rejected", n)
		}
	})
}

func TestOneDaemonPerStateDir(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: runner})
	_, err := New(context.Background(), Config{Dir: dir, StateDir: state, Runner: runner, Listen: "127.0.0.1:0"})
	if !errors.Is(err, ErrStateDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second daemon on the same state dir: %v, want ErrStateDirInUse naming pid %d", err, os.Getpid())
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	d, err := New(context.Background(), Config{Dir: dir, StateDir: state, Runner: runner, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("after the first daemon stopped: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Errorf("Run of a cancelled daemon = %v", err)
	}
}

func TestRestartKeepsTheCadenceOfTheLastRun(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "hourly", "1", "1h", false)
	writeContract(t, dir, "fresh", "1", "1h", false)
	// hourly last ran 59m59s ago, under a daemon that has since restarted.
	st := SchedulerState{Contract: "hourly", LastResult: ResultOK, LastStartedAt: time.Now().Add(-time.Hour + time.Second)}
	if err := writeState(state, st); err != nil {
		t.Fatal(err)
	}
	log := newRunLog()
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		log.begin(c)
		defer log.end(c)
		return report(c), nil
	}}})
	wait.For(h.t, "hourly's run, due a second after start", func() bool { return log.count("hourly") == 1 })
	if next := h.status("fresh").NextRunAt; next == nil || time.Until(*next) < 59*time.Minute {
		t.Errorf("a contract that never ran is due at %v, want an interval from now", next)
	}
	if n := log.count("fresh"); n != 0 {
		t.Errorf("fresh ran %d times", n)
	}
}

func TestMaintenanceOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "manual", "1", "1h", false)
	tokenFile := writeToken(t)
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), TokenFile: tokenFile, Runner: runner})
	post := func(path, auth, body string) (int, map[string]any) { return postAPI(t, h.base+path, auth, body) }
	detail := func() map[string]any {
		resp, err := http.Get(h.base + "/contracts/manual")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	const auth = "Bearer s3cret-token"
	for _, tc := range []struct {
		name, path, auth, body string
		want                   int
	}{
		{"no token", "/contracts/manual/maintenance", "", `{"for":"1h"}`, http.StatusUnauthorized},
		{"unknown contract", "/contracts/ghost/maintenance", auth, `{"for":"1h"}`, http.StatusNotFound},
		{"neither for nor end", "/contracts/manual/maintenance", auth, `{"reason":"x"}`, http.StatusBadRequest},
		{"both for and end", "/contracts/manual/maintenance", auth, `{"for":"1h","end":true}`, http.StatusBadRequest},
		{"bad duration", "/contracts/manual/maintenance", auth, `{"for":"soon"}`, http.StatusBadRequest},
		{"unknown field", "/contracts/manual/maintenance", auth, `{"for":"1h","until":"x"}`, http.StatusBadRequest},
		// On 02630f2 a mistyped agent opened a window nobody has.
		{"unknown agent", "/contracts/manual/maintenance", auth, `{"agent":"opz","for":"1h"}`, http.StatusBadRequest},
	} {
		if code, body := post(tc.path, tc.auth, tc.body); code != tc.want {
			t.Errorf("%s: POST %s %s = %d %v, want %d", tc.name, tc.path, tc.body, code, body, tc.want)
		}
	}
	if det := detail(); det["maintenance"] != nil {
		t.Fatalf("a refused request opened a window: %v", det["maintenance"])
	}

	if _, body := post("/contracts/manual/maintenance", auth, `{"agent":"opz","for":"1h"}`); !strings.Contains(fmt.Sprint(body["error"]), `did you mean "ops"?`) {
		t.Errorf("unknown agent: %v, want the nearest agent named", body)
	}
	code, body := post("/contracts/manual/maintenance", auth, `{"agent":"ops","for":"2h","reason":"pi upgrade"}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	w, _ := detail()["maintenance"].(map[string]any)["ops"].(map[string]any)
	if w == nil || w["reason"] != "pi upgrade" {
		t.Fatalf("detail after start: %v", detail()["maintenance"])
	}
	if code, body = post("/contracts/manual/maintenance", auth, `{"agent":"ops","end":true}`); code != http.StatusOK {
		t.Fatalf("end: %d %v", code, body)
	}
	if det := detail(); det["maintenance"] != nil {
		t.Fatalf("detail after end: %v", det["maintenance"])
	}
}

// writeToken writes the API token "s3cret-token" to a file and returns it.
func writeToken(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// postAPI POSTs body to url with the Authorization header auth (none when
// empty) and returns the status and the decoded JSON answer.
func postAPI(t *testing.T, url, auth, body string) (int, map[string]any) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestOneDurationGrammarEverywhere: the daemon's API reads durations as
// contracts and the CLI do (`1d` opens a day-long window over HTTP too, a
// wrong one says why), and explain writes a `1d` budget as `1d`.
func TestOneDurationGrammarEverywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "manual", "1", "1h", false)
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), TokenFile: writeToken(t),
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}})
	const auth = "Bearer s3cret-token"
	before := time.Now()
	code, body := postAPI(t, h.base+"/contracts/manual/maintenance", auth, `{"agent":"ops","for":"1d","reason":"move"}`)
	if code != http.StatusOK {
		t.Fatalf(`POST maintenance {"for":"1d"} = %d %v, want 200`, code, body)
	}
	w, _ := body["maintenance"].(map[string]any)["ops"].(map[string]any)
	until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(w["until"]))
	if err != nil || until.Before(before.Add(24*time.Hour)) || until.After(time.Now().Add(24*time.Hour)) {
		t.Errorf("a 1d window ends at %v (%v); want a day from now", w["until"], err)
	}
	if code, body := postAPI(t, h.base+"/contracts/manual/maintenance", auth, `{"for":"90"}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), `"90" has no unit`) {
		t.Errorf(`POST maintenance {"for":"90"} = %d %v; want 400 saying it has no unit`, code, body)
	}
	c, ds := contracts.Parse("d.md", []byte("---\nname: d\nruntime_contract: 2\nguards: {budget: \"1 per 1d\", debounce: 36h, repeat: 1w}\n---\n\n## Execution\n\n### S {#s agent=a}\n\n```sh {id=p}\necho ok\n```\n\nExpected: `ok`\n"), contracts.Options{})
	if c == nil || ds.HasErrors() {
		t.Fatalf("contract: %s", ds)
	}
	var b strings.Builder
	if err := contracts.WriteExplainText(&b, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 per 1d", "1d12h", "1w"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "24h") || strings.Contains(b.String(), "168h") {
		t.Errorf("explain writes days as hours:\n%s", b.String())
	}
}
