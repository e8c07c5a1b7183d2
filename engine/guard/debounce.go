package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardDebounce names the debounce guard in a Step and a Verdict.
const GuardDebounce = "debounce"

// Debounce holds repairs of a unit back for Window after its last repair
// (per agent; zulip-health: 300 s). Inside the window the repair is pending
// ("pending restart since T"); once the window has passed and the condition
// still holds (the engine asks again next run), it is allowed. A zero Window
// allows everything.
type Debounce struct {
	Window time.Duration
	Clock  Clock
}

var _ Guard = Debounce{}

// newDebounce builds the debounce guard from the contract's debounce.
func newDebounce(c *Chain) Guard {
	return Debounce{Window: c.settings.Debounce, Clock: c.clock}
}

// Name returns GuardDebounce.
func (Debounce) Name() string { return GuardDebounce }

// Decide is Check for the candidate's condition.
func (d Debounce) Decide(u *Unit, cand Candidate) Step { return d.Check(u, cand.Condition) }

// Check returns whether a repair for cond may run now.
func (d Debounce) Check(u *Unit, cond string) Step {
	now := d.Clock.Now()
	last := u.lastRepair()
	if d.Window <= 0 {
		return off(GuardDebounce, "debounce 0s")
	}
	if last.IsZero() {
		return allow(GuardDebounce, "no recent repair")
	}
	until := last.Add(d.Window)
	if !now.Before(until) {
		return allow(GuardDebounce, fmt.Sprintf("last repair %s, %s ago", stamp(last), contracts.FormatDuration(now.Sub(last).Round(time.Second))))
	}
	since := now
	if c := u.condition(cond); c != nil && !c.PendingSince.IsZero() {
		since = c.PendingSince
	}
	return deny(GuardDebounce, StatusPending, fmt.Sprintf("pending restart since %s (debounce %s after the repair at %s; runs after %s if the condition still holds)",
		stamp(since), contracts.FormatDuration(d.Window), stamp(last), stamp(until)))
}
