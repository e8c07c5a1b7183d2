package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

const meshContract = "---\n" + `kind: responsibility
name: mesh
version: 1.0.0
runtime_contract: 2
agent: abiba
report_only_agents: [koby]
secrets: [API_KEY]
guards:
  debounce: 300s
  unreachable_after: 2
  grace: 5s
targets:
  srv: {local: true}
  pi: {local: true}
  kobyhost: {local: true}
` + "---\n" + `
# Mesh

## Maintains

- server_status: "healthy" | "down"
- agents: map of per-agent snapshots
- last_check: timestamp
- overall_severity: "healthy" | "degraded" | "critical"
- restart_debounce: timestamp

| Key | Value |
|-----|-------|
| ` + "`server_status`" + ` | ` + "`stages.server.severity in [\"healthy\", \"degraded\"] ? \"healthy\" : \"down\"`" + ` |
| ` + "`restart_debounce`" + ` | ` + "`last_repair`" + ` |

### Per-Agent Snapshot Schema

` + "```json" + `
{"abiba": {"connected": true, "response_pipeline": "healthy", "severity": "healthy"}}
` + "```" + `

## Execution

### Server {#server .gate on=srv}

` + "```bash {id=server}\necho server\n```" + `

Expected: ` + "`200`" + `

### Pi {#pi agent=abiba on=pi}

` + "```bash {id=health as=json}\necho health\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`connected`" + ` | ` + "`true`" + ` | ` + "`false`" + ` |
| ` + "`response_pipeline`" + ` | ` + "`healthy`" + ` | ` + "`blocked`" + ` |

` + "```bash {id=extra}\necho extra\n```" + `

| Condition | Action |
|-----------|--------|
| ` + "`response_pipeline: blocked`" + ` | ` + "`pm2 restart abiba-zulip`" + ` |
| ` + "`connected: false`" + ` | ` + "`pm2 restart abiba-zulip`" + ` |

### Koby {#koby agent=koby on=kobyhost}

` + "```bash {id=koby_health as=json}\necho koby\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stuck`" + ` | ` + "`false`" + ` | ` + "`true`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`stuck: true`" + ` | ` + "`pm2 restart koby`" + ` |
`

// world is a fake mesh: a server gate, the pi agent and koby.
type world struct {
	mu       sync.Mutex
	server   string // what the gate prints
	pi       map[string]any
	koby     map[string]any
	piDown   bool // pi's target is unreachable
	extraCut bool // pi's connection dies after the health step of its batch
	sticky   bool // a restart of abiba-zulip does not clear pi's fault
	restarts map[string]int
	opener   *fakeOpener
}

func newWorld() *world {
	w := &world{server: "200", restarts: map[string]int{}}
	w.pi = map[string]any{"connected": true, "response_pipeline": "healthy"}
	w.koby = map[string]any{"stuck": false}
	script := func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		s := cmd.Script
		switch {
		case strings.Contains(s, "pm2 restart abiba-zulip"):
			w.restarts["abiba"]++
			if !w.sticky {
				w.pi = map[string]any{"connected": true, "response_pipeline": "healthy"}
			}
			return transports.Result{}, nil
		case strings.Contains(s, "pm2 restart koby"):
			w.restarts["koby"]++
			return transports.Result{}, nil
		case strings.Contains(s, "echo server"):
			return transports.Result{Stdout: w.server + "\n"}, nil
		case strings.Contains(s, "echo health"):
			if w.piDown {
				return transports.Result{}, transports.ErrUnreachable
			}
			b, _ := json.Marshal(w.pi)
			return transports.Result{Stdout: string(b)}, nil
		case strings.Contains(s, "echo koby"):
			b, _ := json.Marshal(w.koby)
			return transports.Result{Stdout: string(b)}, nil
		case strings.Contains(s, "echo extra"):
			if w.piDown || w.extraCut {
				return transports.Result{}, transports.ErrUnreachable
			}
			return transports.Result{Stdout: "secret is " + cmd.Env["API_KEY"]}, nil
		}
		return transports.Result{ExitCode: 127, Stderr: "unexpected script"}, nil
	}
	w.opener = &fakeOpener{targets: map[string]*fakeTarget{
		"srv": {name: "srv", exec: script}, "pi": {name: "pi", exec: script}, "kobyhost": {name: "kobyhost", exec: script},
	}}
	return w
}

