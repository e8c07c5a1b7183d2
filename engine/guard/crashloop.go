package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardCrashLoop names the crash-loop guard in a Step and a Verdict.
const GuardCrashLoop = "crash-loop"

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

var _ Guard = CrashLoop{}

// newCrashLoop builds the crash-loop guard from the contract's crash_loop.
func newCrashLoop(c *Chain) Guard {
	l := c.settings.CrashLoop
	return CrashLoop{MaxRestarts: l.MaxRestarts, Per: l.Per, Then: l.Then, Clock: c.clock}
}

// Name returns GuardCrashLoop.
func (CrashLoop) Name() string { return GuardCrashLoop }

// Decide is Check for the candidate's unit.
func (c CrashLoop) Decide(u *Unit, _ Candidate) Step { return c.Check(u) }

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
