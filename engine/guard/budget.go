package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardBudget names the budget guard in a Step and a Verdict.
const GuardBudget = "budget"

// Budget allows at most Count repairs of a unit in any sliding Window
// (seed 000: 1 per 10m), counted over the recorded repair times. Over budget
// the repair is blocked: logged, not run. A zero Count disables the budget.
type Budget struct {
	Count  int
	Window time.Duration
	Clock  Clock
}

var _ Guard = Budget{}

// newBudget builds the budget guard from the contract's budget (none when
// the contract sets none).
func newBudget(c *Chain) Guard {
	b := Budget{Clock: c.clock}
	if g := c.settings.Budget; g != nil {
		b.Count, b.Window = g.Count, g.Window
	}
	return b
}

// Name returns GuardBudget.
func (Budget) Name() string { return GuardBudget }

// Decide is Check under the candidate row's own budget when it sets one,
// else under b.
func (b Budget) Decide(u *Unit, cand Candidate) Step {
	if g := cand.Guard.Budget; g != nil {
		b.Count, b.Window = g.Count, g.Window
	}
	return b.Check(u)
}

// Check returns whether one more repair fits the budget now.
func (b Budget) Check(u *Unit) Step {
	if b.Count <= 0 || b.Window <= 0 {
		return allow(GuardBudget, "no budget")
	}
	now := b.Clock.Now()
	n, oldest := u.repairsSince(now.Add(-b.Window))
	if n < b.Count {
		return allow(GuardBudget, fmt.Sprintf("%d of %d per %s used", n, b.Count, contracts.FormatDuration(b.Window)))
	}
	return deny(GuardBudget, StatusBlocked, fmt.Sprintf("over budget: %d of %d per %s used; next allowed at %s",
		n, b.Count, contracts.FormatDuration(b.Window), stamp(oldest.Add(b.Window))))
}
