package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

func TestFlapping(t *testing.T) {
	H, C := contracts.SeverityHealthy, contracts.SeverityCritical
	toggle := func(n int) []contracts.Severity {
		out := make([]contracts.Severity, n)
		for i := range out {
			out[i] = H
			if i%2 == 1 {
				out[i] = C
			}
		}
		return out
	}
	steady := func(s contracts.Severity, n int) []contracts.Severity {
		out := make([]contracts.Severity, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := []struct {
		name        string
		runs        []contracts.Severity
		wantStarted []int // the runs (0-based) it started flapping at
		wantStopped []int
		wantEnd     bool
	}{
		{name: "steady never flaps", runs: steady(H, 40)},
		{name: "one outage is two changes", runs: append(append(steady(H, 5), steady(C, 5)...), steady(H, 10)...)},
		// 5% a change: above 30% at the 7th change.
		{name: "toggled every run starts at the seventh change", runs: toggle(20), wantStarted: []int{7}, wantEnd: true},
		// The first steady run is the 20th change; steady runs then push
		// the changes out one by one, and below 25% (4 of 20) it stops.
		{name: "toggled 20 runs then steady starts once and stops once", runs: append(toggle(20), steady(H, 30)...),
			wantStarted: []int{7}, wantStopped: []int{36}},
		{name: "skipped and suppressed runs record nothing",
			runs: []contracts.Severity{H, C, contracts.SeveritySkipped, H, contracts.SeveritySuppressed, C, H, C, H, C}, wantStarted: []int{9}, wantEnd: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			f := Flapping{Low: contracts.DefaultFlapLow, High: contracts.DefaultFlapHigh, Runs: contracts.DefaultFlapRuns, Clock: clk}
			u := &Unit{}
			var started, stopped []int
			for i, s := range tt.runs {
				ch := f.Observe(u, s)
				if ch.Started {
					started = append(started, i)
				}
				if ch.Stopped {
					stopped = append(stopped, i)
				}
				clk.Advance(time.Minute)
			}
			if !equalInts(started, tt.wantStarted) || !equalInts(stopped, tt.wantStopped) {
				t.Fatalf("started at %v, stopped at %v; want %v and %v", started, stopped, tt.wantStarted, tt.wantStopped)
			}
			if got := u.Flap != nil && u.Flap.Flapping; got != tt.wantEnd {
				t.Fatalf("flapping at the end: %v, want %v", got, tt.wantEnd)
			}
		})
	}
}

func TestFlappingHoldsRepairsUnlessTheContractSaysOtherwise(t *testing.T) {
	u := &Unit{Flap: &FlapState{Flapping: true, Since: t0, Percent: 40}, Conditions: map[string]*Condition{"down": {Held: 1}}}
	for _, tc := range []struct {
		repair bool
		want   string
	}{{false, StatusBlocked}, {true, StatusRun}} {
		g := contracts.Guards{After: 1, Flapping: &contracts.Flapping{Low: 25, High: 30, Runs: 20, Repair: tc.repair}}
		v := NewChain(g, contracts.Schedule{}, clock.NewFake(t0)).Decide(u, Candidate{Condition: "down", Action: "restart", Severity: contracts.SeverityCritical})
		if v.Status != tc.want {
			t.Fatalf("repair: %v: status %s (%s), want %s", tc.repair, v.Status, v.Reason, tc.want)
		}
		if !tc.repair && (v.Guard != GuardFlapping || !strings.Contains(v.Reason, "40% of its last 20 runs")) {
			t.Fatalf("verdict %+v", v)
		}
	}
}
