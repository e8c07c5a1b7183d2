package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// Debounce holds repairs of a unit back for Window after its last repair
// (per agent; zulip-health: 300 s). Inside the window the repair is pending
// ("pending restart since T"); once the window has passed and the condition
// still holds (the engine asks again next run), it is allowed. A zero Window
// allows everything.
type Debounce struct {
	Window time.Duration
	Clock  Clock
}

// Check returns whether a repair for cond may run now.
func (d Debounce) Check(u *Unit, cond string) Step {
	now := d.Clock.Now()
	last := u.lastRepair()
	if d.Window <= 0 || last.IsZero() {
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

// Budget allows at most Count repairs of a unit in any sliding Window
// (seed 000: 1 per 10m), counted over the recorded repair times. Over budget
// the repair is blocked: logged, not run. A zero Count disables the budget.
type Budget struct {
	Count  int
	Window time.Duration
	Clock  Clock
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

// CrashLoop turns a repair into an alert when the unit restarted too often:
// a repair is refused when the unit already restarted MaxRestarts times in
// the last Per window, since running it would make more than MaxRestarts
// (zulip-health: "never restart if PM2 crashes > 10/h").
//
// Restarts are counted two ways and the larger wins: repairs this ledger
// recorded, and the increments of an external restart counter read from the
// target (pm2 `restarts`, systemd `NRestarts`, fed by RecordRestartCounter)
// within the window. They are not added, because the external counter
// already includes the restarts contractd caused. A zero MaxRestarts
// disables the guard.
type CrashLoop struct {
	MaxRestarts int
	Per         time.Duration
	Then        string // contracts.CrashLoopAlert or CrashLoopEscalate, for the reason
	Clock       Clock
}

// Count returns the restarts of u within the window ending now, and which
// source gave it ("repairs" or "restart counter").
func (c CrashLoop) Count(u *Unit) (int, string) {
	from := c.Clock.Now().Add(-c.Per)
	own, _ := u.repairsSince(from)
	var ext int64
	if u.Restarts != nil {
		for _, s := range u.Restarts.Increments {
			if s.At.After(from) {
				ext += s.N
			}
		}
	}
	if ext > int64(own) {
		return int(ext), "restart counter"
	}
	return own, "repairs"
}

// Check returns whether a repair may run, or StatusAlert when the unit is
// crash-looping.
func (c CrashLoop) Check(u *Unit) Step {
	if c.MaxRestarts <= 0 || c.Per <= 0 {
		return allow(GuardCrashLoop, "no crash-loop limit")
	}
	n, src := c.Count(u)
	if n < c.MaxRestarts {
		return allow(GuardCrashLoop, fmt.Sprintf("%d restarts in %s (%s), max %d", n, contracts.FormatDuration(c.Per), src, c.MaxRestarts))
	}
	instead := "an alert"
	if c.Then == contracts.CrashLoopEscalate {
		instead = "a person is paged"
	}
	return deny(GuardCrashLoop, StatusAlert, fmt.Sprintf("%d restarts in the last %s (%s), max %d: %s instead of a repair",
		n, contracts.FormatDuration(c.Per), src, c.MaxRestarts, instead))
}

// Tiers stops repairing a condition once EscalateAfter repairs in a row did
// not clear it (each verified as remediation failed): the verdict becomes
// escalate (page, don't loop) and stays so until the condition clears or an
// operator resets the unit. Lighter and heavier repairs before that are
// chosen by the engine with PickTier. A zero EscalateAfter never escalates.
type Tiers struct {
	EscalateAfter int
	Clock         Clock
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

// Grace holds repairs back while the unit is inside its post-repair grace
// (default 30 s, set by RecordRepair): a unit still starting is not
// repaired again, and Hysteresis does not count it as failing. The grace
// ends when it expires or when RecordVerify records the verification.
type Grace struct {
	Clock Clock
}

// Check returns whether the unit is outside its grace.
func (g Grace) Check(u *Unit) Step {
	now := g.Clock.Now()
	if now.Before(u.GraceUntil) {
		return deny(GuardGrace, StatusPending, fmt.Sprintf("inside post-repair grace until %s", stamp(u.GraceUntil)))
	}
	return allow(GuardGrace, "not in grace")
}

// KnownSeverity refuses to act on a unit whose settled severity is unknown: a
// transport error or a timeout is never treated as anything.
type KnownSeverity struct{}

// Check returns whether sev permits acting.
func (KnownSeverity) Check(sev contracts.Severity) Step {
	switch sev {
	case contracts.SeverityUnknown, contracts.SeveritySkipped:
		return deny(GuardSeverity, StatusBlocked, fmt.Sprintf("severity %s never acts", sev))
	}
	return allow(GuardSeverity, sev.String())
}

// Fleet is what the engine knows about the whole contract in the current
// run, for the blast-radius guard.
type Fleet struct {
	Units   int // units with a known settled severity this run
	Failing int // of them, failing after hysteresis
	Repairs int // repairs already started in this run
}

// BlastRadius limits repairs across all units of a contract in one run. At
// most MaxRepairs repairs run per run (0: no cap); the rest stay pending
// for the next run. When the fraction Trip of at least MinUnits units
// (default 2) is failing at once, the breaker opens and no repair runs:
// that is a network or a shared dependency, not the agents, and the engine
// sends one alert instead. A zero BlastRadius allows everything.
type BlastRadius struct {
	MaxRepairs int
	Trip       float64
	MinUnits   int
	Clock      Clock
}

// Check returns whether one more repair fits this run.
func (b BlastRadius) Check(f Fleet) Step {
	minUnits := b.MinUnits
	if minUnits < 2 {
		minUnits = 2
	}
	if b.Trip > 0 && f.Units >= minUnits && float64(f.Failing) >= b.Trip*float64(f.Units) {
		return deny(GuardBlastRadius, StatusAlert, fmt.Sprintf("circuit open: %d of %d units failing at once (trip at %.0f%%): likely the network or a shared dependency, not the units",
			f.Failing, f.Units, b.Trip*100))
	}
	if b.MaxRepairs > 0 && f.Repairs >= b.MaxRepairs {
		return deny(GuardBlastRadius, StatusPending, fmt.Sprintf("%d repairs already ran this run (max %d per run)", f.Repairs, b.MaxRepairs))
	}
	if b.MaxRepairs == 0 && b.Trip == 0 {
		return allow(GuardBlastRadius, "no fleet limit")
	}
	return allow(GuardBlastRadius, fmt.Sprintf("%d of %d units failing, %d repairs this run", f.Failing, f.Units, f.Repairs))
}
