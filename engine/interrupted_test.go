package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// runCtx runs the harness's contract on dir under ctx and returns the
// report, the error and the log lines.
func (h *harness) runCtx(ctx context.Context, dir string) (*Report, error, []string) {
	h.t.Helper()
	var mu sync.Mutex
	var logs []string
	eng, err := New(Options{
		StateDir: dir, Opener: h.w.opener, Clock: h.clock,
		Notifiers: []notify.Notifier{h.rec},
		Sleep:     func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil },
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	rep, err := eng.Run(ctx, h.c)
	return rep, err, logs
}

// panicOn makes target's exec panic when a script contains s, once.
func (w *world) panicOn(target, s string) {
	t := w.opener.targets[target]
	inner := t.exec
	var once sync.Once
	t.exec = func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, s) {
			once.Do(func() { panic("injected fault: " + s) })
		}
		return inner(ctx, cmd)
	}
}

func history(t *testing.T, dir string) []HistoryRecord {
	t.Helper()
	hist, err := dirStore(t, dir).History("mesh", 0)
	if err != nil {
		t.Fatal(err)
	}
	return hist
}

// A panic anywhere in a run — in the run's own goroutine or in one it
// started — ends that run as an engine failure with its stack in the log
// and its record in the history; the process, and the next run, go on.
func TestAPanicIsTheRunsEngineFailureAndIsRecorded(t *testing.T) {
	for _, tc := range []struct {
		name, target, script, where string
		blocked                     bool // pi's pipeline is blocked: a repair runs
	}{
		{name: "gate, in the run's goroutine", target: "srv", script: "echo server", where: "run (probe)"},
		{name: "stage, in its own goroutine", target: "pi", script: "echo health", where: "stage pi"},
		{name: "repair, after its intent", target: "pi", script: "pm2 restart abiba-zulip", where: "run (repair)", blocked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.blocked {
				h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
			}
			h.w.panicOn(tc.target, tc.script)
			rep, err, logs := h.runIn(h.dir)
			var p *PanicError
			if !errors.Is(err, ErrEngine) || !errors.As(err, &p) {
				t.Fatalf("run error %v; want an engine failure carrying the panic", err)
			}
			if p.Where != tc.where || !strings.Contains(fmt.Sprint(p.Value), "injected fault") {
				t.Errorf("panic %q in %q; want the injected fault in %q", p.Value, p.Where, tc.where)
			}
			if rep == nil || !containsPrefix(rep.Errors, "engine panic in "+tc.where) {
				t.Errorf("report errors %q; want the panic", rep.Errors)
			}
			if !strings.Contains(strings.Join(logs, "\n"), "goroutine ") {
				t.Errorf("the log has no stack:\n%s", strings.Join(logs, "\n"))
			}
			hist := history(t, h.dir)
			if len(hist) != 1 || hist[0].RunID != rep.RunID || !strings.HasPrefix(hist[0].Interrupted, "engine panic in "+tc.where) {
				t.Fatalf("history %+v; want the run that panicked, interrupted by the panic", hist)
			}

			// The next run goes on from what the ledger holds: a repair
			// whose intent was written before the panic is counted and
			// verified, never run again inside the debounce.
			h.clock.Advance(time.Minute)
			rep2, err, _ := h.runIn(h.dir)
			if err != nil {
				t.Fatalf("the run after the panic: %v", err)
			}
			if n := len(history(t, h.dir)); n != 2 {
				t.Errorf("%d history records after the next run, want 2", n)
			}
			if tc.blocked {
				if n := h.w.restartCount("abiba"); n != 0 {
					t.Errorf("%d restarts; the repair the panic cut off must not run again inside the debounce", n)
				}
				if acts := actionsWith(rep2, ActionInterrupted); len(acts) != 1 {
					t.Errorf("actions %+v; want the repair the panic cut off, reported interrupted", rep2.Actions)
				}
			}
			l, _ := ReadLedger(mustStore(t, h.dir), "mesh")
			if l.Run != nil {
				t.Errorf("ledger still names run %s after a run recorded its end", l.Run.RunID)
			}
		})
	}
}

