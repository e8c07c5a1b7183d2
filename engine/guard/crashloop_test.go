package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

func TestCrashLoop(t *testing.T) {
	every := func(n int, step time.Duration) []time.Time {
		var ts []time.Time
		for i := range n {
			ts = append(ts, at(time.Duration(i)*step))
		}
		return ts
	}
	tests := []struct {
		name        string
		repairs     []time.Time
		counter     *Counter
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "few repairs", repairs: every(2, time.Minute), now: 10 * time.Minute, wantAllowed: true},
		{name: "at the limit: the next would exceed it", repairs: every(3, time.Minute), now: 3 * time.Minute,
			wantReason: "3 restarts in the last 1h (repairs), max 3"},
		{name: "old repairs left the window", repairs: every(3, time.Minute), now: 62 * time.Minute, wantAllowed: true},
		{name: "external counter crashes count", counter: &Counter{Last: 7, Increments: []Sample{{At: at(10 * time.Minute), N: 2}, {At: at(20 * time.Minute), N: 1}}},
			now: 30 * time.Minute, wantReason: "3 restarts in the last 1h (restart counter)"},
		{name: "external increments outside the window", counter: &Counter{Last: 7, Increments: []Sample{{At: at(0), N: 5}}},
			now: 61 * time.Minute, wantAllowed: true},
		{name: "own repairs and counter are not added", repairs: every(2, time.Minute),
			counter: &Counter{Last: 2, Increments: []Sample{{At: at(0), N: 1}, {At: at(time.Minute), N: 1}}}, now: 5 * time.Minute, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{Repairs: tt.repairs, Restarts: tt.counter}
			s := CrashLoop{MaxRestarts: 3, Per: time.Hour, Clock: clock.NewFake(at(tt.now))}.Check(u)
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusAlert {
				t.Errorf("status = %q, want alert", s.Status)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestRestartCounterDeltas(t *testing.T) {
	clock := clock.NewFake(t0)
	c := NewChain(contracts.Guards{CrashLoop: contracts.CrashLoop{MaxRestarts: 5, Per: time.Hour}}, contracts.Schedule{}, clock)
	u := &Unit{}
	// pm2 restarts read each run: baseline 40, then +2, +0, a reset to 1, +3.
	for _, v := range []int64{40, 42, 42, 1, 4} {
		c.RecordRestartCounter(u, v)
		clock.Advance(10 * time.Minute)
	}
	crash := CrashLoop{MaxRestarts: 5, Per: time.Hour, Clock: clock}
	if n, src := crash.Count(u); n != 6 || src != "restart counter" {
		t.Fatalf("count = %d (%s), want 6 from the restart counter (2 + reset to 1 + 3)", n, src)
	}
	if s := crash.Check(u); s.Allowed {
		t.Errorf("6 restarts with max 5 allowed: %s", s)
	}
	clock.Advance(time.Hour)
	c.RecordRestartCounter(u, 4)
	if n, _ := crash.Count(u); n != 0 {
		t.Errorf("an hour later count = %d, want 0", n)
	}
}
