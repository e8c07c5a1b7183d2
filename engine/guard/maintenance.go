package guard

import (
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
)

// GuardMaintenance names the maintenance guard in a Step and a Verdict.
const GuardMaintenance = "maintenance"

// Window is an operator's maintenance window (`contractd maintenance`):
// until Until, the repairs of the units it covers are paused and no new
// alert opens for them. Checks keep running, the report still grades every
// agent, and an incident that was already open still resolves.
type Window struct {
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
	// By names who started the window when the caller named itself (an
	// MCP client); "" for the CLI and the API.
	By string `json:"by,omitempty"`
}

// Active reports whether the window covers now.
func (w *Window) Active(now time.Time) bool {
	return w != nil && !now.Before(w.Since) && now.Before(w.Until)
}

// String renders "maintenance until 2026-11-30T02:00:00Z: kernel upgrade".
func (w *Window) String() string {
	s := "maintenance until " + stamp(w.Until)
	if w.Reason != "" {
		s += ": " + w.Reason
	}
	if w.By != "" {
		s += " (set by " + w.By + ")"
	}
	return s
}

// Maintenance is the maintenance guard: a unit inside an operator's window
// is not repaired (blocked), whatever the other guards say.
type Maintenance struct {
	Clock Clock
}

var _ Guard = Maintenance{}

// newMaintenance builds the maintenance guard; the window comes with each
// candidate (Candidate.Maintenance).
func newMaintenance(c *Chain) Guard { return Maintenance{Clock: c.clock} }

// Name returns GuardMaintenance.
func (Maintenance) Name() string { return GuardMaintenance }

// Decide is Check for the window covering the candidate's unit.
func (m Maintenance) Decide(_ *Unit, cand Candidate) Step { return m.Check(cand.Maintenance) }

// Check returns the guard's answer for a unit whose covering window is w
// (nil when none).
func (m Maintenance) Check(w *Window) Step {
	if now := m.Clock.Now(); w.Active(now) {
		return deny(GuardMaintenance, StatusBlocked, fmt.Sprintf("%s (%s left)", w, contracts.FormatDuration(w.Until.Sub(now).Round(time.Second))))
	}
	return allow(GuardMaintenance, "no maintenance window")
}
