package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardDependency names the dependency guard in a Step and a Verdict.
const GuardDependency = "dependency"

// Judgement is a unit's verdict as its last run left it: what the units
// that depend on it read (those of other contracts through the store,
// so with --etcd it is the owner's).
type Judgement struct {
	At       time.Time          `json:"at"`
	Severity contracts.Severity `json:"severity"` // after repair and suppression
	// Root names what suppresses the unit when Severity is suppressed; in
	// a whole contract's verdict, the unit of it that fails.
	Root string `json:"root,omitempty"`
}

// Failing reports whether a unit judged j fails for the units that depend
// on it: critical, unreachable (at once, before unreachable_after: the
// dependency's own incident waits for that, its dependents need not), or
// suppressed by something that fails in turn. Degraded does not: a
// degraded host still serves.
func (j *Judgement) Failing() bool {
	if j == nil {
		return false
	}
	switch j.Severity {
	case contracts.SeverityCritical, contracts.SeverityUnreachable, contracts.SeveritySuppressed:
		return true
	}
	return false
}

// Dependency is one thing a unit depends on, as last judged.
type Dependency struct {
	// Ref names it as reports do: "jumphost/jump", "jumphost",
	// "target:docker".
	Ref string
	// Judged is its last judgement; nil when it was never judged.
	Judged *Judgement
	// Every is how often it is judged (its contract's schedule), so that
	// a judgement too old to trust is told from a fresh one.
	Every time.Duration
}

// Suppression says why a unit is suppressed.
type Suppression struct {
	// By is the dependency the unit waits for; Root the root cause: By,
	// or what suppresses By in turn.
	By   string `json:"by"`
	Root string `json:"root"`
	// Waiting: By was last judged healthy before the unit failed, and is
	// asked to be judged again; the unit is held until it is, for at
	// most MaxWait intervals of By.
	Waiting bool   `json:"waiting,omitempty"`
	Reason  string `json:"reason"`
}

// Dependency rule constants.
const (
	// StaleAfter intervals, a judgement is too old to suppress anything:
	// a dependency nobody judges any more never silences its dependents.
	StaleAfter = 3
	// MaxWait intervals of a dependency, a unit that failed after the
	// dependency was last judged healthy waits for it to be judged again.
	MaxWait = 2
)

// Dependencies is the dependency rule. A unit that is not healthy this
// run while one of its dependencies fails (Judgement.Failing, judged
// within StaleAfter of its intervals) is suppressed: no repair, no new
// incident, no message, since the dependency's own incident is the one
// alert. A unit that fails while every dependency was last judged
// healthy before it failed is held the same way (Waiting) until each is
// judged again, for at most MaxWait of its intervals: the daemon judges
// the dependency at once, so a root cause is found before its dependents
// page (Nagios checks a host's parents on demand the same way). A
// healthy unit is never suppressed. Self names the unit, so that a
// dependency whose root cause is the unit itself (a cycle lint refuses)
// suppresses nothing.
type Dependencies struct {
	Self  string
	Clock Clock
}

// Judge decides whether u, seen raw this run, is suppressed by deps (the
// first failing one, in order). It records on u when the unit started to
// fail (Unit.FailingSince), which the wait is counted from, and clears it
// when the unit is healthy. It returns nil when the unit is not
// suppressed.
func (d Dependencies) Judge(u *Unit, raw contracts.Severity, deps []Dependency) *Suppression {
	now := d.Clock.Now()
	switch raw {
	case contracts.SeverityHealthy:
		u.FailingSince = time.Time{}
		return nil
	case contracts.SeveritySkipped:
		return nil
	}
	if u.FailingSince.IsZero() {
		u.FailingSince = now
	}
	for _, dep := range deps {
		j := dep.Judged
		if !j.Failing() || now.Sub(j.At) > StaleAfter*every(dep.Every) {
			continue
		}
		root := dep.Ref
		if j.Root != "" {
			root = j.Root
		}
		if root == d.Self {
			continue
		}
		why := fmt.Sprintf("%s is %s (judged %s)", dep.Ref, j.Severity, stamp(j.At))
		switch {
		case j.Severity == contracts.SeveritySuppressed:
			why = fmt.Sprintf("%s is suppressed by %s (judged %s)", dep.Ref, root, stamp(j.At))
		case root != dep.Ref:
			why = fmt.Sprintf("%s is %s: %s (judged %s)", dep.Ref, j.Severity, root, stamp(j.At))
		}
		return &Suppression{By: dep.Ref, Root: root, Reason: why}
	}
	for _, dep := range deps {
		j := dep.Judged
		if j != nil && !j.At.Before(u.FailingSince) {
			continue // judged since the unit failed: its word stands
		}
		if now.Sub(u.FailingSince) >= MaxWait*every(dep.Every) {
			continue
		}
		last := "never judged"
		if j != nil {
			last = fmt.Sprintf("last judged %s at %s", j.Severity, stamp(j.At))
		}
		return &Suppression{By: dep.Ref, Root: dep.Ref, Waiting: true,
			Reason: fmt.Sprintf("waiting for %s to be judged again (%s, before this unit failed at %s; at most until %s)",
				dep.Ref, last, stamp(u.FailingSince), stamp(u.FailingSince.Add(MaxWait*every(dep.Every))))}
	}
	return nil
}

func every(d time.Duration) time.Duration {
	if d <= 0 {
		return contracts.DefaultEvery
	}
	return d
}

// DependencyGuard is the dependency guard: a suppressed unit is not
// repaired (blocked), whatever the other guards say. Its repair waits for
// the dependency: the unit's failure is presumed to be its.
type DependencyGuard struct{}

var _ Guard = DependencyGuard{}

func newDependency(*Chain) Guard { return DependencyGuard{} }

// Name returns GuardDependency.
func (DependencyGuard) Name() string { return GuardDependency }

// Decide blocks a candidate of a suppressed unit.
func (DependencyGuard) Decide(_ *Unit, cand Candidate) Step {
	if s := cand.Suppressed; s != nil {
		return deny(GuardDependency, StatusBlocked, "suppressed: "+s.Reason)
	}
	return allow(GuardDependency, "no failing dependency")
}