// A notifier that panics fails its own delivery (the message is queued for
// it), and the run records everything, then is an engine failure.
func TestANotifierThatPanicsFailsItsDeliveryAndTheRun(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	h.rec.before = func() { panic("injected fault in a notifier") }
	rep, err, _ := h.runIn(h.dir)
	var p *PanicError
	if !errors.Is(err, ErrEngine) || !errors.As(err, &p) || p.Where != "notifier recorder" {
		t.Fatalf("run error %v; want an engine failure naming the notifier's panic", err)
	}
	if _, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now()); err != nil {
		t.Errorf("no snapshot after a notifier's panic: %v", err)
	}
	if hist := history(t, h.dir); len(hist) != 1 || hist[0].RunID != rep.RunID {
		t.Errorf("history %+v; want the run", hist)
	}
	l, _ := ReadLedger(mustStore(t, h.dir), "mesh")
	if len(l.Outbox.Queue) != 1 || l.Outbox.Queue[0].Notifier != "recorder" || !strings.Contains(l.Outbox.Queue[0].LastError, "panicked") {
		t.Fatalf("outbox %+v; want the message queued for the notifier that panicked", l.Outbox.Queue)
	}

	h.rec.before = nil
	h.clock.Advance(time.Hour)
	if _, err, _ := h.runIn(h.dir); err != nil {
		t.Fatal(err)
	}
	if got := h.rec.kinds(); len(got) != 1 || got[0] != notify.KindOpen {
		t.Errorf("delivered %v after the notifier recovered; want the queued open, once", got)
	}
}

// A process killed during a run leaves the ledger ahead of the history:
// the next holder of the run lock writes the stopped run's record from
// the ledger, once, so history and ledger agree.
func TestARunStoppedMidwayIsRecordedFromTheLedger(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	var crashed []string // the state dir as a kill at each repair would leave it
	h.w.onRepair(func() { crashed = append(crashed, copyDir(t, h.dir)) })
	first := h.run()
	if len(crashed) != 1 {
		t.Fatalf("%d repairs", len(crashed))
	}

	// A reader (contractd history) with no run holding the lock.
	dir, killed := crashed[0], copyDir(t, crashed[0])
	if n := len(history(t, dir)); n != 0 {
		t.Fatalf("%d history records in the state a kill left; the test needs none", n)
	}
	rec, err := RecordStopped(context.Background(), dirStore(t, dir), "mesh", h.clock.Now())
	if err != nil || rec == nil {
		t.Fatalf("RecordStopped: %v, %v; want the stopped run's record", rec, err)
	}
	hist := history(t, dir)
	if len(hist) != 1 || hist[0].RunID != first.RunID || hist[0].Interrupted != stoppedReason || hist[0].OverallSeverity != "unknown" {
		t.Fatalf("history %+v; want run %s, interrupted, severity unknown", hist, first.RunID)
	}
	if a := hist[0].Actions; len(a) != 1 || a[0].Status != ActionInterrupted || a[0].Action != "pm2 restart abiba-zulip" {
		t.Errorf("actions %+v; want the repair the ledger holds, interrupted", a)
	}
	l, _ := ReadLedger(mustStore(t, dir), "mesh")
	if l.Run != nil || len(l.Intents) != 1 {
		t.Errorf("ledger after the record: run %+v, intents %+v; want no mark and the intent kept for the next run to verify", l.Run, l.Intents)
	}
	if rec, err := RecordStopped(context.Background(), dirStore(t, dir), "mesh", h.clock.Now()); rec != nil || err != nil {
		t.Errorf("second RecordStopped: %v, %v; want nothing to do", rec, err)
	}

	// The next run, on the state the kill left, does the same, then
	// records itself.
	h.clock.Advance(time.Minute)
	_, err, logs := h.runIn(killed)
	if err != nil {
		t.Fatal(err)
	}
	if hist := history(t, killed); len(hist) != 2 || hist[0].RunID != first.RunID || hist[0].Interrupted != stoppedReason || hist[1].Interrupted != "" {
		t.Errorf("history %+v; want the stopped run, then the next one", hist)
	}
	if !hasEvent(logs, "mesh: a run was stopped before it recorded its end", "stopped_run="+first.RunID) {
		t.Errorf("the log does not say the stopped run was recorded: %q", logs)
	}
	if hist := history(t, h.dir); len(hist) != 1 || hist[0].Interrupted != "" {
		t.Errorf("the run that was not killed: history %+v, want its own record only", hist)
	}
}

