package guard

import "fmt"

// GuardGrace names the post-repair grace guard in a Step and a Verdict.
const GuardGrace = "grace"

// Grace holds repairs back while the unit is inside its post-repair grace
// (default 30 s, set by RecordRepair): a unit still starting is not
// repaired again, and Hysteresis does not count it as failing. The grace
// ends when it expires or when RecordVerify records the verification.
type Grace struct {
	Clock Clock
}

var _ Guard = Grace{}

// newGrace builds the grace guard; the grace's length is the row's (see
// Chain.Grace), set on the unit when a repair runs.
func newGrace(c *Chain) Guard { return Grace{Clock: c.clock} }

// Name returns GuardGrace.
func (Grace) Name() string { return GuardGrace }

// Decide is Check for the candidate's unit.
func (g Grace) Decide(u *Unit, _ Candidate) Step { return g.Check(u) }

// Check returns whether the unit is outside its grace.
func (g Grace) Check(u *Unit) Step {
	now := g.Clock.Now()
	if now.Before(u.GraceUntil) {
		return deny(GuardGrace, StatusPending, fmt.Sprintf("inside post-repair grace until %s", stamp(u.GraceUntil)))
	}
	return allow(GuardGrace, "not in grace")
}
