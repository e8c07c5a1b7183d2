package clock

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimersFireWhenTheClockReachesThem(t *testing.T) {
	cases := []struct {
		name string
		wait time.Duration
		move func(c *Fake)
		want bool
	}{
		{"zero wait fires at once", 0, func(*Fake) {}, true},
		{"negative wait fires at once", -time.Second, func(*Fake) {}, true},
		{"not yet due", time.Minute, func(c *Fake) { c.Advance(59 * time.Second) }, false},
		{"due exactly", time.Minute, func(c *Fake) { c.Advance(time.Minute) }, true},
		{"passed", time.Minute, func(c *Fake) { c.Advance(time.Hour) }, true},
		{"AdvanceTo reaches it", time.Minute, func(c *Fake) { c.AdvanceTo(t0.Add(time.Minute)) }, true},
		{"AdvanceTo never moves back", time.Minute, func(c *Fake) { c.AdvanceTo(t0.Add(-time.Hour)) }, false},
		{"Set forward reaches it", time.Minute, func(c *Fake) { c.Set(t0.Add(2 * time.Minute)) }, true},
		{"Set back does not", time.Minute, func(c *Fake) { c.Set(t0.Add(-time.Minute)) }, false},
		{"moves add up", time.Minute, func(c *Fake) { c.Advance(30 * time.Second); c.Advance(30 * time.Second) }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFake(t0)
			ch := c.After(tc.wait)
			tc.move(c)
			at, ok := fired(ch)
			if ok != tc.want {
				t.Fatalf("fired %v, want %v (clock at %s, timers %v)", ok, tc.want, c.Now(), c.Timers())
			}
			if ok && at != c.Now() {
				t.Errorf("timer received %s, want the clock's time %s", at, c.Now())
			}
			if n := len(c.Timers()); ok == (n != 0) {
				t.Errorf("%d timers pending after the timer fired=%v", n, ok)
			}
		})
	}
}

func TestFakeFiresOnlyTheTimersDue(t *testing.T) {
	c := NewFake(t0)
	early, late := c.After(time.Second), c.After(time.Hour)
	if got := c.Advance(time.Minute); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Advance returned %s, want %s", got, t0.Add(time.Minute))
	}
	if _, ok := fired(early); !ok {
		t.Error("the 1s timer did not fire at +1m")
	}
	if _, ok := fired(late); ok {
		t.Error("the 1h timer fired at +1m")
	}
	if got := c.Timers(); len(got) != 1 || !got[0].Equal(t0.Add(time.Hour)) {
		t.Errorf("pending timers %v, want the one at %s", got, t0.Add(time.Hour))
	}
}

// Armed lets a test know that the code it woke is waiting again.
func TestFakeArmedTellsWhenATimerIsArmed(t *testing.T) {
	c := NewFake(t0)
	armed := c.Armed()
	select {
	case <-armed:
		t.Fatal("Armed closed before any timer was armed")
	default:
	}
	woke := make(chan struct{})
	go func() {
		<-c.After(time.Second)
		close(woke)
		c.After(time.Second) // waits again
	}()
	<-armed
	next := c.Armed()
	c.Advance(time.Second)
	<-woke
	<-next
	if n := len(c.Timers()); n != 1 {
		t.Errorf("%d timers pending, want the one armed after waking", n)
	}
}

func TestFakeIsSafeForConcurrentUse(t *testing.T) {
	c := NewFake(t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				c.After(time.Millisecond)
				c.Now()
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	c.Advance(time.Second)
	if n := len(c.Timers()); n != 0 {
		t.Errorf("%d timers still pending a second after the last was armed", n)
	}
}

func TestUTCReadsInUTC(t *testing.T) {
	if loc := (UTC{}).Now().Location(); loc != time.UTC {
		t.Errorf("UTC{}.Now() is in %s", loc)
	}
}
