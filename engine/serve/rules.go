package serve

import (
	"math/rand/v2"
	"time"
)

// Scheduler rules, each a small value with one job and no clock of its own:
// the caller passes the times in.

// HoldDownAfter is how many consecutive failed runs put a contract on hold.
const HoldDownAfter = 3

// MaxBackoff caps the delay after failed runs (unless the contract's own
// interval is longer, which is then used as is).
const MaxBackoff = time.Hour

// Backoff is the bounded exponential delay after failed runs: the interval
// after 0 or 1 failures, then 2x, 4x … capped at MaxBackoff.
type Backoff struct {
	Every time.Duration
	Max   time.Duration // 0 means MaxBackoff
}

// Delay returns the wait before the next run after failures consecutive
// failed runs. It never returns less than Every.
func (b Backoff) Delay(failures int) time.Duration {
	limit := b.Max
	if limit == 0 {
		limit = MaxBackoff
	}
	if b.Every >= limit {
		return b.Every
	}
	d := b.Every
	for i := 1; i < failures; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return d
}

// HoldDown decides when a failure streak puts a contract on hold.
type HoldDown struct {
	After int // 0 means HoldDownAfter
}

// Trips reports whether a contract that was not held before and now has
// failures consecutive failed runs enters hold-down.
func (h HoldDown) Trips(failures int, alreadyHeld bool) bool {
	after := h.After
	if after <= 0 {
		after = HoldDownAfter
	}
	return !alreadyHeld && failures >= after
}

// Stagger picks a contract's random phase so contracts loaded together do not
// all run in the same second.
type Stagger struct {
	Max time.Duration
}

// Phase returns a random offset in [0, min(Max, every)); zero when Max is zero.
func (s Stagger) Phase(every time.Duration) time.Duration {
	limit := s.Max
	if every > 0 && every < limit {
		limit = every
	}
	if limit <= 0 {
		return 0
	}
	return rand.N(limit)
}

// heartbeat is the scheduler's own liveness: the main loop beats it, /healthz
// and the systemd watchdog read it.
type heartbeat struct {
	last       time.Time
	stuckAfter time.Duration
}

// check returns the age of the last beat and whether that age is within
// stuckAfter. A heartbeat that never beat is not alive.
func (h heartbeat) check(now time.Time) (time.Duration, bool) {
	if h.last.IsZero() {
		return 0, false
	}
	age := now.Sub(h.last)
	return age, age <= h.stuckAfter
}
