package guard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

func TestSlowRetryCheck(t *testing.T) {
	slowed := func(failed int, repairs ...time.Duration) *Unit {
		return &Unit{Repairs: repairsAt(repairs...), Slow: &SlowState{Failed: failed}}
	}
	tests := []struct {
		name        string
		after       int
		factor      int
		unit        *Unit
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "off", unit: slowed(9, 0), now: time.Minute, wantAllowed: true, wantReason: "no slow retry"},
		{name: "no failed repair yet", after: 3, factor: 5, unit: &Unit{}, wantAllowed: true, wantReason: "0 of 3 failed repairs in a row"},
		{name: "two failed repairs run at full speed", after: 3, factor: 5, unit: slowed(2, 0), now: time.Minute, wantAllowed: true, wantReason: "2 of 3"},
		{name: "third failed repair slows: the next tick is pending", after: 3, factor: 5, unit: slowed(3, 0), now: time.Minute,
			wantReason: "next repair at 2026-11-29T19:04:30Z (every 5m, 5x the 1m interval)"},
		{name: "fourth tick is still pending", after: 3, factor: 5, unit: slowed(3, 0), now: 4 * time.Minute, wantReason: "slowed after 3 failed repairs"},
		{name: "the fifth tick is due", after: 3, factor: 5, unit: slowed(3, 0), now: 5 * time.Minute, wantAllowed: true, wantReason: "due: every 5m"},
		{name: "a fifth tick that starts a little early is due", after: 3, factor: 5, unit: slowed(3, 2*time.Second), now: 5 * time.Minute, wantAllowed: true},
		{name: "the last repair counts", after: 3, factor: 5, unit: slowed(4, 0, 5*time.Minute), now: 6 * time.Minute},
		{name: "never gives up: the hundredth failure is still retried", after: 3, factor: 5, unit: slowed(100, 0), now: 5 * time.Minute, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SlowRetry{After: tt.after, Factor: tt.factor, Every: time.Minute, Clock: clock.NewFake(at(tt.now))}.Check(tt.unit)
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if s.Guard != GuardSlowRetry || !s.Allowed && s.Status != StatusPending {
				t.Errorf("step = %s, want guard slow-retry, pending when denied", s)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}

// TestSlowRetryCountsVerificationsNotTicks drives the count through the
// outcomes a supervisor sees: failed starts, a service that starts into a
// pending state and dies, a pending tick between failures, a recovery.
func TestSlowRetryCountsVerificationsNotTicks(t *testing.T) {
	const cond = `ActiveState in ["inactive", "failed"]`
	type event struct {
		verify  string // "failed", "healthy", "pending": a repair's verification
		observe string // "critical" (the condition holds), "pending" (degraded, no condition), "healthy", "unknown"
	}
	tests := []struct {
		name       string
		events     []event
		wantFailed int
		wantSlowed bool
		slowedAt   int // index of the event that slowed the unit, -1 for none
	}{
		{name: "three failed starts slow down on the third", slowedAt: 2, wantFailed: 3, wantSlowed: true,
			events: []event{{verify: "failed"}, {verify: "failed"}, {verify: "failed"}}},
		{name: "a pending tick between failures does not reset the count", slowedAt: 4, wantFailed: 3, wantSlowed: true,
			events: []event{{verify: "failed"}, {observe: "pending"}, {verify: "failed"}, {observe: "unknown"}, {verify: "failed"}}},
		{name: "a start into a pending state that dies counts when the condition is seen again", slowedAt: 5, wantFailed: 3, wantSlowed: true,
			events: []event{{verify: "pending"}, {observe: "critical"}, {verify: "pending"}, {observe: "critical"}, {verify: "pending"}, {observe: "critical"}}},
		{name: "an undecided start stays undecided through pending ticks", slowedAt: -1, wantFailed: 2,
			events: []event{{verify: "failed"}, {verify: "failed"}, {verify: "pending"}, {observe: "pending"}, {observe: "unknown"}, {observe: "pending"}}},
		{name: "an undecided start that comes up healthy ends the streak", slowedAt: -1, wantFailed: 0,
			events: []event{{verify: "failed"}, {verify: "failed"}, {verify: "pending"}, {observe: "healthy"}}},
		{name: "a verified remediation ends the streak: counting starts again", slowedAt: -1, wantFailed: 2,
			events: []event{{verify: "failed"}, {verify: "failed"}, {verify: "healthy"}, {verify: "failed"}, {verify: "failed"}},
		},
		{name: "a slowed unit recovers when seen healthy", slowedAt: 2, wantFailed: 0,
			events: []event{{verify: "failed"}, {verify: "failed"}, {verify: "failed"}, {verify: "failed"}, {observe: "healthy"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			c := NewChain(contracts.Guards{SlowRetry: &contracts.SlowRetry{After: 3, Factor: 5}}, contracts.Schedule{Every: time.Minute}, clock)
			u := &Unit{}
			slowedAt := -1
			for i, e := range tt.events {
				clock.Advance(time.Minute)
				var slowed bool
				switch e.verify {
				case "failed":
					slowed = c.RecordSlowRetry(u, cond, contracts.ActionGuard{}, false, false)
				case "pending":
					slowed = c.RecordSlowRetry(u, cond, contracts.ActionGuard{}, true, false)
				case "healthy":
					slowed = c.RecordSlowRetry(u, cond, contracts.ActionGuard{}, true, true)
				}
				switch e.observe {
				case "critical":
					c.Observe(u, Observation{Severity: C, Conditions: []string{cond}})
					slowed = u.Slow != nil && u.Slow.Failed == 3 && slowedAt < 0
				case "pending":
					c.Observe(u, Observation{Severity: D})
				case "healthy":
					c.Observe(u, Observation{Severity: H})
				case "unknown":
					c.Observe(u, Observation{Severity: contracts.SeverityUnknown})
				}
				if slowed {
					if slowedAt >= 0 {
						t.Fatalf("event %d slowed the unit again; it slowed at event %d", i, slowedAt)
					}
					slowedAt = i
				}
			}
			failed := 0
			if u.Slow != nil {
				failed = u.Slow.Failed
			}
			if failed != tt.wantFailed {
				t.Errorf("failed repairs in a row = %d, want %d", failed, tt.wantFailed)
			}
			if got := c.SlowRetry(contracts.ActionGuard{}).Slowed(u); got != tt.wantSlowed {
				t.Errorf("slowed = %v, want %v", got, tt.wantSlowed)
			}
			if slowedAt != tt.slowedAt {
				t.Errorf("slowed at event %d, want %d", slowedAt, tt.slowedAt)
			}
		})
	}
}

func TestSlowRetryInTheChain(t *testing.T) {
	clock := clock.NewFake(t0)
	c := NewChain(contracts.Guards{Debounce: time.Second, SlowRetry: &contracts.SlowRetry{After: 3, Factor: 5}}, contracts.Schedule{Every: time.Minute}, clock)
	u := &Unit{}
	cand := Candidate{Condition: "stopped", Action: "systemctl start sib", Severity: C}
	// One start per tick: three starts that do not help, then one every
	// five ticks, for as long as it takes.
	var ranAt []int
	for tick := 0; tick < 20; tick++ {
		clock.Set(at(time.Duration(tick) * time.Minute))
		c.Observe(u, Observation{Severity: C, Conditions: []string{"stopped"}})
		v := c.Decide(u, cand)
		if !v.Run {
			if v.Guard != GuardSlowRetry || v.Status != StatusPending {
				t.Fatalf("tick %d: held back by %s (%s), want slow-retry pending", tick, v.Guard, v.Status)
			}
			continue
		}
		ranAt = append(ranAt, tick)
		c.RecordRepair(u, "stopped", 0)
		// (RecordVerify would feed the tiers guard, whose escalate_after
		// is a separate choice: this test is about slow-retry alone.)
		c.RecordSlowRetry(u, "stopped", contracts.ActionGuard{}, false, false)
	}
	if got, want := ranAt, []int{0, 1, 2, 7, 12, 17}; !equalInts(got, want) {
		t.Errorf("starts at ticks %v, want %v", got, want)
	}
	// The row may turn it off.
	if v := c.Decide(u, Candidate{Condition: "stopped", Action: "x", Severity: C, Guard: contracts.ActionGuard{SlowRetry: &contracts.SlowRetry{}}}); !v.Run {
		t.Errorf("slow_retry=off on the row: %s", v)
	}
	// An operator's reset runs it at full speed again.
	ClearUnit(u)
	if v := c.Decide(u, cand); !v.Run {
		t.Errorf("after ClearUnit: %s", v)
	}
}

func TestSlowRetryStateSurvivesARestart(t *testing.T) {
	u := &Unit{Slow: &SlowState{Failed: 4, Undecided: "stopped", LastFailed: at(time.Minute)}}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var back Unit
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Slow == nil || *back.Slow != *u.Slow {
		t.Fatalf("read back %+v from %s, want %+v", back.Slow, b, u.Slow)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("valid state: %v", err)
	}
	back.Slow.Failed = -1
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "slow_retry.consecutive_failed") {
		t.Errorf("negative count: Validate = %v, want an error naming slow_retry.consecutive_failed", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
