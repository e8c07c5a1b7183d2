package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardHysteresis names the hysteresis guard in a Step and a Verdict.
const GuardHysteresis = "hysteresis"

// Observation is one run's result for a unit, before hysteresis.
type Observation struct {
	// Severity is the unit's raw severity this run.
	Severity contracts.Severity
	// Conditions are the keys of the action-table conditions that held.
	Conditions []string
}

// Settled is a unit's status after hysteresis: what the report shows beside
// the raw severity, and what alerts and repairs act on.
type Settled struct {
	// Raw is the severity observed this run.
	Raw contracts.Severity
	// Severity is the settled severity. It is SeverityUnknown when the run
	// tells nothing (unknown, skipped, or unreachable below
	// unreachable_after): the engine must then neither open nor resolve
	// incidents, nor repair.
	Severity contracts.Severity
	// Failing reports whether the unit counts as failing: incidents open
	// (or stay open) and repairs may be considered.
	Failing bool
	// InGrace reports that the unit is inside its post-repair grace and a
	// failing result was not counted.
	InGrace bool
	// Cleared lists conditions that cleared this run: their pending
	// repairs, attempts and escalations are gone, and their incidents may
	// resolve.
	Cleared []string
	// Reason says in a sentence why Severity differs from Raw, or is empty.
	Reason string
}

// Hysteresis owns "N successive results before the status flips", like
// consul's StatusHandler, with asymmetric thresholds:
//
//   - a degraded or critical run increments the failing count and resets the
//     healthy count; the unit becomes failing after After consecutive
//     failing runs (default 1), and a repair's condition must have held
//     After consecutive runs before Check allows it;
//   - an unreachable run counts as failing (reported unreachable, alerted as
//     critical) only after UnreachableAfter consecutive unreachable runs
//     (default 1); before that it settles as unknown;
//   - a healthy run resets the failing and unreachable counts, but a failing
//     unit counts healthy again only after RecoverAfter consecutive healthy
//     runs (default 1), so one lucky pass does not reset everything; a
//     condition likewise clears after RecoverAfter consecutive known runs
//     without it;
//   - unknown and skipped runs change nothing: they neither advance
//     recovery nor failing, and never clear a condition; unknown runs are
//     counted (Unit.Unknown) for the unknown incident, which any other
//     verdict resets;
//   - inside the post-repair grace a failing run is not counted at all.
type Hysteresis struct {
	After            int
	UnreachableAfter int
	RecoverAfter     int
	Clock            Clock
}

var _ Guard = Hysteresis{}

// newHysteresis builds the hysteresis guard from the contract's counts.
func newHysteresis(c *Chain) Guard { return c.Hysteresis() }

// Name returns GuardHysteresis.
func (Hysteresis) Name() string { return GuardHysteresis }

// Decide is Check for the candidate's condition, under the row's own
// after when it sets one.
func (h Hysteresis) Decide(u *Unit, cand Candidate) Step {
	if n := cand.Guard.After; n > 0 {
		h.After = n
	}
	return h.Check(u, cand.Condition)
}

func atLeastOne(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// Observe folds one run's observation into u and returns the settled status.
// It never fails.
func (h Hysteresis) Observe(u *Unit, o Observation) Settled {
	now := h.Clock.Now()
	after, unreachAfter, recoverAfter := atLeastOne(h.After), atLeastOne(h.UnreachableAfter), atLeastOne(h.RecoverAfter)
	s := Settled{Raw: o.Severity, Severity: contracts.SeverityUnknown, Failing: u.failing()}
	switch o.Severity {
	case contracts.SeverityUnknown:
		u.Unknown++
	case contracts.SeveritySkipped:
	default:
		u.Unknown = 0
	}

	switch o.Severity {
	case contracts.SeverityHealthy:
		u.Failing, u.Unreachable = 0, 0
		u.Healthy++
		if u.failing() && u.Healthy < recoverAfter {
			s.Severity, s.Failing = u.Severity, true
			s.Reason = fmt.Sprintf("healthy %d of %d consecutive runs needed to recover: still %s", u.Healthy, recoverAfter, u.Severity)
		} else {
			u.State, s.Severity, s.Failing = StateOK, contracts.SeverityHealthy, false
		}
		s.Cleared = h.conditions(u, o.Conditions, now, recoverAfter)

	case contracts.SeverityDegraded, contracts.SeverityCritical:
		u.Unreachable = 0
		if now.Before(u.GraceUntil) {
			s.InGrace = true
			s.Severity = h.current(u)
			s.Reason = fmt.Sprintf("%s inside post-repair grace until %s: not counted", o.Severity, stamp(u.GraceUntil))
			return s
		}
		u.Healthy = 0
		u.Failing++
		switch {
		case u.Failing >= after || u.failing():
			u.State, u.Severity = StateFailing, o.Severity
			s.Severity, s.Failing = o.Severity, true
		default:
			s.Severity = h.current(u)
			s.Reason = fmt.Sprintf("%s %d of %d consecutive runs: not yet failing", o.Severity, u.Failing, after)
		}
		s.Cleared = h.conditions(u, o.Conditions, now, recoverAfter)

	case contracts.SeverityUnreachable:
		u.Healthy = 0
		u.Unreachable++
		if u.Unreachable >= unreachAfter {
			u.State, u.Severity = StateFailing, contracts.SeverityUnreachable
			s.Severity, s.Failing = contracts.SeverityUnreachable, true
		} else {
			// Below the threshold the run tells nothing, whatever the unit
			// was before: it neither opens an incident nor resolves one.
			s.Failing = false
			s.Reason = fmt.Sprintf("unreachable %d of %d consecutive runs: not yet counted", u.Unreachable, unreachAfter)
		}

	default:
		s.Reason = fmt.Sprintf("%s: counts unchanged", o.Severity)
	}
	return s
}

// current is the settled severity of a unit whose state did not change.
func (h Hysteresis) current(u *Unit) contracts.Severity {
	if u.failing() {
		return u.Severity
	}
	return contracts.SeverityHealthy
}

// conditions counts the conditions that held and those that did not, and
// returns the keys that cleared.
func (h Hysteresis) conditions(u *Unit, held []string, now time.Time, recoverAfter int) []string {
	seen := make(map[string]bool, len(held))
	for _, k := range held {
		seen[k] = true
		c := u.ensure(k, now)
		c.Held++
		c.Clear = 0
	}
	var cleared []string
	for _, k := range u.sortedConditions() {
		if seen[k] {
			continue
		}
		c := u.Conditions[k]
		if c == nil {
			// A null entry tracks nothing: it is gone, not cleared.
			delete(u.Conditions, k)
			continue
		}
		c.Held = 0
		c.PendingSince = time.Time{}
		c.Clear++
		if c.Clear >= recoverAfter {
			delete(u.Conditions, k)
			cleared = append(cleared, k)
		}
	}
	return cleared
}

// Check allows a repair for cond once the condition has held After
// consecutive runs; before that the repair is pending.
func (h Hysteresis) Check(u *Unit, cond string) Step {
	after := atLeastOne(h.After)
	held := 0
	if c := u.condition(cond); c != nil {
		held = c.Held
	}
	if held >= after {
		return allow(GuardHysteresis, fmt.Sprintf("held %d consecutive runs, %d needed", held, after))
	}
	return deny(GuardHysteresis, StatusPending, fmt.Sprintf("condition held %d of %d consecutive runs needed", held, after))
}

// stamp renders a time for reasons and reports.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
