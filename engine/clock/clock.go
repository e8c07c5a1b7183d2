// Package clock is the one source of time for the engine, its guards, its
// store and the daemon. Everything that reads the time or waits for it takes
// a Clock, so production runs on the system clock and tests drive time with
// a Fake: its timers fire when the test advances it, never on their own.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and waits for it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed on
	// this clock (at once when d <= 0).
	After(d time.Duration) <-chan time.Time
}

var (
	_ Clock = Real{}
	_ Clock = UTC{}
	_ Clock = (*Fake)(nil)
)

// Real is the system clock. Now is time.Now: the local zone, with the
// monotonic reading that keeps the daemon's waits steady when the wall
// clock is stepped.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// UTC is the system clock read in UTC. The engine, the guards and the store
// use it by default: the times they write down (ledgers, snapshots, history
// keys, messages) are UTC wherever the host is.
type UTC struct{ Real }

// Now returns time.Now().UTC().
func (UTC) Now() time.Time { return time.Now().UTC() }

// Fake is a clock for tests: its time moves only when Set, AdvanceTo or
// Advance move it, and a channel from After receives once a move reaches
// its deadline. The zero value reads as the zero time; NewFake starts
// somewhere meaningful. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	armed  chan struct{} // closed and replaced each time After arms a timer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the clock's current time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time when a move of
// the clock reaches d from now; at once when d <= 0.
func (c *Fake) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
	return ch
}

// Set moves the clock to t (backwards too) and fires every timer due by
// then.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.fireLocked()
}

// AdvanceTo moves the clock to t if t is later, firing every timer due by
// then; it never moves the clock back.
func (c *Fake) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
		c.fireLocked()
	}
}

// Advance moves the clock forward by d, fires every timer due by then and
// returns the new time.
func (c *Fake) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
	return c.now
}

// Timers returns the deadlines of the timers After armed that have not
// fired yet, in the order they were armed.
func (c *Fake) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := make([]time.Time, len(c.timers))
	for i, t := range c.timers {
		at[i] = t.at
	}
	return at
}

// Armed returns a channel that is closed the next time After arms a
// timer: a test that advanced the clock waits on it to know the code it
// woke has gone back to waiting.
func (c *Fake) Armed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil {
		c.armed = make(chan struct{})
	}
	return c.armed
}

func (c *Fake) fireLocked() {
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}
