package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

func TestDependencies(t *testing.T) {
	judged := func(ago time.Duration, sev contracts.Severity, root string) *Judgement {
		return &Judgement{At: at(-ago), Severity: sev, Root: root}
	}
	dep := func(ref string, j *Judgement) Dependency { return Dependency{Ref: ref, Judged: j, Every: time.Minute} }
	tests := []struct {
		name         string
		raw          contracts.Severity
		failingSince time.Duration // before now; 0: not failing before
		deps         []Dependency
		wantBy       string
		wantRoot     string
		wantWaiting  bool
		wantReason   string
	}{
		{name: "healthy is never suppressed", raw: contracts.SeverityHealthy,
			deps: []Dependency{dep("jumphost/jump", judged(time.Second, contracts.SeverityCritical, ""))}},
		{name: "critical dependency suppresses", raw: contracts.SeverityCritical, failingSince: time.Minute,
			deps:   []Dependency{dep("jumphost/jump", judged(time.Second, contracts.SeverityCritical, ""))},
			wantBy: "jumphost/jump", wantRoot: "jumphost/jump", wantReason: "jumphost/jump is critical"},
		{name: "unreachable dependency suppresses at once", raw: contracts.SeverityUnreachable,
			deps:   []Dependency{dep("target:jump", judged(0, contracts.SeverityUnreachable, ""))},
			wantBy: "target:jump", wantRoot: "target:jump"},
		{name: "a suppressed dependency passes its root on", raw: contracts.SeverityCritical, failingSince: time.Minute,
			deps:   []Dependency{dep("mid", judged(time.Second, contracts.SeveritySuppressed, "jumphost/jump"))},
			wantBy: "mid", wantRoot: "jumphost/jump", wantReason: "mid is suppressed by jumphost/jump"},
		{name: "a contract's verdict names its failing unit", raw: contracts.SeverityCritical, failingSince: time.Minute,
			deps:   []Dependency{dep("jumphost", judged(time.Second, contracts.SeverityUnreachable, "jumphost/jump"))},
			wantBy: "jumphost", wantRoot: "jumphost/jump", wantReason: "jumphost is unreachable: jumphost/jump"},
		{name: "a degraded dependency does not suppress", raw: contracts.SeverityCritical, failingSince: time.Minute,
			deps: []Dependency{dep("jumphost", judged(time.Second, contracts.SeverityDegraded, ""))}},
		{name: "a stale failing judgement does not suppress", raw: contracts.SeverityCritical, failingSince: 10 * time.Minute,
			deps: []Dependency{dep("jumphost", judged(4*time.Minute, contracts.SeverityCritical, ""))}},
		{name: "healthy, judged before the unit failed: wait for it", raw: contracts.SeverityCritical,
			deps:   []Dependency{dep("jumphost", judged(30*time.Second, contracts.SeverityHealthy, ""))},
			wantBy: "jumphost", wantRoot: "jumphost", wantWaiting: true, wantReason: "waiting for jumphost to be judged again"},
		{name: "healthy, judged since the unit failed: not suppressed", raw: contracts.SeverityCritical, failingSince: time.Minute,
			deps: []Dependency{dep("jumphost", judged(30*time.Second, contracts.SeverityHealthy, ""))}},
		{name: "the wait ends after two intervals", raw: contracts.SeverityCritical, failingSince: 2 * time.Minute,
			deps: []Dependency{dep("jumphost", judged(3*time.Minute, contracts.SeverityHealthy, ""))}},
		{name: "never judged: wait", raw: contracts.SeverityCritical,
			deps:   []Dependency{dep("jumphost", nil)},
			wantBy: "jumphost", wantRoot: "jumphost", wantWaiting: true, wantReason: "never judged"},
		{name: "a failing one wins over one to wait for", raw: contracts.SeverityCritical,
			deps:   []Dependency{dep("a", judged(time.Hour, contracts.SeverityHealthy, "")), dep("b", judged(0, contracts.SeverityCritical, ""))},
			wantBy: "b", wantRoot: "b"},
		{name: "its own root suppresses nothing", raw: contracts.SeverityCritical, failingSince: time.Minute,
			deps: []Dependency{dep("other", judged(0, contracts.SeveritySuppressed, "self"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{}
			if tt.failingSince > 0 {
				u.FailingSince = at(-tt.failingSince)
			}
			s := Dependencies{Self: "self", Clock: clock.NewFake(t0)}.Judge(u, tt.raw, tt.deps)
			if tt.wantBy == "" {
				if s != nil {
					t.Fatalf("suppressed: %+v", s)
				}
			} else {
				if s == nil {
					t.Fatalf("not suppressed, want by %s", tt.wantBy)
				}
				if s.By != tt.wantBy || s.Root != tt.wantRoot || s.Waiting != tt.wantWaiting || !strings.Contains(s.Reason, tt.wantReason) {
					t.Fatalf("got %+v, want by %s root %s waiting %v reason ~%q", s, tt.wantBy, tt.wantRoot, tt.wantWaiting, tt.wantReason)
				}
			}
			if tt.raw == contracts.SeverityHealthy && !u.FailingSince.IsZero() {
				t.Fatal("a healthy unit keeps a failing-since time")
			}
			if tt.raw != contracts.SeverityHealthy && u.FailingSince.IsZero() {
				t.Fatal("a failing unit has no failing-since time")
			}
		})
	}
}

func TestDependencyGuardHoldsASuppressedUnitsRepair(t *testing.T) {
	c := NewChain(contracts.Guards{After: 1}, contracts.Schedule{}, clock.NewFake(t0))
	v := c.Decide(&Unit{}, Candidate{Condition: "down", Action: "systemctl restart web", Severity: contracts.SeverityCritical,
		Suppressed: &Suppression{By: "jumphost/jump", Root: "jumphost/jump", Reason: "jumphost/jump is unreachable"}})
	if v.Run || v.Guard != GuardDependency || v.Status != StatusBlocked || !strings.Contains(v.Reason, "suppressed: jumphost/jump is unreachable") {
		t.Fatalf("verdict %+v", v)
	}
	held := &Unit{Conditions: map[string]*Condition{"down": {Held: 1}}}
	if v := c.Decide(held, Candidate{Condition: "down", Action: "x", Severity: contracts.SeverityCritical}); !v.Run {
		t.Fatalf("a unit with no failing dependency is held: %v", v)
	}
}
