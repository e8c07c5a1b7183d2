package guard

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// TestReportOnlyNeverRuns tries every verdict path with ReportOnly set, with
// and without dry-run: none may run.
func TestReportOnlyNeverRuns(t *testing.T) {
	units := map[string]*Unit{
		"fresh":       {Conditions: map[string]*Condition{"c": {Held: 5}}},
		"debounced":   {Conditions: map[string]*Condition{"c": {Held: 5}}, Repairs: repairsAt(0)},
		"over budget": {Conditions: map[string]*Condition{"c": {Held: 5}}, Repairs: repairsAt(-50*time.Minute, -40*time.Minute)},
		"escalated":   {Conditions: map[string]*Condition{"c": {Held: 5, Escalated: true}}},
		"in grace":    {Conditions: map[string]*Condition{"c": {Held: 5}}, GraceUntil: at(time.Minute)},
		"crash loop":  {Conditions: map[string]*Condition{"c": {Held: 5}}, Restarts: &Counter{Increments: []Sample{{At: at(0), N: 99}}}},
		"not held":    {},
	}
	for name, u := range units {
		for _, sev := range []contracts.Severity{U, H, D, C, R} {
			for _, dry := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dry=%v", name, sev, dry), func(t *testing.T) {
					v := NewChain(zulipGuards, contracts.Schedule{}, clock.NewFake(at(time.Second))).Decide(u, Candidate{Condition: "c", Action: "pm2 restart koby", Severity: sev, ReportOnly: true, DryRun: dry})
					if v.Run || v.Status != StatusReportOnly {
						t.Errorf("report-only agent got %s", v)
					}
				})
			}
		}
	}
}

// TestGuardsHoldUnderRandomRuns drives one unit through many random runs
// (severities, conditions, verification outcomes, clock steps) with an
// engine that obeys the verdicts, and checks the promises the guards make:
// no repair on unknown, never two repairs inside the debounce window, never
// more than the budget in any window, never past the crash-loop limit, and
// no repairs for a condition while it is escalated.
func TestGuardsHoldUnderRandomRuns(t *testing.T) {
	g := contracts.Guards{
		Debounce:      5 * time.Minute,
		Budget:        &contracts.Budget{Count: 3, Window: time.Hour},
		CrashLoop:     contracts.CrashLoop{MaxRestarts: 4, Per: 2 * time.Hour},
		After:         2,
		RecoverAfter:  2,
		EscalateAfter: 2,
	}
	sevs := []contracts.Severity{U, H, D, C, C, C, R}
	seen := map[string]int{}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clock := clock.NewFake(t0)
		c := NewChain(g, contracts.Schedule{}, clock)
		u := &Unit{}
		var repairs []time.Time
		for run := range 300 {
			clock.Advance(time.Duration(1+rng.IntN(10)) * time.Minute)
			var conds []string
			if rng.IntN(3) > 0 {
				conds = []string{"stuck"}
			}
			s := c.Observe(u, Observation{Severity: sevs[rng.IntN(len(sevs))], Conditions: conds})
			if len(conds) == 0 {
				continue
			}
			escalated := u.condition("stuck") != nil && u.condition("stuck").Escalated
			v := c.Decide(u, Candidate{Condition: "stuck", Action: "restart", Severity: s.Severity})
			seen[v.Guard]++
			switch v.Status {
			case StatusRun:
				now := clock.Now()
				if s.Severity == U {
					t.Fatalf("seed %d run %d: repaired on unknown", seed, run)
				}
				if escalated {
					t.Fatalf("seed %d run %d: repaired an escalated condition", seed, run)
				}
				if n := len(repairs); n > 0 && now.Sub(repairs[n-1]) < g.Debounce {
					t.Fatalf("seed %d run %d: repairs %s apart inside the debounce", seed, run, now.Sub(repairs[n-1]))
				}
				repairs = append(repairs, now)
				if n := countSince(repairs, now.Add(-g.Budget.Window)); n > g.Budget.Count {
					t.Fatalf("seed %d run %d: %d repairs in the budget window", seed, run, n)
				}
				if n := countSince(repairs, now.Add(-g.CrashLoop.Per)); n > g.CrashLoop.MaxRestarts {
					t.Fatalf("seed %d run %d: %d repairs in the crash-loop window", seed, run, n)
				}
				c.RecordRepair(u, "stuck", 8*time.Minute)
				if rng.IntN(2) == 0 {
					c.RecordVerify(u, "stuck", rng.IntN(3) == 0)
				}
			case StatusPending:
				c.RecordPending(u, "stuck")
			case StatusEscalate:
				c.RecordEscalated(u, "stuck")
			}
		}
		if len(repairs) == 0 {
			t.Errorf("seed %d: no repair in 300 runs; the test exercises nothing", seed)
		}
	}
	for _, g := range []string{"", GuardSeverity, GuardTiers, GuardCrashLoop, GuardGrace, GuardHysteresis, GuardBudget, GuardDebounce} {
		if seen[g] == 0 {
			t.Errorf("no verdict was decided by %q in any run: %v", g, seen)
		}
	}
}

func countSince(ts []time.Time, from time.Time) int {
	n := 0
	for _, t := range ts {
		if t.After(from) {
			n++
		}
	}
	return n
}
