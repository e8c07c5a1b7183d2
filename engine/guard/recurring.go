package guard

import (
	"github.com/contractd/contractd/contracts"
)

// ByContract is the By of a window the contract itself declares.
const ByContract = "the contract's maintenance schedule"

// Recurring is a contract's recurring maintenance windows
// (contracts.MaintenanceWindow): at each elapse of a window's calendar,
// for its duration, the units it covers are in maintenance, as inside a
// window opened with `contractd maintenance`.
type Recurring struct {
	Windows []*contracts.MaintenanceWindow
	Clock   Clock
}

// Active returns the window in force over unit now, as a Window (since,
// until, its reason, By ByContract), or nil when none is. When several
// cover it, the one that ends last wins.
func (r Recurring) Active(unit string) *Window {
	now := r.Clock.Now()
	var best *Window
	for _, w := range r.Windows {
		if !w.Covers(unit) {
			continue
		}
		since, until, ok := w.Active(now)
		if ok && (best == nil || until.After(best.Until)) {
			best = &Window{Since: since, Until: until, Reason: w.Reason, By: ByContract}
		}
	}
	return best
}

// Announced is one announced window (announce: true) and whether it is
// open now.
type Announced struct {
	Window *contracts.MaintenanceWindow
	Open   *Window // nil when it is not open now
}

// Announced returns the windows to announce, each with the occurrence open
// now (nil when none).
func (r Recurring) Announced() []Announced {
	now := r.Clock.Now()
	var out []Announced
	for _, w := range r.Windows {
		if !w.Announce {
			continue
		}
		a := Announced{Window: w}
		if since, until, ok := w.Active(now); ok {
			a.Open = &Window{Since: since, Until: until, Reason: w.Reason, By: ByContract}
		}
		out = append(out, a)
	}
	return out
}

// Later returns whichever of two windows ends later (either may be nil).
func Later(a, b *Window) *Window {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.Until.After(a.Until):
		return b
	}
	return a
}
