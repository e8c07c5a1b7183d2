package guard

import (
	"strings"
	"testing"

	"github.com/contractd/contractd/engine/clock"
)

func TestBlastRadius(t *testing.T) {
	tests := []struct {
		name        string
		b           BlastRadius
		fleet       Fleet
		wantAllowed bool
		wantStatus  string
		wantReason  string
	}{
		{name: "zero allows everything", fleet: Fleet{Units: 8, Failing: 8, Repairs: 50}, wantAllowed: true},
		{name: "under the cap", b: BlastRadius{MaxRepairs: 2}, fleet: Fleet{Units: 8, Failing: 3, Repairs: 1}, wantAllowed: true},
		{name: "cap reached waits for the next run", b: BlastRadius{MaxRepairs: 2}, fleet: Fleet{Units: 8, Failing: 3, Repairs: 2},
			wantStatus: StatusPending, wantReason: "2 repairs already ran this run (max 2 per run)"},
		{name: "every unit failing at once opens the breaker", b: BlastRadius{Trip: 1}, fleet: Fleet{Units: 4, Failing: 4},
			wantStatus: StatusAlert, wantReason: "circuit open: 4 of 4 units failing at once"},
		{name: "three of four is below a full trip", b: BlastRadius{Trip: 1}, fleet: Fleet{Units: 4, Failing: 3}, wantAllowed: true},
		{name: "half trips at half", b: BlastRadius{Trip: 0.5}, fleet: Fleet{Units: 8, Failing: 4}, wantStatus: StatusAlert},
		{name: "a single unit never trips", b: BlastRadius{Trip: 1}, fleet: Fleet{Units: 1, Failing: 1}, wantAllowed: true},
		{name: "min units respected", b: BlastRadius{Trip: 1, MinUnits: 5}, fleet: Fleet{Units: 4, Failing: 4}, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.Clock = clock.NewFake(t0)
			s := tt.b.Check(tt.fleet)
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != tt.wantStatus {
				t.Errorf("status = %q, want %q", s.Status, tt.wantStatus)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}
