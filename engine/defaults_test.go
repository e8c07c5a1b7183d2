package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
)

// The guards a contract does not set are what the docs say: no crash-loop
// limit, no escalation by count, and `debounce: 0s` is no debounce. A
// supervisor that must keep trying is not stopped by a hidden limit.
func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	h := newHarness(t)
	h.c = parse(t, strings.Replace(meshContract, "  debounce: 300s\n", "  debounce: 0s\n", 1))
	plan := contracts.Explain(h.c)
	if plan.Guards.CrashLoop != "off" || plan.Guards.EscalateAfter != 0 || plan.Guards.Debounce != "0s" || plan.Guards.Budget != "none" {
		t.Errorf("explain guards %+v; want crash_loop off, no escalation, debounce 0s, no budget", plan.Guards)
	}
	// Twelve failed repairs an hour apart... a minute apart, with nothing
	// to stop them but the guards the contract declared (none).
	h.w.set(func(w *world) { w.pi["response_pipeline"], w.sticky = "blocked", true })
	for i := 0; i < 12; i++ {
		rep := h.run()
		for _, a := range rep.Actions {
			if a.Agent == "abiba" && a.Status != ActionRan {
				t.Fatalf("run %d: %s by %s (%s); want the repair to run: no crash-loop or escalation default", i, a.Status, a.Guard, a.Reason)
			}
		}
		h.clock.Advance(time.Minute)
	}
	if n := h.w.restartCount("abiba"); n != 12 {
		t.Errorf("%d restarts in 12 runs, want 12", n)
	}
}
