package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

func TestDebounce(t *testing.T) {
	tests := []struct {
		name        string
		window      time.Duration
		repairs     []time.Time
		pending     time.Time
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "no repair yet", window: 5 * time.Minute, now: 0, wantAllowed: true},
		{name: "inside window is pending since now", window: 5 * time.Minute, repairs: repairsAt(0), now: 2 * time.Minute,
			wantReason: "pending restart since 2026-11-29T19:02:00Z"},
		{name: "inside window keeps the first pending time", window: 5 * time.Minute, repairs: repairsAt(0), pending: at(time.Minute), now: 4 * time.Minute,
			wantReason: "pending restart since 2026-11-29T19:01:00Z"},
		{name: "window says when it may run", window: 5 * time.Minute, repairs: repairsAt(0), now: 4 * time.Minute,
			wantReason: "runs after 2026-11-29T19:05:00Z"},
		{name: "exactly at the end of the window", window: 5 * time.Minute, repairs: repairsAt(0), now: 5 * time.Minute, wantAllowed: true},
		{name: "after the window", window: 5 * time.Minute, repairs: repairsAt(0), now: 6 * time.Minute, wantAllowed: true},
		{name: "last repair counts, not the first", window: 5 * time.Minute, repairs: repairsAt(0, 10*time.Minute), now: 12 * time.Minute},
		{name: "zero window allows", window: 0, repairs: repairsAt(0), now: time.Second, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{Repairs: tt.repairs}
			if !tt.pending.IsZero() {
				u.Conditions = map[string]*Condition{"stuck": {PendingSince: tt.pending}}
			}
			s := Debounce{Window: tt.window, Clock: clock.NewFake(at(tt.now))}.Check(u, "stuck")
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusPending {
				t.Errorf("status = %q, want pending", s.Status)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}
