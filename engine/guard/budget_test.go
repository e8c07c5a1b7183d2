package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

func TestBudget(t *testing.T) {
	tests := []struct {
		name        string
		count       int
		window      time.Duration
		repairs     []time.Time
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "1 per 10m unused", count: 1, window: 10 * time.Minute, now: 0, wantAllowed: true},
		{name: "1 per 10m used 9m ago", count: 1, window: 10 * time.Minute, repairs: repairsAt(0), now: 9 * time.Minute,
			wantReason: "next allowed at 2026-11-29T19:10:00Z"},
		{name: "1 per 10m used exactly 10m ago slides out", count: 1, window: 10 * time.Minute, repairs: repairsAt(0), now: 10 * time.Minute, wantAllowed: true},
		{name: "3 per 1h with 2 inside", count: 3, window: time.Hour, repairs: repairsAt(0, 10*time.Minute), now: 20 * time.Minute, wantAllowed: true},
		{name: "3 per 1h with 3 inside", count: 3, window: time.Hour, repairs: repairsAt(0, 10*time.Minute, 20*time.Minute), now: 30 * time.Minute,
			wantReason: "3 of 3 per 1h used"},
		{name: "sliding: oldest left the window", count: 3, window: time.Hour, repairs: repairsAt(0, 10*time.Minute, 20*time.Minute), now: 61 * time.Minute, wantAllowed: true},
		{name: "no budget", count: 0, repairs: repairsAt(0, time.Second), now: 2 * time.Second, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Budget{Count: tt.count, Window: tt.window, Clock: clock.NewFake(at(tt.now))}.Check(&Unit{Repairs: tt.repairs})
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusBlocked {
				t.Errorf("status = %q, want blocked", s.Status)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}
