package guard

import "github.com/contractd/contractd/engine/clock"

// Clock tells the guards what time it is. Every rule reads time only through
// its Clock, so tests drive the rules with a clock.Fake. It is clock.Clock,
// the one clock of the engine, its store and the daemon.
type Clock = clock.Clock

// systemClock is a chain's clock when it is given none: the system clock
// in UTC, as the engine's.
func systemClock() Clock { return clock.UTC{} }
