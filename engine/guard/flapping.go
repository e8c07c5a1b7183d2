package guard

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardFlapping names the flapping guard in a Step and a Verdict.
const GuardFlapping = "flapping"

// FlapState is flap detection's record of a unit's last runs.
type FlapState struct {
	// Last is the state seen last (a severity; suppressed and skipped
	// runs are not recorded).
	Last contracts.Severity `json:"last"`
	// Changes holds one bit per recorded run, newest lowest: whether its
	// state differed from the run before.
	Changes uint64 `json:"changes"`
	// Runs counts the runs recorded, up to the window.
	Runs     int       `json:"runs"`
	Flapping bool      `json:"flapping,omitempty"`
	Since    time.Time `json:"since,omitzero"` // when it started flapping
	Percent  float64   `json:"percent"`
}

// FlapChange is what one run did to flap detection.
type FlapChange struct {
	Started, Stopped bool
	Flapping         bool
	Percent          float64
}

// Flapping is flap detection (Icinga 2's state-change percentage): of a
// unit's last Runs runs, the share whose state differed from the run
// before, every change weighing the same, counted over the whole window
// even before it is full. Above High percent the unit starts flapping;
// below Low it stops. The state is the unit as the run saw it, before
// hysteresis (a repaired unit counts as its verification found it). A
// flapping unit's repairs are held (blocked) unless Repair.
type Flapping struct {
	Low, High float64
	Runs      int
	Repair    bool
	Clock     Clock
}

var _ Guard = Flapping{}

// newFlapping builds the flapping guard from the contract's settings; it
// allows everything when flap detection is off.
func newFlapping(c *Chain) Guard {
	f, _ := c.Flapping()
	return f
}

// Name returns GuardFlapping.
func (Flapping) Name() string { return GuardFlapping }

// Decide holds a flapping unit's repairs back, unless Repair.
func (f Flapping) Decide(u *Unit, _ Candidate) Step {
	if u == nil || u.Flap == nil || !u.Flap.Flapping || f.Repair || f.Runs == 0 {
		return allow(GuardFlapping, "not flapping")
	}
	return deny(GuardFlapping, StatusBlocked, fmt.Sprintf("flapping since %s (state changed in %.0f%% of its last %d runs); repairs wait until it settles",
		stamp(u.Flap.Since), u.Flap.Percent, f.Runs))
}

// Observe records the unit's state this run and returns whether it started
// or stopped flapping with it. A skipped or suppressed run records
// nothing.
func (f Flapping) Observe(u *Unit, state contracts.Severity) FlapChange {
	if f.Runs == 0 || state == contracts.SeveritySkipped || state == contracts.SeveritySuppressed {
		if u.Flap != nil {
			return FlapChange{Flapping: u.Flap.Flapping, Percent: u.Flap.Percent}
		}
		return FlapChange{}
	}
	s := u.Flap
	if s == nil {
		// The first run is the baseline: nothing changed yet.
		u.Flap = &FlapState{Last: state}
		return FlapChange{}
	}
	mask := uint64(1)<<f.Runs - 1
	s.Changes = s.Changes << 1 & mask
	if state != s.Last {
		s.Changes |= 1
	}
	s.Last = state
	s.Runs = min(s.Runs+1, f.Runs)
	s.Percent = 100 * float64(bits.OnesCount64(s.Changes)) / float64(f.Runs)
	var ch FlapChange
	switch {
	case !s.Flapping && s.Percent > f.High:
		s.Flapping, s.Since, ch.Started = true, f.Clock.Now(), true
	case s.Flapping && s.Percent < f.Low:
		s.Flapping, s.Since, ch.Stopped = false, time.Time{}, true
	}
	ch.Flapping, ch.Percent = s.Flapping, s.Percent
	return ch
}