// A run stopped after its messages were recorded and before the routes had
// them: its record lists them, not handed to the routes.
func TestARunStoppedBeforeDeliveryListsItsMessages(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	var crashed string
	h.rec.before = func() { crashed = copyDir(t, h.dir) }
	h.run()
	if _, err := RecordStopped(context.Background(), dirStore(t, crashed), "mesh", h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	hist := history(t, crashed)
	if len(hist) != 1 || len(hist[0].Alerts) != 1 {
		t.Fatalf("history %+v; want the stopped run with its one message", hist)
	}
	if a := hist[0].Alerts[0]; a.Kind != notify.KindOpen || !strings.Contains(a.Text, "koby is critical") || !strings.HasPrefix(a.Error, "not handed to the routes") {
		t.Errorf("alert %+v; want koby's open, not handed to the routes", a)
	}
}

// A reader never writes over a run in progress: with the lock held it
// says a run is going and leaves the ledger alone.
func TestRecordStoppedLeavesARunInProgressAlone(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	var errs []error
	h.w.onRepair(func() {
		_, err := RecordStopped(context.Background(), dirStore(t, h.dir), "mesh", h.clock.Now())
		errs = append(errs, err)
	})
	h.run()
	if len(errs) != 1 || !errors.Is(errs[0], ErrRunning) {
		t.Fatalf("RecordStopped during a run: %v; want ErrRunning", errs)
	}
	if hist := history(t, h.dir); len(hist) != 1 || hist[0].Interrupted != "" {
		t.Errorf("history %+v; want only the run's own record", hist)
	}
}

// A run whose context ends (SIGTERM) during a repair cancels what is in
// flight and records what it did: snapshot, ledger and history agree, the
// history naming the interruption.
func TestACancelledRunRecordsWhatItDid(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	ctx, cancel := context.WithCancelCause(context.Background())
	sigterm := errors.New("terminated signal received")
	h.w.onRepair(func() { cancel(sigterm) })
	rep, err, _ := h.runCtx(ctx, h.dir)
	if !errors.Is(err, ErrEngine) || !errors.Is(err, sigterm) {
		t.Fatalf("run error %v; want an engine failure naming the signal", err)
	}
	hist := history(t, h.dir)
	if len(hist) != 1 || hist[0].RunID != rep.RunID || hist[0].Interrupted != sigterm.Error() {
		t.Fatalf("history %+v; want the run, interrupted by the signal", hist)
	}
	if len(actionsWith(rep, ActionRan)) != 1 || len(hist[0].Actions) == 0 {
		t.Errorf("actions %+v, history actions %+v; want the repair that ran", rep.Actions, hist[0].Actions)
	}
	if _, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now()); err != nil {
		t.Errorf("no snapshot: %v", err)
	}
	l, err := store.Open(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	if led, _ := ReadLedger(l, "mesh"); led.Run != nil || len(led.Units["abiba"].Repairs) != 1 {
		t.Errorf("ledger: run mark %+v, repairs %v; want no mark and the repair", led.Run, led.Units["abiba"].Repairs)
	}
}
