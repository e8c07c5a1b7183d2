package serve

import (
	"math/rand/v2"
	"time"

	"github.com/contractd/contractd/engine/guard"
)

// Scheduler rules, each a small value with one job and no clock of its own:
// the caller passes the times in.

// HoldDownAfter is how many consecutive failed runs put a contract on hold
// (the rule itself is guard.HoldDown).
const HoldDownAfter = guard.DefaultHoldDownAfter

// MaxBackoff caps the delay after failed runs, unless the contract's own
// interval is longer: that interval is then kept as is.
const MaxBackoff = time.Hour

// backoff is the wait before the next run after failures consecutive failed
// runs: guard.Backoff (1x, 2x, 4x …) capped at MaxBackoff, never shorter
// than the contract's interval.
func backoff(every time.Duration, failures int) time.Duration {
	return guard.Backoff(every, failures, max(MaxBackoff, every))
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

// check returns how long the scheduler has not answered and whether that is
// within stuckAfter: the age of the last beat, or, when longer, how long a
// contract's loop has been busy with one tick (busy holds when each busy
// loop started its tick). A heartbeat that never beat is not alive.
func (h heartbeat) check(now time.Time, busy ...time.Time) (time.Duration, bool) {
	if h.last.IsZero() {
		return 0, false
	}
	age := now.Sub(h.last)
	for _, b := range busy {
		age = max(age, now.Sub(b))
	}
	return age, age <= h.stuckAfter
}
