package guard

import (
	"fmt"
	"slices"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardSlowRetry names the slow-retry guard in a Step and a Verdict.
const GuardSlowRetry = "slow-retry"

// SlowState is the slow-retry guard's persisted state of one unit. A
// restart restarts the unit whichever condition asked for it, so failed
// repairs are counted per unit; nil means no repair of the unit has failed
// since it was last healthy.
type SlowState struct {
	// Failed counts the unit's repairs in a row that did not help: their
	// verification found the condition still holding (RemediationFailed),
	// or found a pending state and a later run saw the condition again.
	Failed int `json:"consecutive_failed"`
	// Undecided is the condition of the last repair when its verification
	// saw neither the condition nor a healthy unit (a service still
	// starting): the next run that sees the unit healthy or the condition
	// again decides whether that repair helped. Runs in between change
	// nothing.
	Undecided string `json:"undecided,omitempty"`
	// LastFailed is when the last failed repair was counted.
	LastFailed time.Time `json:"last_failed,omitzero"`
}

// SlowRetry slows the repairs of a unit that keeps failing instead of
// giving up (seeds 002 and 004: "after 3 consecutive failures back off to
// 5x the interval; keep trying so a reinstall is picked up by itself").
// Once After repairs in a row did not help, a repair runs only when Factor
// schedule intervals have passed since the last one; in between the
// repair is pending. The count is of verification outcomes, never of runs:
// a run that sees a pending state (the condition gone, the unit not yet
// healthy) neither counts a failure nor ends the streak; only the unit
// seen healthy again (a verified remediation, or a later run) ends it.
// Off when After or Factor is zero.
type SlowRetry struct {
	After  int
	Factor int
	// Every is the schedule interval; zero means contracts.DefaultEvery.
	Every time.Duration
	Clock Clock
}

var _ Guard = SlowRetry{}

// newSlowRetry builds the slow-retry guard from the contract's slow_retry
// and schedule interval.
func newSlowRetry(c *Chain) Guard { return c.SlowRetry(contracts.ActionGuard{}) }

// Name returns GuardSlowRetry.
func (SlowRetry) Name() string { return GuardSlowRetry }

// Decide is Check for the candidate's unit, under the row's own
// slow_retry when it sets one.
func (s SlowRetry) Decide(u *Unit, cand Candidate) Step { return s.forRow(cand.Guard).Check(u) }

// forRow returns s under row g's own slow_retry when the row sets one (a
// row's slow_retry=off turns it off), else s as it is.
func (s SlowRetry) forRow(g contracts.ActionGuard) SlowRetry {
	if sr := g.SlowRetry; sr != nil {
		s.After, s.Factor = 0, 0
		if sr.On() {
			s.After, s.Factor = sr.After, sr.Factor
		}
	}
	return s
}

// Interval is the schedule interval the factor multiplies.
func (s SlowRetry) Interval() time.Duration {
	if s.Every > 0 {
		return s.Every
	}
	return contracts.DefaultEvery
}

// Slowed reports whether u's repairs are slowed under s.
func (s SlowRetry) Slowed(u *Unit) bool {
	return s.After > 0 && s.Factor > 1 && u != nil && u.Slow != nil && u.Slow.Failed >= s.After
}

// Next returns when a slowed unit may be repaired again: Factor intervals
// after its last repair, less half an interval, so the scheduled run that
// falls on the Factor-th interval repairs even when it starts a little
// earlier than the last one did.
func (s SlowRetry) Next(u *Unit) time.Time {
	last := u.lastRepair()
	if last.IsZero() {
		return time.Time{}
	}
	return last.Add(time.Duration(s.Factor)*s.Interval() - s.Interval()/2)
}

// Check returns whether a repair of u may run now.
func (s SlowRetry) Check(u *Unit) Step {
	if s.After <= 0 || s.Factor <= 1 {
		return allow(GuardSlowRetry, "no slow retry")
	}
	failed := 0
	if u.Slow != nil {
		failed = u.Slow.Failed
	}
	if !s.Slowed(u) {
		return allow(GuardSlowRetry, fmt.Sprintf("%d of %d failed repairs in a row before slowing", failed, s.After))
	}
	period := time.Duration(s.Factor) * s.Interval()
	next, now := s.Next(u), s.Clock.Now()
	if !now.Before(next) {
		return allow(GuardSlowRetry, fmt.Sprintf("slowed after %d failed repairs in a row; due: every %s (%dx the %s interval), last repair at %s",
			failed, contracts.FormatDuration(period), s.Factor, contracts.FormatDuration(s.Interval()), stamp(u.lastRepair())))
	}
	return deny(GuardSlowRetry, StatusPending, fmt.Sprintf("slowed after %d failed repairs in a row: next repair at %s (every %s, %dx the %s interval), still trying until the unit is healthy",
		failed, stamp(next), contracts.FormatDuration(period), s.Factor, contracts.FormatDuration(s.Interval())))
}

// Verified folds one repair's verification into u: the condition still
// holding (remediated false) counts a failed repair; the unit healthy ends
// the streak; anything else (the condition gone, the unit not healthy yet)
// leaves the repair undecided until a later run sees more. It reports
// whether this call slowed the unit's repairs.
func (s SlowRetry) Verified(u *Unit, cond string, remediated, healthy bool) (slowed bool) {
	switch {
	case remediated && healthy:
		u.Slow = nil
		return false
	case remediated:
		if u.Slow == nil {
			u.Slow = &SlowState{}
		}
		u.Slow.Undecided = cond
		return false
	}
	return s.fail(u)
}

// Observe decides an undecided repair from one run's observation of u,
// after hysteresis: the unit settled healthy ends the streak, the repaired
// condition held again counts the repair as failed, and anything else
// (pending, unknown, unreachable) changes nothing. It reports whether this
// call slowed the unit's repairs.
func (s SlowRetry) Observe(u *Unit, o Observation, settled Settled) (slowed bool) {
	if u.Slow == nil {
		return false
	}
	if settled.Severity == contracts.SeverityHealthy && !settled.Failing {
		u.Slow = nil
		return false
	}
	if u.Slow.Undecided != "" && slices.Contains(o.Conditions, u.Slow.Undecided) {
		return s.fail(u)
	}
	return false
}

func (s SlowRetry) fail(u *Unit) bool {
	if u.Slow == nil {
		u.Slow = &SlowState{}
	}
	was := s.Slowed(u)
	u.Slow.Failed++
	u.Slow.Undecided = ""
	u.Slow.LastFailed = s.Clock.Now()
	return !was && s.Slowed(u)
}
