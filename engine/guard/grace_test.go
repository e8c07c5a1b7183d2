package guard

import (
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

func TestGrace(t *testing.T) {
	tests := []struct {
		name        string
		until       time.Time
		now         time.Duration
		wantAllowed bool
	}{
		{name: "no grace", now: 0, wantAllowed: true},
		{name: "inside grace", until: at(30 * time.Second), now: 10 * time.Second},
		{name: "grace over", until: at(30 * time.Second), now: 30 * time.Second, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Grace{Clock: clock.NewFake(at(tt.now))}.Check(&Unit{GraceUntil: tt.until})
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
		})
	}
}
