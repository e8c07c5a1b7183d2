package guard

import (
	"time"

	"github.com/contractd/contractd/engine/clock"
)

// Clock tells the guards what time it is. Every rule reads time only through
// its Clock, so tests drive the rules with a clock.Fake. It is clock.Clock,
// the one clock of the engine, its store and the daemon.
type Clock = clock.Clock

// RealClock is the system clock in UTC, a chain's clock when it is given
// none.
type RealClock = clock.UTC

// FakeClock is clock.Fake: time that moves only when a test moves it.
type FakeClock = clock.Fake

// NewFakeClock returns a clock.Fake set to t.
func NewFakeClock(t time.Time) *FakeClock { return clock.NewFake(t) }