func (w *world) set(f func(w *world)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func (w *world) restartCount(agent string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.restarts[agent]
}

type harness struct {
	t     *testing.T
	c     *contracts.Contract
	w     *world
	clock *clock.Fake
	dir   string
	rec   *recorder
	dry   bool
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, c: parse(t, meshContract), w: newWorld(), clock: clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), dir: t.TempDir(), rec: &recorder{}}
}

// run runs the contract once with a fresh Engine, as a new process would.
func (h *harness) run() *Report {
	h.t.Helper()
	eng, err := New(Options{
		StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, DryRun: h.dry,
		Getenv:    func(k string) string { return map[string]string{"API_KEY": "hunter2-secret"}[k] },
		Notifiers: []notify.Notifier{h.rec},
		Sleep:     func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil },
	})
	if err != nil {
		h.t.Fatal(err)
	}
	rep, err := eng.Run(context.Background(), h.c)
	if err != nil {
		h.t.Fatalf("run: %v", err)
	}
	return rep
}

func actionsWith(rep *Report, status string) []*ActionReport {
	var out []*ActionReport
	for _, a := range rep.Actions {
		if a.Status == status {
			out = append(out, a)
		}
	}
	return out
}

func TestAllHealthyMeansNoActionNoAlertAndAFullSnapshot(t *testing.T) {
	h := newHarness(t)
	rep := h.run()
	if rep.OverallSeverity != contracts.SeverityHealthy || len(rep.Actions) != 0 || len(rep.Alerts) != 0 {
		t.Fatalf("overall %v, actions %d, alerts %d; want healthy and nothing done", rep.OverallSeverity, len(rep.Actions), len(rep.Alerts))
	}
	st, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if problems := ValidateSnapshot(h.c, st.Snapshot); len(problems) > 0 {
		t.Fatalf("snapshot does not match Maintains: %v\n%v", problems, st.Snapshot)
	}
	abiba := st.Snapshot["agents"].(map[string]any)["abiba"].(map[string]any)
	if st.Snapshot["server_status"] != "healthy" || abiba["connected"] != true || abiba["response_pipeline"] != "healthy" || abiba["severity"] != "healthy" {
		t.Fatalf("snapshot %v", st.Snapshot)
	}
}

func TestBlockedPipelineRestartsOnceThenDebounces(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	rep := h.run()
	ran := actionsWith(rep, "ran")
	if h.w.restartCount("abiba") != 1 || len(ran) != 1 || ran[0].Verify != "remediated" {
		t.Fatalf("restarts %d, ran %+v; want one verified restart", h.w.restartCount("abiba"), ran)
	}

	h.clock.Advance(60 * time.Second)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	rep = h.run()
	pending := actionsWith(rep, "pending")
	if h.w.restartCount("abiba") != 1 || len(pending) != 1 || !strings.Contains(pending[0].Reason, "pending restart since") {
		t.Fatalf("inside the debounce window: restarts %d, actions %+v", h.w.restartCount("abiba"), rep.Actions)
	}

	h.clock.Advance(301 * time.Second)
	rep = h.run()
	if h.w.restartCount("abiba") != 2 || len(actionsWith(rep, "ran")) != 1 {
		t.Fatalf("after the window, condition still present: restarts %d, actions %+v", h.w.restartCount("abiba"), rep.Actions)
	}
	st, _ := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if st.Snapshot["restart_debounce"] == nil {
		t.Fatal("restart_debounce not recorded after a restart")
	}
}

func TestTwoConditionsOneRestart(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked"; w.pi["connected"] = false })
	rep := h.run()
	if h.w.restartCount("abiba") != 1 || len(actionsWith(rep, "merged")) != 1 {
		t.Fatalf("restarts %d actions %+v; want one restart for both conditions", h.w.restartCount("abiba"), rep.Actions)
	}
}

