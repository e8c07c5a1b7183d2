package guard_test

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/guard"
)

// A wedged agent on the flagship contract: the first run repairs it, the
// next run inside the 300 s debounce holds the repair as pending, and a run
// after the window repairs again because the condition still holds.
func Example() {
	clock := clock.NewFake(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	chain := guard.NewChain(contracts.Guards{Debounce: 300 * time.Second}, contracts.Schedule{}, clock)
	unit := &guard.Unit{} // from the ledger: ledger.Units["abiba"]
	incidents := chain.Incidents(map[string]*guard.Incident{})

	for range 3 {
		settled := chain.Observe(unit, guard.Observation{
			Severity:   contracts.SeverityCritical,
			Conditions: []string{"response_pipeline=blocked"},
		})
		v := chain.Decide(unit, guard.Candidate{
			Condition: "response_pipeline=blocked",
			Action:    "pm2 restart abiba-zulip",
			Severity:  settled.Severity,
		})
		fmt.Println(v.Status, "-", v.Reason)
		switch v.Status {
		case guard.StatusRun:
			chain.RecordRepair(unit, "response_pipeline=blocked", chain.Grace(contracts.ActionGuard{}))
			chain.RecordVerify(unit, "response_pipeline=blocked", false)
		case guard.StatusPending:
			chain.RecordPending(unit, "response_pipeline=blocked")
		}
		a := incidents.Observe(guard.IncidentKey("zulip-health", "abiba", "response_pipeline=blocked"), settled.Failing, "", guard.Incident{Agent: "abiba", Condition: "response_pipeline=blocked"})
		fmt.Printf("alert: %q\n", a.Send)
		clock.Advance(3 * time.Minute)
	}
	// Output:
	// run - all guards allow: run pm2 restart abiba-zulip
	// alert: "open"
	// pending - pending restart since 2026-11-29T19:03:00Z (debounce 5m after the repair at 2026-11-29T19:00:00Z; runs after 2026-11-29T19:05:00Z if the condition still holds)
	// alert: ""
	// run - all guards allow: run pm2 restart abiba-zulip
	// alert: ""
}
