package guard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

const (
	H = contracts.SeverityHealthy
	D = contracts.SeverityDegraded
	C = contracts.SeverityCritical
	R = contracts.SeverityUnreachable
	U = contracts.SeverityUnknown
)

// TestHysteresis feeds runs of raw severities and checks the settled
// severity after each one.
func TestHysteresis(t *testing.T) {
	tests := []struct {
		name  string
		h     Hysteresis
		runs  []contracts.Severity
		want  []contracts.Severity
		fails []bool
	}{
		{name: "defaults flip at once", h: Hysteresis{},
			runs: []contracts.Severity{H, C, H}, want: []contracts.Severity{H, C, H}, fails: []bool{false, true, false}},
		{name: "after 2 needs two failing runs", h: Hysteresis{After: 2},
			runs: []contracts.Severity{C, H, C, C}, want: []contracts.Severity{H, H, H, C}, fails: []bool{false, false, false, true}},
		{name: "degraded then critical counts together", h: Hysteresis{After: 2},
			runs: []contracts.Severity{D, C}, want: []contracts.Severity{H, C}, fails: []bool{false, true}},
		{name: "recover_after 3: one lucky pass does not reset", h: Hysteresis{RecoverAfter: 3},
			runs: []contracts.Severity{C, H, C, H, H, H}, want: []contracts.Severity{C, C, C, C, C, H}, fails: []bool{true, true, true, true, true, false}},
		{name: "unreachable_after 3", h: Hysteresis{UnreachableAfter: 3},
			runs: []contracts.Severity{R, R, R, R}, want: []contracts.Severity{U, U, R, R}, fails: []bool{false, false, true, true}},
		{name: "a healthy run breaks the unreachable streak", h: Hysteresis{UnreachableAfter: 2},
			runs: []contracts.Severity{R, H, R, R}, want: []contracts.Severity{U, H, U, R}, fails: []bool{false, false, false, true}},
		{name: "unknown neither advances failing", h: Hysteresis{After: 2},
			runs: []contracts.Severity{C, U, C}, want: []contracts.Severity{H, U, C}, fails: []bool{false, false, true}},
		{name: "unknown neither advances recovery", h: Hysteresis{RecoverAfter: 2},
			runs: []contracts.Severity{C, H, U, H}, want: []contracts.Severity{C, C, U, H}, fails: []bool{true, true, true, false}},
		{name: "a failing unit stays failing while severities change", h: Hysteresis{After: 3},
			runs: []contracts.Severity{C, C, C, D, R}, want: []contracts.Severity{H, H, C, D, R}, fails: []bool{false, false, true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.h.Clock = clock.NewFake(t0)
			u := &Unit{}
			var got []contracts.Severity
			var fails []bool
			for _, sev := range tt.runs {
				s := tt.h.Observe(u, Observation{Severity: sev})
				got = append(got, s.Severity)
				fails = append(fails, s.Failing)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("settled = %v, want %v", got, tt.want)
			}
			if !slices.Equal(fails, tt.fails) {
				t.Errorf("failing = %v, want %v", fails, tt.fails)
			}
		})
	}
}

func TestHysteresisReasons(t *testing.T) {
	h := Hysteresis{After: 2, UnreachableAfter: 3, RecoverAfter: 2, Clock: clock.NewFake(t0)}
	u := &Unit{}
	for _, tt := range []struct {
		sev  contracts.Severity
		want string
	}{
		{C, "critical 1 of 2 consecutive runs: not yet failing"},
		{C, ""},
		{H, "healthy 1 of 2 consecutive runs needed to recover: still critical"},
		{R, "unreachable 1 of 3 consecutive runs: not yet counted"},
		{U, "unknown: counts unchanged"},
	} {
		if s := h.Observe(u, Observation{Severity: tt.sev}); s.Reason != tt.want {
			t.Errorf("%s: reason %q, want %q", tt.sev, s.Reason, tt.want)
		}
	}
	held := &Unit{Conditions: map[string]*Condition{"stuck": {Held: 5}}}
	for after, want := range map[int]string{1: "held 5 consecutive runs, 1 needed", 6: "condition held 5 of 6 consecutive runs needed"} {
		if s := (Hysteresis{After: after}).Check(held, "stuck"); s.Reason != want {
			t.Errorf("after %d: reason %q, want %q", after, s.Reason, want)
		}
	}
}