func TestReportOnlyAgentIsAlertedNeverRepaired(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	for i := 0; i < 3; i++ {
		rep := h.run()
		ro := actionsWith(rep, "report-only")
		if len(ro) != 1 || !strings.Contains(ro[0].Reason, "would run pm2 restart koby") {
			t.Fatalf("run %d: actions %+v", i, rep.Actions)
		}
		h.clock.Advance(time.Hour)
	}
	if n := h.w.opener.targets["kobyhost"].ran("pm2 restart koby"); n != 0 || h.w.restartCount("koby") != 0 {
		t.Fatalf("koby was repaired %d times", n)
	}
	if k := h.rec.kinds(); len(k) != 1 || k[0] != "open" {
		t.Fatalf("alerts %v; want exactly one open alert for koby", h.rec.msgs)
	}
}

func TestGateDownSkipsEveryStageAfterIt(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.server = "000" })
	rep := h.run()
	for _, st := range rep.Stages[1:] {
		if st.Status != StatusSkipped || st.Reason != "gate: server" {
			t.Fatalf("stage %s: %s %q", st.ID, st.Status, st.Reason)
		}
	}
	if h.w.opener.targets["pi"].ran("echo health") != 0 {
		t.Fatal("pi was probed behind a down gate")
	}
	if len(h.rec.msgs) != 1 || !strings.Contains(h.rec.msgs[0], "gate server is down") {
		t.Fatalf("alerts %v; want one gate alert", h.rec.msgs)
	}
	st, _ := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if st.Snapshot["server_status"] != "down" {
		t.Fatalf("server_status %v", st.Snapshot["server_status"])
	}
}

func TestUnreachableCountsCriticalOnlyAfterItsThreshold(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.piDown = true })
	rep := h.run()
	if a := rep.Agents["abiba"]; a.Severity != contracts.SeverityUnreachable || len(h.rec.msgs) != 0 {
		t.Fatalf("first unreachable run: abiba %v, alerts %v", a.Severity, h.rec.msgs)
	}
	if rep.OverallSeverity != contracts.SeverityUnreachable || NagiosCode(rep.OverallSeverity) != 1 {
		t.Fatalf("below the threshold: overall %v (nagios %d); want unreachable, a warning", rep.OverallSeverity, NagiosCode(rep.OverallSeverity))
	}
	h.run()
	rep = h.run()
	if rep.OverallSeverity != contracts.SeverityCritical || !rep.Agents["abiba"].Failing {
		t.Fatalf("past the threshold: overall %v, abiba %+v; want critical", rep.OverallSeverity, rep.Agents["abiba"])
	}
	if len(h.rec.msgs) != 1 || !strings.Contains(h.rec.msgs[0], "abiba") {
		t.Fatalf("after 3 unreachable runs with unreachable_after 2: alerts %v; want exactly one", h.rec.msgs)
	}
	if h.w.restartCount("abiba") != 0 {
		t.Fatal("an unreachable agent was repaired")
	}
}

func TestAlertOpensOnceAcrossProcessesAndResolvesOnce(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	h.run()
	h.clock.Advance(15 * time.Minute)
	h.run()
	h.w.set(func(w *world) { w.koby["stuck"] = false })
	h.clock.Advance(15 * time.Minute)
	h.run()
	h.clock.Advance(15 * time.Minute)
	h.run()
	if k := strings.Join(h.rec.kinds(), ","); k != "open,resolved" {
		t.Fatalf("messages %v; want one open then one resolved", h.rec.msgs)
	}
}

func TestFailingNotifierNeverFailsTheRunAndRetriesNextRun(t *testing.T) {
	h := newHarness(t)
	h.rec.fail = true
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	rep := h.run()
	if len(rep.Alerts) != 1 || rep.Alerts[0].Sent || rep.Alerts[0].Error == "" {
		t.Fatalf("alerts %+v; want one unsent alert with its error", rep.Alerts)
	}
	h.rec.fail = false
	h.clock.Advance(15 * time.Minute)
	h.run()
	if k := h.rec.kinds(); len(k) != 1 || k[0] != "open" {
		t.Fatalf("messages after the retry %v", h.rec.msgs)
	}
}

func TestDryRunRunsNothingAndWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.dry = true
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	rep := h.run()
	dry := actionsWith(rep, "dry-run")
	if len(dry) != 1 || len(dry[0].Trace) == 0 || h.w.restartCount("abiba") != 0 {
		t.Fatalf("actions %+v restarts %d", rep.Actions, h.w.restartCount("abiba"))
	}
	if len(h.rec.msgs) != 0 {
		t.Fatalf("dry run sent %v", h.rec.msgs)
	}
	if _, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now()); !errors.Is(err, ErrNeverRan) {
		t.Fatalf("dry run wrote a snapshot: %v", err)
	}
}

