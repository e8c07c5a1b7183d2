package guard

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// zulipGuards are the guards of the flagship contract plus a budget.
var zulipGuards = contracts.Guards{
	Debounce:         300 * time.Second,
	CrashLoop:        contracts.CrashLoop{MaxRestarts: 10, Per: time.Hour, Then: "alert"},
	UnreachableAfter: 3,
	EscalateAfter:    3,
	Grace:            30 * time.Second,
	Budget:           &contracts.Budget{Count: 2, Window: time.Hour},
}

func TestChainDecide(t *testing.T) {
	const action = "pm2 restart abiba-zulip"
	held := func(n int) map[string]*Condition {
		return map[string]*Condition{"stuck": {Held: n, Since: t0}}
	}
	tests := []struct {
		name       string
		unit       *Unit
		cand       Candidate
		now        time.Duration
		blast      *contracts.BlastRadius
		wantRun    bool
		wantStatus string
		wantGuard  string
		wantReason string
	}{
		{name: "all allow", unit: &Unit{Conditions: held(1)}, cand: Candidate{Severity: C},
			wantRun: true, wantStatus: StatusRun, wantReason: "all guards allow: run " + action},
		{name: "unknown never acts", unit: &Unit{Conditions: held(1)}, cand: Candidate{Severity: U},
			wantStatus: StatusBlocked, wantGuard: GuardSeverity, wantReason: "severity unknown never acts"},
		{name: "debounce pends", unit: &Unit{Conditions: held(1), Repairs: repairsAt(0)}, cand: Candidate{Severity: C}, now: time.Minute,
			wantStatus: StatusPending, wantGuard: GuardDebounce, wantReason: "pending restart since 2026-11-29T19:01:00Z"},
		{name: "debounce passed and condition still holds", unit: &Unit{Conditions: held(3), Repairs: repairsAt(0)}, cand: Candidate{Severity: C}, now: 6 * time.Minute,
			wantRun: true, wantStatus: StatusRun},
		{name: "budget blocks before debounce", unit: &Unit{Conditions: held(1), Repairs: repairsAt(0, 10*time.Minute)}, cand: Candidate{Severity: C}, now: 12 * time.Minute,
			wantStatus: StatusBlocked, wantGuard: GuardBudget, wantReason: "over budget: 2 of 2 per 1h used"},
		{name: "row budget overrides the contract's", unit: &Unit{Conditions: held(1), Repairs: repairsAt(0)}, now: 6 * time.Minute,
			cand:       Candidate{Severity: C, Guard: contracts.ActionGuard{Budget: &contracts.Budget{Count: 1, Window: 10 * time.Minute}}},
			wantStatus: StatusBlocked, wantGuard: GuardBudget},
		{name: "crash loop alerts", unit: &Unit{Conditions: held(1), Restarts: &Counter{Last: 50, Increments: []Sample{{At: at(0), N: 11}}}},
			cand: Candidate{Severity: C}, now: 30 * time.Minute,
			wantStatus: StatusAlert, wantGuard: GuardCrashLoop, wantReason: "11 restarts in the last 1h"},
		{name: "blast radius: all units failing alerts once instead", unit: &Unit{Conditions: held(1)},
			cand: Candidate{Severity: C, Fleet: Fleet{Units: 4, Failing: 4}}, blast: &contracts.BlastRadius{Trip: 1},
			wantStatus: StatusAlert, wantGuard: GuardBlastRadius, wantReason: "circuit open"},
		{name: "escalated condition escalates", unit: &Unit{Conditions: map[string]*Condition{"stuck": {Held: 9, FailedRepairs: 3}}},
			cand: Candidate{Severity: C}, wantStatus: StatusEscalate, wantGuard: GuardTiers, wantReason: "3 repairs did not clear stuck"},
		{name: "row escalate_after overrides", unit: &Unit{Conditions: map[string]*Condition{"stuck": {Held: 9, FailedRepairs: 1}}},
			cand: Candidate{Severity: C, Guard: contracts.ActionGuard{EscalateAfter: 1}}, wantStatus: StatusEscalate, wantGuard: GuardTiers},
		{name: "row after needs more runs", unit: &Unit{Conditions: held(1)}, cand: Candidate{Severity: C, Guard: contracts.ActionGuard{After: 2}},
			wantStatus: StatusPending, wantGuard: GuardHysteresis, wantReason: "condition held 1 of 2 consecutive runs needed"},
		{name: "condition never seen", unit: &Unit{}, cand: Candidate{Severity: C},
			wantStatus: StatusPending, wantGuard: GuardHysteresis},
		{name: "dry-run runs nothing", unit: &Unit{Conditions: held(1)}, cand: Candidate{Severity: C, DryRun: true},
			wantStatus: StatusDryRun, wantGuard: GuardDryRun, wantReason: "dry-run: would run " + action},
		{name: "dry-run shows the blocking guard", unit: &Unit{Conditions: held(1), Repairs: repairsAt(0)}, cand: Candidate{Severity: C, DryRun: true}, now: time.Minute,
			wantStatus: StatusPending, wantGuard: GuardDebounce},
		{name: "report-only lists the other guards", unit: &Unit{Conditions: held(1)}, cand: Candidate{Severity: C, ReportOnly: true},
			wantStatus: StatusReportOnly, wantGuard: GuardReportOnly,
			wantReason: "report-only: would run " + action + " (guards: maintenance=allow dependency=allow severity=allow flapping=allow tiers=allow crash-loop=allow blast-radius=allow grace=allow slow-retry=allow hysteresis=allow budget=allow debounce=allow"},
		{name: "report-only says which guard would hold it", unit: &Unit{Conditions: held(1), Repairs: repairsAt(0)}, cand: Candidate{Severity: C, ReportOnly: true}, now: time.Minute,
			wantStatus: StatusReportOnly, wantGuard: GuardReportOnly,
			wantReason: "report-only: would not run " + action + ", debounce says pending (guards: maintenance=allow dependency=allow severity=allow flapping=allow tiers=allow crash-loop=allow blast-radius=allow grace=allow slow-retry=allow hysteresis=allow budget=allow debounce=pending"},
		{name: "report-only outranks unknown", unit: &Unit{}, cand: Candidate{Severity: U, ReportOnly: true},
			wantStatus: StatusReportOnly, wantGuard: GuardReportOnly, wantReason: "severity says blocked"},
		{name: "a maintenance window blocks the repair", unit: &Unit{Conditions: held(1)}, now: 30 * time.Minute,
			cand:       Candidate{Severity: C, Maintenance: &Window{Since: at(0), Until: at(time.Hour), Reason: "kernel upgrade"}},
			wantStatus: StatusBlocked, wantGuard: GuardMaintenance, wantReason: "maintenance until 2026-11-29T20:00:00Z: kernel upgrade (30m left)"},
		{name: "an expired window no longer blocks", unit: &Unit{Conditions: held(1)}, now: 2 * time.Hour,
			cand:    Candidate{Severity: C, Maintenance: &Window{Since: at(0), Until: at(time.Hour)}},
			wantRun: true, wantStatus: StatusRun},
		{name: "a window that has not begun does not block", unit: &Unit{Conditions: held(1)}, now: 0,
			cand:    Candidate{Severity: C, Maintenance: &Window{Since: at(time.Hour), Until: at(2 * time.Hour)}},
			wantRun: true, wantStatus: StatusRun},
		{name: "report-only outranks maintenance", unit: &Unit{Conditions: held(1)}, now: 30 * time.Minute,
			cand:       Candidate{Severity: C, ReportOnly: true, Maintenance: &Window{Since: at(0), Until: at(time.Hour)}},
			wantStatus: StatusReportOnly, wantGuard: GuardReportOnly, wantReason: "maintenance says blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := zulipGuards
			g.BlastRadius = tt.blast
			c := NewChain(g, contracts.Schedule{}, clock.NewFake(at(tt.now)))
			tt.cand.Condition, tt.cand.Action = "stuck", action
			v := c.Decide(tt.unit, tt.cand)
			if v.Run != tt.wantRun || v.Status != tt.wantStatus || v.Guard != tt.wantGuard {
				t.Fatalf("verdict = run %v %q by %q, want run %v %q by %q\n%s", v.Run, v.Status, v.Guard, tt.wantRun, tt.wantStatus, tt.wantGuard, v)
			}
			if !strings.Contains(v.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", v.Reason, tt.wantReason)
			}
			if tt.wantStatus == StatusReportOnly {
				names := c.Guards()
				for _, n := range names[:len(names)-2] {
					if !strings.Contains(v.Reason, n+"=") {
						t.Errorf("report-only reason %q does not give %s's answer", v.Reason, n)
					}
				}
			}
			if len(v.Trace) != len(guards)+2 {
				t.Errorf("trace has %d steps, want all %d guards and the two closing steps:\n%s", len(v.Trace), len(guards), v)
			}
		})
	}
}

