package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
)

func render(msgs []notify.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "  %s [%s] %s/%s: %s\n", m.Kind, m.Severity, m.Agent, m.Condition, m.Text)
	}
	if b.Len() == 0 {
		return "  (none)"
	}
	return b.String()
}

// A unit that fails, is repaired and verified healthy in one run gets one
// message that says so, and no incident: no open now, no resolve next run.
// The report and the snapshot carry the state after the repair.
func TestSelfHealIsOneMessageAndNoIncident(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
	rep := h.run()
	msgs := h.rec.since(0)
	if len(msgs) != 1 || msgs[0].Kind != notify.KindRepair || msgs[0].Severity != "healthy" ||
		msgs[0].Text != "repaired abiba: response_pipeline=blocked → `pm2 restart abiba-zulip`, verified healthy after 5s" {
		t.Fatalf("self-heal messages:\n%s\nwant exactly one repair message naming the unit, what was seen, the command and the verification", render(msgs))
	}
	if a := rep.Agents["abiba"]; a.Severity != contracts.SeverityHealthy || a.BeforeRepair != contracts.SeverityCritical {
		t.Errorf("abiba in the report: %s (before repair %s), want healthy after a verified repair of a critical fault", a.Severity, a.BeforeRepair)
	}
	if rep.OverallSeverity != contracts.SeverityHealthy {
		t.Errorf("overall %s after the verified repair, want healthy", rep.OverallSeverity)
	}
	st, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	abiba := st.Snapshot["agents"].(map[string]any)["abiba"].(map[string]any)
	if abiba["severity"] != "healthy" || abiba["response_pipeline"] != "healthy" || st.Snapshot["overall_severity"] != "healthy" {
		t.Errorf("snapshot %v, want the verified state", st.Snapshot)
	}

	h.clock.Advance(15 * time.Minute)
	h.run()
	if later := h.rec.since(1); len(later) != 0 {
		t.Errorf("the next run, all healthy, sent:\n%s\nwant nothing (no incident was opened)", render(later))
	}
}

// A repair that does not help opens the unit's incident, with the repair
// in its text, and nothing else.
func TestFailedVerificationOpensTheIncident(t *testing.T) {
	h := newHarness(t)
	h.w.set(func(w *world) { w.pi["response_pipeline"], w.sticky = "blocked", true })
	rep := h.run()
	msgs := h.rec.since(0)
	if len(msgs) != 1 || msgs[0].Kind != notify.KindOpen || msgs[0].Severity != "critical" ||
		!strings.Contains(msgs[0].Text, "abiba is critical") || !strings.Contains(msgs[0].Text, "repair of abiba did not help") {
		t.Fatalf("messages:\n%s\nwant one open incident that says the repair did not help", render(msgs))
	}
	if a := rep.Agents["abiba"]; a.Severity != contracts.SeverityCritical {
		t.Errorf("abiba is %s after a repair that did not help, want critical", a.Severity)
	}
}

// The crash-loop guard taking over from the relay of a critical unit does
// not resolve the relay: a resolve goes out only when the unit is healthy.
func TestCrashLoopTakingOverDoesNotResolveTheRelay(t *testing.T) {
	h := newHarness(t)
	h.c = parse(t, strings.Replace(meshContract, "  grace: 5s\n", "  grace: 5s\n  crash_loop: {max_restarts: 1, per: 1h}\n", 1))
	h.w.set(func(w *world) { w.pi["response_pipeline"], w.sticky = "blocked", true })
	h.run() // restart, does not help: the relay opens
	h.clock.Advance(6 * time.Minute)
	n := h.rec.count()
	h.run() // the crash-loop guard refuses the next restart and alerts
	second := h.rec.since(n)
	if len(second) != 1 || second[0].Kind != notify.KindOpen || second[0].Condition != "crash-loop" || second[0].Severity != "critical" {
		t.Errorf("second run:\n%s\nwant exactly the crash-loop alert, and no resolve of the relay while abiba is critical", render(second))
	}
	if h.w.restartCount("abiba") != 1 {
		t.Errorf("%d restarts, want 1 (the crash-loop guard holds the second)", h.w.restartCount("abiba"))
	}
	h.w.set(func(w *world) { w.sticky = false; w.pi["response_pipeline"] = "healthy" })
	h.clock.Advance(6 * time.Minute)
	n = h.rec.count()
	h.run()
	third := h.rec.since(n)
	if len(third) != 2 || third[0].Kind != notify.KindResolved || third[1].Kind != notify.KindResolved {
		t.Errorf("abiba healthy again:\n%s\nwant both incidents resolved", render(third))
	}
	for _, m := range h.rec.since(0) {
		if m.Kind != notify.KindResolved && m.Severity == "healthy" {
			t.Errorf("a %s message labelled healthy: %s", m.Kind, m.Text)
		}
	}
}

// An alert row speaking for a critical unit holds its relay back; the relay
// is not resolved while the unit is still critical.
func TestAlertRowTakingOverDoesNotResolveTheRelay(t *testing.T) {
	h := newHarness(t)
	src := strings.Replace(meshContract, "| `stuck` | `false` | `true` |", "| `stuck` | `false` | `true` |\n| `loop` | `it != true` | `true` |", 1)
	h.c = parse(t, strings.Replace(src, "| `stuck: true` | `pm2 restart koby` |",
		"| `stuck: true` | `pm2 restart koby` |\n| `loop: true` | Alert — koby is looping |", 1))
	h.w.set(func(w *world) { w.koby["stuck"] = true })
	h.run()
	if first := h.rec.since(0); len(first) != 1 || !strings.Contains(first[0].Text, "koby is critical") {
		t.Fatalf("first run:\n%s\nwant the relay of koby", render(first))
	}
	h.w.set(func(w *world) { w.koby["loop"] = true })
	h.clock.Advance(15 * time.Minute)
	h.run()
	second := h.rec.since(1)
	if len(second) != 1 || second[0].Kind != notify.KindOpen || !strings.Contains(second[0].Condition, "loop") {
		t.Errorf("second run, the alert row holds:\n%s\nwant its alert only, the relay neither resolved nor repeated", render(second))
	}
	h.w.set(func(w *world) { w.koby = map[string]any{"stuck": false} })
	h.clock.Advance(15 * time.Minute)
	h.run()
	third := h.rec.since(2)
	if len(third) != 2 || third[0].Kind != notify.KindResolved || third[1].Kind != notify.KindResolved || third[0].Severity != "healthy" {
		t.Errorf("koby healthy:\n%s\nwant both incidents resolved, labelled healthy", render(third))
	}
}
