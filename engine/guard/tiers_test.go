package guard

import (
	"testing"

	"github.com/contractd/contractd/engine/clock"
)

func TestTiers(t *testing.T) {
	tests := []struct {
		name        string
		cond        *Condition
		after       int
		wantAllowed bool
		wantReason  string
	}{
		{name: "never repaired", after: 3, wantAllowed: true, wantReason: "no failed repairs"},
		{name: "two failed repairs of three", cond: &Condition{FailedRepairs: 2}, after: 3, wantAllowed: true, wantReason: "2 of 3 failed repairs before escalating"},
		{name: "three failed repairs", cond: &Condition{FailedRepairs: 3}, after: 3, wantReason: "escalate: 3 repairs did not clear stuck (limit 3)"},
		{name: "escalated stays escalated", cond: &Condition{Escalated: true}, after: 3},
		{name: "zero never escalates by count", cond: &Condition{FailedRepairs: 50}, after: 0, wantAllowed: true, wantReason: "50 failed repairs; no escalation limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{}
			if tt.cond != nil {
				u.Conditions = map[string]*Condition{"stuck": tt.cond}
			}
			s := Tiers{EscalateAfter: tt.after, Clock: clock.NewFake(t0)}.Check(u, "stuck")
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusEscalate {
				t.Errorf("status = %q, want escalate", s.Status)
			}
			if tt.wantReason != "" && s.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestPickTier(t *testing.T) {
	tests := []struct {
		name     string
		tiers    []int
		attempts int
		want     int
	}{
		{name: "first attempt takes tier 1", tiers: []int{1, 2, 3}, attempts: 0, want: 0},
		{name: "second attempt takes tier 2", tiers: []int{1, 2, 3}, attempts: 1, want: 1},
		{name: "past the last tier stays on it", tiers: []int{1, 2, 3}, attempts: 7, want: 2},
		{name: "order of rows does not matter", tiers: []int{3, 1, 2}, attempts: 1, want: 2},
		{name: "a gap in the numbering is only an order", tiers: []int{1, 3}, attempts: 1, want: 1},
		{name: "untiered single row", tiers: []int{0}, attempts: 4, want: 0},
		{name: "no rows", tiers: nil, attempts: 0, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PickTier(tt.tiers, tt.attempts); got != tt.want {
				t.Errorf("PickTier(%v, %d) = %d, want %d", tt.tiers, tt.attempts, got, tt.want)
			}
		})
	}
}