func TestCorruptLedgerIsMovedAsideAndNothingIsRepaired(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	h.run() // one restart, recorded in the ledger and the snapshot
	if err := os.WriteFile(filepath.Join(h.dir, "mesh.ledger.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	rep := h.run()
	if h.w.restartCount("abiba") != 1 || len(rep.Errors) == 0 || !strings.Contains(rep.Errors[0], "corrupt") {
		t.Fatalf("restarts %d errors %v", h.w.restartCount("abiba"), rep.Errors)
	}
	if !strings.Contains(strings.Join(h.rec.msgs, "\n"), "ledger was corrupt") {
		t.Fatalf("the corrupt ledger was not alerted: %v", h.rec.msgs)
	}
	// The next run has a fresh ledger, but the debounce still holds: the
	// last repair comes back from the snapshot's restart_debounce.
	h.clock.Advance(time.Minute)
	rep = h.run()
	if h.w.restartCount("abiba") != 1 || len(actionsWith(rep, "pending")) != 1 {
		t.Fatalf("after the lost ledger: restarts %d, actions %+v; want the debounce kept", h.w.restartCount("abiba"), rep.Actions)
	}
	aside, _ := filepath.Glob(filepath.Join(h.dir, "mesh.ledger.json.corrupt-*"))
	if len(aside) != 1 {
		t.Fatalf("corrupt ledger not moved aside: %v", aside)
	}
	if _, err := store.Open(h.dir); err != nil {
		t.Fatal(err)
	}
}

func TestConsecutiveStepsOnOneTargetTravelAsOneBatch(t *testing.T) {
	h := newHarness(t)
	h.run()
	if b := h.w.opener.targets["pi"].batch; b != 1 {
		t.Fatalf("pi got %d batches; want the two probe steps in one", b)
	}
}

func TestSecretsAreRedactedFromReports(t *testing.T) {
	h := newHarness(t)
	rep := h.run()
	b, _ := json.Marshal(rep)
	if strings.Contains(string(b), "hunter2-secret") || !strings.Contains(string(b), "secret is ***") {
		t.Fatalf("report leaks or lost the redacted output: %s", b)
	}
}

func TestSecondRunWhileLockedIsSkippedNotFailed(t *testing.T) {
	h := newHarness(t)
	s, err := store.Open(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock(context.Background(), "mesh", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	rep := h.run()
	if rep.Skipped != "another run holds the lock" || h.w.opener.targets["pi"].ran("echo health") != 0 {
		t.Fatalf("skipped %q; probes ran %d times", rep.Skipped, h.w.opener.targets["pi"].ran("echo health"))
	}
}

func TestSecretsInProbeFieldsAndLogLinesAreRedacted(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked hunter2-secret" })
	var logs strings.Builder
	eng, err := New(Options{
		StateDir: h.dir, Opener: h.w.opener, Clock: h.clock,
		Getenv: func(k string) string { return map[string]string{"API_KEY": "hunter2-secret"}[k] },
		Logf:   func(format string, args ...any) { fmt.Fprintf(&logs, format+"\n", args...) },
		Sleep:  func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Run(context.Background(), h.c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	hist, _ := os.ReadFile(filepath.Join(h.dir, "mesh.history.jsonl"))
	for what, s := range map[string]string{"report": string(b), "log": logs.String(), "history": string(hist)} {
		if strings.Contains(s, "hunter2-secret") {
			t.Fatalf("%s leaks the secret:\n%s", what, s)
		}
	}
	if !strings.Contains(string(b), "blocked ***") {
		t.Fatalf("the redacted field is gone from the report: %s", b)
	}
}

func TestRestartsFunctionReadsTheLedger(t *testing.T) {
	h := newHarness(t)
	row := "| `connected: false` | `pm2 restart abiba-zulip` |\n"
	if !strings.Contains(meshContract, row) {
		t.Fatal("test contract changed")
	}
	h.c = parse(t, strings.Replace(meshContract, row, row+"| `restarts(\"abiba\", \"1h\") >= 2` | Alert — abiba restarted twice within the hour |\n", 1))
	for i := 0; i < 3; i++ {
		h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
		rep := h.run()
		alerts := actionsWith(rep, "alert")
		if want := i == 2; (len(alerts) == 1) != want {
			t.Fatalf("run %d (restarts so far %d): alert rows %+v", i, h.w.restartCount("abiba"), alerts)
		}
		h.clock.Advance(6 * time.Minute)
	}
}

// A connection that dies in the middle of a batch keeps what the steps
// before it saw: they are judged as usual, and only the steps that never
// ran count as unreachable.
func TestSessionDyingMidBatchKeepsTheFinishedSteps(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) {
		w.extraCut = true
		w.pi = map[string]any{"connected": true, "response_pipeline": "blocked"}
	})
	rep := h.run()
	var pi *StageReport
	for _, st := range rep.Stages {
		if st.ID == "pi" {
			pi = st
		}
	}
	if pi == nil || len(pi.Steps) != 2 {
		t.Fatalf("pi stage: %+v", pi)
	}
	health, extra := pi.Steps[0], pi.Steps[1]
	if health.Error != "" || health.Severity != contracts.SeverityCritical || health.Values["response_pipeline"] != "blocked" {
		t.Errorf("the finished step lost its observation: severity %v, error %q, values %v", health.Severity, health.Error, health.Values)
	}
	if extra.Severity != contracts.SeverityUnreachable || extra.Error == "" {
		t.Errorf("the step that never ran: severity %v, error %q; want unreachable", extra.Severity, extra.Error)
	}
}

// An operator's maintenance window pauses the agent's repairs and holds its
// new alerts while checks go on; once it ends, the same condition is
// repaired and alerted as usual.
func TestMaintenanceWindowPausesRepairsAndNewAlerts(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	if _, err := SetMaintenance(context.Background(), dirStore(t, h.dir), "mesh", "abiba", time.Hour, "pi upgrade", now); err != nil {
		t.Fatal(err)
	}
	h.w.set(func(w *world) { w.pi = map[string]any{"connected": true, "response_pipeline": "blocked"} })

	rep := h.run()
	if n := h.w.restartCount("abiba"); n != 0 {
		t.Fatalf("abiba restarted %d times inside its maintenance window", n)
	}
	if a := rep.Agents["abiba"]; a == nil || a.Severity != contracts.SeverityCritical {
		t.Fatalf("abiba is still graded inside the window: %+v", a)
	}
	blocked := actionsWith(rep, guard.StatusBlocked)
	if len(blocked) != 1 || blocked[0].Guard != guard.GuardMaintenance || !strings.Contains(blocked[0].Reason, "pi upgrade") {
		t.Fatalf("actions %+v; want the restart blocked by the maintenance guard", rep.Actions)
	}
	if w := rep.Maintenance["abiba"]; w == nil || w.Reason != "pi upgrade" {
		t.Fatalf("report maintenance = %v", rep.Maintenance)
	}
	if len(h.rec.msgs) != 0 {
		t.Fatalf("alerts sent inside the window: %v", h.rec.msgs)
	}
	// koby, outside the window, still alerts.
	h.w.set(func(w *world) { w.koby = map[string]any{"stuck": true} })
	h.clock.Advance(10 * time.Minute)
	h.run()
	if len(h.rec.msgs) != 1 || !strings.Contains(h.rec.msgs[0], "koby") {
		t.Fatalf("alerts %v; want koby's only", h.rec.msgs)
	}

	h.clock.Advance(time.Hour)
	rep = h.run()
	if n := h.w.restartCount("abiba"); n != 1 {
		t.Fatalf("after the window abiba restarted %d times, want 1", n)
	}
	if last := h.rec.msgs[len(h.rec.msgs)-1]; !strings.Contains(last, "abiba") {
		t.Errorf("after the window abiba's alert did not open: %v", h.rec.msgs)
	}
	if rep.Maintenance != nil {
		t.Errorf("report still lists windows after they ended: %v", rep.Maintenance)
	}
	windows, err := Maintenance(dirStore(t, h.dir), "mesh", h.clock.Now())
	if err != nil || len(windows) != 0 {
		t.Errorf("windows after the end: %v, %v", windows, err)
	}
}