func TestChainOrderIsFixed(t *testing.T) {
	// A unit that every guard would stop: the trace lists them all in the
	// documented order and the first one decides.
	u := &Unit{
		Repairs:    repairsAt(0, time.Minute),
		GraceUntil: at(10 * time.Minute),
		Restarts:   &Counter{Increments: []Sample{{At: at(0), N: 20}}},
		Conditions: map[string]*Condition{"stuck": {Escalated: true}},
	}
	v := NewChain(zulipGuards, contracts.Schedule{}, clock.NewFake(at(2*time.Minute))).Decide(u, Candidate{Condition: "stuck", Action: "x", Severity: C})
	var order, statuses []string
	for _, s := range v.Trace {
		order = append(order, s.Guard)
		statuses = append(statuses, s.Status)
	}
	// The trace is the table's guards in its order, then the two closing
	// steps; the built-in guards keep their documented order among them,
	// each answering as its rule says.
	if got, want := strings.Join(order, " "), strings.Join(NewChain(zulipGuards, contracts.Schedule{}, nil).Guards(), " "); got != want {
		t.Errorf("order = %s, want the table's %s", got, want)
	}
	builtin := []struct{ guard, status string }{
		{"maintenance", "run"}, {"dependency", "run"}, {"severity", "run"}, {"flapping", "run"}, {"tiers", "escalate"},
		{"crash-loop", "alert"}, {"blast-radius", "run"}, {"grace", "pending"}, {"slow-retry", "run"}, {"hysteresis", "pending"},
		{"budget", "blocked"}, {"debounce", "pending"}, {"report-only", "run"}, {"dry-run", "run"},
	}
	at := -1
	for _, b := range builtin {
		i := slices.Index(order, b.guard)
		if i <= at {
			t.Errorf("%s is at %d of %v, want it after %d", b.guard, i, order, at)
			continue
		}
		at = i
		if statuses[i] != b.status {
			t.Errorf("%s says %s, want %s", b.guard, statuses[i], b.status)
		}
	}
	if v.Guard != GuardTiers {
		t.Errorf("decided by %s, want tiers", v.Guard)
	}
}

