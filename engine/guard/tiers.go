package guard

import "fmt"

// GuardTiers names the tiers guard in a Step and a Verdict.
const GuardTiers = "tiers"

// Tiers stops repairing a condition once EscalateAfter repairs in a row did
// not clear it (each verified as remediation failed): the verdict becomes
// escalate (page, don't loop) and stays so until the condition clears or an
// operator resets the unit. Lighter and heavier repairs before that are
// chosen by the engine with PickTier. A zero EscalateAfter never escalates.
type Tiers struct {
	EscalateAfter int
	Clock         Clock
}

var _ Guard = Tiers{}

// newTiers builds the tiers guard from the contract's escalate_after.
func newTiers(c *Chain) Guard {
	return Tiers{EscalateAfter: c.settings.EscalateAfter, Clock: c.clock}
}

// Name returns GuardTiers.
func (Tiers) Name() string { return GuardTiers }

// Decide is Check for the candidate's condition, under the row's own
// escalate_after when it sets one.
func (t Tiers) Decide(u *Unit, cand Candidate) Step {
	if n := cand.Guard.EscalateAfter; n > 0 {
		t.EscalateAfter = n
	}
	return t.Check(u, cand.Condition)
}

// Check returns whether a repair may still run for cond.
func (t Tiers) Check(u *Unit, cond string) Step {
	c := u.condition(cond)
	if c == nil {
		return allow(GuardTiers, "no failed repairs")
	}
	if c.Escalated {
		return deny(GuardTiers, StatusEscalate, fmt.Sprintf("escalated: %d repairs did not clear %s; no repairs until it clears or an operator resets it", c.FailedRepairs, cond))
	}
	if t.EscalateAfter > 0 && c.FailedRepairs >= t.EscalateAfter {
		return deny(GuardTiers, StatusEscalate, fmt.Sprintf("escalate: %d repairs did not clear %s (limit %d)", c.FailedRepairs, cond, t.EscalateAfter))
	}
	if t.EscalateAfter <= 0 {
		return allow(GuardTiers, fmt.Sprintf("%d failed repairs; no escalation limit", c.FailedRepairs))
	}
	return allow(GuardTiers, fmt.Sprintf("%d of %d failed repairs before escalating", c.FailedRepairs, t.EscalateAfter))
}
