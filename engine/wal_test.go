package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// copyDir copies the state dir's files as they are now: what a crash at
// this instant would leave behind.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// runIn runs the harness's contract against another state dir and returns
// the report, the error and the log lines.
func (h *harness) runIn(dir string) (*Report, error, []string) {
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
	rep, err := eng.Run(context.Background(), h.c)
	return rep, err, logs
}

// onRepair makes the world call f while abiba's repair command runs.
func (w *world) onRepair(f func()) {
	t := w.opener.targets["pi"]
	inner := t.exec
	t.exec = func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, "pm2 restart abiba-zulip") {
			f()
		}
		return inner(ctx, cmd)
	}
}

// The repair is in the ledger before its command starts. A process killed
// while the command runs leaves that ledger; the next run counts the repair
// (the debounce holds, it does not run again), verifies it on its own probe
// and says so.
func TestARepairIsRecordedBeforeItRunsAndACrashNeverRepeatsIt(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	var crashed string
	h.w.onRepair(func() {
		crashed = copyDir(t, h.dir)
		l, err := ReadLedger(mustStore(t, crashed), "mesh")
		if err != nil {
			t.Errorf("ledger during the repair: %v", err)
			return
		}
		if len(l.Intents) != 1 || l.Intents[0].Done() || l.Intents[0].Command != "pm2 restart abiba-zulip" || len(l.Units["abiba"].Repairs) != 1 {
			t.Errorf("ledger while the repair runs: intents %+v, repairs %v; want the intent and the repair, not yet ended", l.Intents, l.Units["abiba"].Repairs)
		}
	})
	h.run()
	if crashed == "" || h.w.restartCount("abiba") != 1 {
		t.Fatalf("the repair did not run once (%d)", h.w.restartCount("abiba"))
	}

	// A new process on the ledger the crash left, a minute later: the
	// restart cleared the pipeline, so the interrupted repair is verified
	// remediated and nothing runs.
	h.clock.Advance(time.Minute)
	rep, err, logs := h.runIn(crashed)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.w.restartCount("abiba"); n != 1 {
		t.Errorf("after the crash: %d restarts, want still 1", n)
	}
	acts := actionsWith(rep, ActionInterrupted)
	if len(acts) != 1 || acts[0].Verify != "remediated" || !strings.Contains(acts[0].Reason, "never recorded as ended") {
		t.Errorf("actions %+v; want the interrupted repair, verified remediated", rep.Actions)
	}
	if !hasEvent(logs, "mesh: repair interrupted", "agent=abiba", "stopped_run=") {
		t.Errorf("log %q does not say the repair was interrupted", logs)
	}
	l, _ := ReadLedger(mustStore(t, crashed), "mesh")
	if len(l.Intents) != 0 {
		t.Errorf("intents left after verification: %+v", l.Intents)
	}

	// The same crash, the fault still there: the repair is not run again
	// inside the debounce; it is verified as failed and is pending.
	h2 := newHarness(t)
	h2.w.set(func(w *world) { w.pi["response_pipeline"], w.sticky = "blocked", true })
	crashed = ""
	h2.w.onRepair(func() { crashed = copyDir(t, h2.dir) })
	h2.run()
	h2.clock.Advance(time.Minute)
	rep, err, _ = h2.runIn(crashed)
	if err != nil {
		t.Fatal(err)
	}
	if n := h2.w.restartCount("abiba"); n != 1 {
		t.Errorf("fault still there after the crash: %d restarts, want 1 (the debounce counts the interrupted one)", n)
	}
	if acts := actionsWith(rep, ActionInterrupted); len(acts) != 1 || acts[0].Verify != "remediation failed" {
		t.Errorf("actions %+v; want the interrupted repair verified as failed", rep.Actions)
	}
	if p := actionsWith(rep, "pending"); len(p) != 1 || p[0].Guard != "debounce" {
		t.Errorf("actions %+v; want the repair pending on the debounce", rep.Actions)
	}
}

// Messages are in the ledger before any route has them: a crash after the
// incidents were decided loses no page; the next run sends it.
func TestACrashBeforeDeliveryLosesNoMessage(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	// The recorder is the route; a crash while it delivers is a crash
	// after the write-ahead record.
	var crashed string
	h.rec.before = func() { crashed = copyDir(t, h.dir) }
	h.run()
	h.rec.before = nil
	if crashed == "" {
		t.Fatal("nothing was delivered")
	}
	n := h.rec.count()
	h.clock.Advance(time.Minute)
	rep, err, _ := h.runIn(crashed)
	if err != nil {
		t.Fatal(err)
	}
	again := h.rec.since(n)
	if len(again) != 1 || again[0].Kind != notify.KindOpen || !strings.Contains(again[0].Text, "koby is critical") {
		t.Errorf("after the crash the next run sent:\n%s\nwant the open it had not recorded as delivered, once", render(again))
	}
	for _, a := range rep.Alerts {
		if a.Kind == notify.KindOpen && !a.Retry {
			t.Errorf("the incident opened a second time: %+v", a)
		}
	}
}

// A state dir that cannot be written: no repair runs, nothing is sent (the
// next run would send it again), every message is logged, and the run
// fails as an engine failure.
func TestAStateDirThatCannotBeWrittenRunsNoRepairAndLosesNoAlert(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked"; w.koby["stuck"] = true })
	dir := filepath.Join(t.TempDir(), "state")
	// The probe of pi replaces the state dir by a file: no ledger write can
	// succeed after it (root ignores directory permissions, a file does not).
	t0 := h.w.opener.targets["pi"]
	inner := t0.exec
	var once sync.Once
	t0.exec = func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		once.Do(func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(dir, []byte("not a directory\n"), 0o600); err != nil {
				t.Error(err)
			}
		})
		return inner(ctx, cmd)
	}
	rep, err, logs := h.runIn(dir)
	if !errors.Is(err, ErrEngine) {
		t.Errorf("run error %v, want an engine failure (exit 1)", err)
	}
	if n := h.w.restartCount("abiba"); n != 0 {
		t.Errorf("%d repairs with a state dir that cannot record them", n)
	}
	for _, a := range rep.Actions {
		if a.Agent == "abiba" && (a.Status != "blocked" || a.Guard != "ledger" || !strings.Contains(a.Reason, "state cannot be written")) {
			t.Errorf("abiba's repair: %+v; want it blocked by the ledger", *a)
		}
	}
	if n := h.rec.count(); n != 0 {
		t.Errorf("%d messages sent with a state dir that cannot record them", n)
	}
	if !hasEvent(logs, "mesh: alert not sent", `error="state cannot be written`, "agent=abiba") || !hasEvent(logs, "mesh: alert not sent", "agent=koby") {
		t.Errorf("the alerts are not in the log: %q", logs)
	}
}

// A state dir deleted while a run works is written anew from the run's
// state: the repair and the incident are not lost.
func TestAStateDirDeletedMidRunIsWrittenAgain(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	h.w.onRepair(func() {
		if err := os.RemoveAll(h.dir); err != nil {
			t.Error(err)
		}
	})
	h.run()
	l, err := ReadLedger(mustStore(t, h.dir), "mesh")
	if err != nil {
		t.Fatal(err)
	}
	if u := l.Units["abiba"]; u == nil || len(u.Repairs) != 1 {
		t.Errorf("after the state dir was deleted mid-run, the ledger lost the repair: %+v", l.Units)
	}
	h.clock.Advance(time.Minute)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	h.run()
	if n := h.w.restartCount("abiba"); n != 1 {
		t.Errorf("%d restarts; the debounce was lost with the directory", n)
	}
}

func mustStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
