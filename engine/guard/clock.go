package guard

import (
	"sync"
	"time"
)

// Clock tells the guards what time it is. Every rule reads time only through
// its Clock, so tests drive the rules with a FakeClock.
type Clock interface {
	Now() time.Time
}

// RealClock is the wall clock, in UTC.
type RealClock struct{}

// Now returns the current time in UTC.
func (RealClock) Now() time.Time { return time.Now().UTC() }

// FakeClock is a settable clock for tests. The zero value reads as the zero
// time; use NewFakeClock to start somewhere meaningful. It is safe for
// concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock set to t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (backwards too).
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// AdvanceTo moves the clock to t if t is later; it never moves it back.
func (c *FakeClock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// Advance moves the clock forward by d and returns the new time.
func (c *FakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
