package guard

import (
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// BenchmarkDecide measures one candidate repair through the whole chain for
// a unit with a day of history; the engine's per-step budget is 1 ms.
func BenchmarkDecide(b *testing.B) {
	clock := clock.NewFake(t0)
	c := NewChain(zulipGuards, contracts.Schedule{}, clock)
	u := &Unit{}
	for range 100 {
		c.RecordRepair(u, "stuck", 0)
		c.RecordRestartCounter(u, int64(len(u.Repairs)))
		clock.Advance(14 * time.Minute)
	}
	c.Observe(u, Observation{Severity: contracts.SeverityCritical, Conditions: []string{"stuck"}})
	cand := Candidate{Condition: "stuck", Action: "pm2 restart abiba-zulip", Severity: contracts.SeverityCritical}
	b.ReportAllocs()
	for b.Loop() {
		c.Decide(u, cand)
	}
}