// TestDebounceScenario follows the flagship's strategy: a repair inside the
// debounce window is pending with a timestamp; once the window has passed
// and the condition still holds, it runs; if the condition cleared, nothing
// runs.
func TestDebounceScenario(t *testing.T) {
	clock := clock.NewFake(t0)
	c := NewChain(contracts.Guards{Debounce: 300 * time.Second}, contracts.Schedule{}, clock)
	u := &Unit{}
	cand := Candidate{Condition: "response_pipeline=blocked", Action: "pm2 restart abiba-zulip"}
	run := func(conds ...string) Verdict {
		s := c.Observe(u, Observation{Severity: C, Conditions: conds})
		cand.Severity = s.Severity
		v := c.Decide(u, cand)
		switch v.Status {
		case StatusRun:
			c.RecordRepair(u, cand.Condition, c.Grace(cand.Guard))
			c.RecordVerify(u, cand.Condition, false)
		case StatusPending:
			c.RecordPending(u, cand.Condition)
		}
		return v
	}

	if v := run(cand.Condition); !v.Run {
		t.Fatalf("first repair: %s", v)
	}
	clock.Advance(2 * time.Minute)
	if v := run(cand.Condition); v.Status != StatusPending || !strings.Contains(v.Reason, "pending restart since 2026-11-29T19:02:00Z") {
		t.Fatalf("inside window: %s", v)
	}
	clock.Advance(2 * time.Minute)
	if v := run(cand.Condition); !strings.Contains(v.Reason, "pending restart since 2026-11-29T19:02:00Z") {
		t.Fatalf("still inside window should keep the first pending time: %s", v)
	}
	clock.Advance(2 * time.Minute)
	if v := run(cand.Condition); !v.Run {
		t.Fatalf("after the window with the condition still there: %s", v)
	}
	if got := u.Attempts(cand.Condition); got != 2 {
		t.Errorf("attempts = %d, want 2", got)
	}
	if got := len(u.Repairs); got != 2 {
		t.Errorf("repairs recorded = %d, want 2", got)
	}
}

