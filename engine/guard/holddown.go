package guard

import (
	"time"
)

// DefaultHoldDownAfter is how many consecutive failed runs hold a contract down.
const DefaultHoldDownAfter = 3

// Scheduler is the persisted scheduler state of one contract.
type Scheduler struct {
	ConsecutiveFailed int       `json:"consecutive_failed"`
	HeldDown          bool      `json:"held_down,omitempty"`
	HeldSince         time.Time `json:"held_since,omitzero"`
	// Alerted is set once the hold-down alert went out, so a restart of
	// the daemon does not alert again for the same hold-down.
	Alerted   bool      `json:"alerted,omitempty"`
	LastRun   time.Time `json:"last_run,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// HoldDown holds a contract down after After consecutive failed runs
// (engine errors, deadlines, store errors — not sick agents; default 3),
// with one alert per hold-down, until an operator releases it.
type HoldDown struct {
	After int
	Clock Clock
}

// Record folds one run into s: runErr nil is a successful run. It reports
// whether the engine must send the hold-down alert now (once per hold-down).
func (h HoldDown) Record(s *Scheduler, runErr error) (alert bool) {
	now := h.Clock.Now()
	s.LastRun = now
	if runErr == nil {
		s.ConsecutiveFailed, s.LastError = 0, ""
		return false
	}
	s.ConsecutiveFailed++
	s.LastError = runErr.Error()
	after := h.After
	if after <= 0 {
		after = DefaultHoldDownAfter
	}
	if s.ConsecutiveFailed >= after && !s.HeldDown {
		s.HeldDown, s.HeldSince = true, now
	}
	if s.HeldDown && !s.Alerted {
		s.Alerted = true
		return true
	}
	return false
}

// Release is `contractd reset NAME`: it clears the hold-down, its alert flag
// and the failure count.
func Release(s *Scheduler) {
	*s = Scheduler{LastRun: s.LastRun}
}

// Backoff returns the wait before the next run after failures consecutive
// failed runs: the interval for 0 or 1 failure, then 2x, 4x … capped at
// limit (1h when limit is zero).
func Backoff(interval time.Duration, failures int, limit time.Duration) time.Duration {
	if limit <= 0 {
		limit = time.Hour
	}
	d := interval
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