func TestGraceIsNotCountedAsFailing(t *testing.T) {
	clock := clock.NewFake(t0)
	c := NewChain(contracts.Guards{After: 2}, contracts.Schedule{}, clock)
	u := &Unit{}
	c.Observe(u, Observation{Severity: C, Conditions: []string{"stuck"}})
	c.Observe(u, Observation{Severity: C, Conditions: []string{"stuck"}})
	c.RecordRepair(u, "stuck", 30*time.Second)

	clock.Advance(10 * time.Second)
	s := c.Observe(u, Observation{Severity: C, Conditions: []string{"stuck"}})
	if !s.InGrace || !strings.Contains(s.Reason, "inside post-repair grace until 2026-11-29T19:00:30Z") {
		t.Fatalf("inside grace: %+v", s)
	}
	if u.Failing != 2 || u.Conditions["stuck"].Held != 2 {
		t.Errorf("a run inside grace was counted: failing=%d held=%d", u.Failing, u.Conditions["stuck"].Held)
	}
	v := c.Decide(u, Candidate{Condition: "stuck", Action: "pm2 restart abiba-zulip", Severity: C})
	if v.Run || v.Guard != GuardGrace || v.Status != StatusPending {
		t.Errorf("repair inside grace: %s", v)
	}

	c.RecordVerify(u, "stuck", false)
	if got := u.Conditions["stuck"].LastVerify; got != RemediationFailed {
		t.Errorf("verify recorded %q, want %q", got, RemediationFailed)
	}
	s = c.Observe(u, Observation{Severity: C, Conditions: []string{"stuck"}})
	if s.InGrace || u.Failing != 3 {
		t.Errorf("after verification the grace should be over and the run counted: %+v failing=%d", s, u.Failing)
	}
}

func TestConditionsClear(t *testing.T) {
	h := Hysteresis{RecoverAfter: 2, Clock: clock.NewFake(t0)}
	u := &Unit{}
	h.Observe(u, Observation{Severity: C, Conditions: []string{"stuck", "retry_count>=3"}})
	u.Conditions["stuck"].Escalated = true
	u.Conditions["stuck"].PendingSince = t0

	s := h.Observe(u, Observation{Severity: C, Conditions: []string{"retry_count>=3"}})
	if len(s.Cleared) != 0 {
		t.Fatalf("cleared after one run without it: %v", s.Cleared)
	}
	if !u.Conditions["stuck"].PendingSince.IsZero() {
		t.Errorf("a pending repair survived a run without its condition")
	}
	if s := h.Observe(u, Observation{Severity: U}); len(s.Cleared) != 0 {
		t.Fatalf("unknown cleared %v", s.Cleared)
	}
	s = h.Observe(u, Observation{Severity: H})
	if fmt.Sprint(s.Cleared) != "[stuck]" {
		t.Fatalf("cleared = %v, want [stuck]", s.Cleared)
	}
	if _, ok := u.Conditions["stuck"]; ok {
		t.Errorf("cleared condition kept its escalation")
	}
	if s = h.Observe(u, Observation{Severity: H}); fmt.Sprint(s.Cleared) != "[retry_count>=3]" {
		t.Errorf("cleared = %v, want [retry_count>=3]", s.Cleared)
	}
}

// TestAfterStartsAfreshAfterAVerifiedRepair: with `after: 2`, a repair
// verified (or undecided: its condition seen gone) starts the count again:
// the next failing run is pending, the one after it repairs.
func TestAfterStartsAfreshAfterAVerifiedRepair(t *testing.T) {
	for _, undecided := range []bool{false, true} {
		clock := clock.NewFake(t0)
		c := NewChain(contracts.Guards{After: 2}, contracts.Schedule{}, clock)
		u := &Unit{}
		cand := Candidate{Condition: "stuck", Action: "x"}
		decide := func() Verdict {
			cand.Severity = c.Observe(u, Observation{Severity: contracts.SeverityCritical, Conditions: []string{"stuck"}}).Severity
			clock.Advance(time.Hour)
			return c.Decide(u, cand)
		}
		if v := decide(); v.Run {
			t.Fatalf("first failing run repaired with after: 2: %s", v)
		}
		if v := decide(); !v.Run {
			t.Fatalf("second failing run: %s", v)
		}
		c.RecordRepair(u, "stuck", 0)
		if undecided {
			c.RecordUndecided(u, "stuck")
		} else {
			c.RecordVerify(u, "stuck", true)
		}
		if v := decide(); v.Run || v.Status != StatusPending {
			t.Fatalf("undecided %v: the first failing run after a verified repair repaired at once: %s", undecided, v)
		}
		if v := decide(); !v.Run {
			t.Fatalf("undecided %v: the second failing run after it: %s", undecided, v)
		}
	}
}
