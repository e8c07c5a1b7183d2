package guard

import "fmt"

// GuardBlastRadius names the blast-radius guard in a Step and a Verdict.
const GuardBlastRadius = "blast-radius"

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

var _ Guard = BlastRadius{}

// newBlastRadius builds the blast-radius guard from the contract's
// blast_radius; without one it allows everything.
func newBlastRadius(c *Chain) Guard {
	b := BlastRadius{Clock: c.clock}
	if g := c.settings.BlastRadius; g != nil {
		b.MaxRepairs, b.Trip, b.MinUnits = g.MaxRepairs, g.Trip, g.MinUnits
	}
	return b
}

// Name returns GuardBlastRadius.
func (BlastRadius) Name() string { return GuardBlastRadius }

// Decide is Check for the candidate's fleet.
func (b BlastRadius) Decide(_ *Unit, cand Candidate) Step { return b.Check(cand.Fleet) }

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