// TestEscalationScenario: after EscalateAfter repairs that did not clear the
// condition, repairs stop and the verdict is escalate until the condition
// clears, or an operator resets the unit.
func TestEscalationScenario(t *testing.T) {
	clock := clock.NewFake(t0)
	c := NewChain(contracts.Guards{Debounce: time.Minute, EscalateAfter: 2}, contracts.Schedule{}, clock)
	u := &Unit{}
	cand := Candidate{Condition: "stuck", Action: "systemctl --user restart lab-a2a-sol"}
	var statuses []string
	var pages int
	for range 5 {
		cand.Severity = c.Observe(u, Observation{Severity: C, Conditions: []string{"stuck"}}).Severity
		v := c.Decide(u, cand)
		statuses = append(statuses, v.Status)
		switch v.Status {
		case StatusRun:
			c.RecordRepair(u, "stuck", 0)
			c.RecordVerify(u, "stuck", false)
		case StatusEscalate:
			if c.RecordEscalated(u, "stuck") {
				pages++
			}
		}
		clock.Advance(2 * time.Minute)
	}
	if got := strings.Join(statuses, " "); got != "run run escalate escalate escalate" {
		t.Fatalf("statuses = %s", got)
	}
	if pages != 1 {
		t.Errorf("paged %d times, want once", pages)
	}

	ClearUnit(u)
	cand.Severity = c.Observe(u, Observation{Severity: C, Conditions: []string{"stuck"}}).Severity
	if v := c.Decide(u, cand); !v.Run {
		t.Fatalf("after operator reset: %s", v)
	}

	// A remediated repair resets the failed count; the condition clearing
	// drops it entirely.
	c.RecordRepair(u, "stuck", 0)
	c.RecordVerify(u, "stuck", true)
	if u.Conditions["stuck"].FailedRepairs != 0 || u.Conditions["stuck"].LastVerify != Remediated {
		t.Errorf("remediated not recorded: %+v", u.Conditions["stuck"])
	}
	s := c.Observe(u, Observation{Severity: H})
	if len(s.Cleared) != 1 || u.Attempts("stuck") != 0 {
		t.Errorf("condition did not clear: %+v attempts=%d", s, u.Attempts("stuck"))
	}
}

func TestRecordRepairPrunesOldTimes(t *testing.T) {
	clock := clock.NewFake(t0)
	c := NewChain(contracts.Guards{}, contracts.Schedule{}, clock)
	u := &Unit{}
	for range 30 {
		c.RecordRepair(u, "stuck", 0)
		clock.Advance(2 * time.Hour)
	}
	if n := len(u.Repairs); n > 13 {
		t.Errorf("kept %d repair times over 60h, want only the last day's", n)
	}
}

func TestTraceLines(t *testing.T) {
	u := &Unit{Conditions: map[string]*Condition{"stuck": {Held: 1}}, Repairs: repairsAt(0)}
	v := NewChain(contracts.Guards{Debounce: 5 * time.Minute}, contracts.Schedule{}, clock.NewFake(at(time.Minute))).Decide(u, Candidate{Condition: "stuck", Action: "x", Severity: C})
	lines := v.TraceLines()
	if len(lines) != len(v.Trace) || lines[0] != "maintenance: allow (no maintenance window)" || lines[2] != "severity: allow (critical)" ||
		!strings.HasPrefix(lines[11], "debounce: pending (pending restart since 2026-11-29T19:01:00Z") {
		t.Errorf("trace lines:\n%s", strings.Join(lines, "\n"))
	}
}
