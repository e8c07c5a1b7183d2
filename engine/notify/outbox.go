package notify

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/contractd/contractd/engine/guard"
)

// Queued is a message a notifier failed to deliver, kept for the next run.
type Queued struct {
	Notifier  string    `json:"notifier"`
	Message   Message   `json:"message"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	Since     time.Time `json:"since"` // first failed attempt
}

// Outbox holds undelivered messages. It is plain data persisted in the
// ledger, so a message that could not be sent is retried on the next run,
// in order, before that run's own messages.
type Outbox struct {
	Queue []Queued `json:"queue,omitempty"`
}

// Delivery is what happened to one message at one notifier.
type Delivery struct {
	Notifier string
	Message  Message
	Err      error // nil when delivered
	Retry    bool  // it came from the outbox
	Queued   bool  // not delivered, kept in the outbox for the next run
	Dropped  bool  // not delivered and given up on
}

// Defaults for Sender.
const (
	DefaultMaxAttempts = 10
	DefaultMaxAge      = 24 * time.Hour
)

// Sender delivers messages to every notifier and keeps what failed in an
// Outbox. Notifiers work concurrently, so a slow one does not delay the
// others; within one notifier messages go in order, and after its first
// failure in a call the rest of its messages are queued without being
// tried, so one dead destination costs at most one timeout per run.
type Sender struct {
	Notifiers []Notifier
	Clock     guard.Clock // nil means guard.RealClock
	// MaxAttempts and MaxAge bound retries of one message (defaults 10 and
	// 24h); past either it is dropped and reported as such.
	MaxAttempts int
	MaxAge      time.Duration
}

// Send retries the outbox's messages, then delivers msgs to every notifier,
// and rewrites out.Queue with what is still undelivered. It never fails as a
// whole: each failed delivery is reported with its error. Messages queued
// for a notifier that is no longer configured are dropped.
func (s Sender) Send(ctx context.Context, out *Outbox, msgs ...Message) []Delivery {
	clock := s.Clock
	if clock == nil {
		clock = guard.RealClock{}
	}
	now := clock.Now()
	maxAttempts, maxAge := s.MaxAttempts, s.MaxAge
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}

	work := make([][]Queued, len(s.Notifiers))
	byName := make(map[string]int, len(s.Notifiers))
	for i, n := range s.Notifiers {
		byName[n.Name()] = i
	}
	var results []Delivery
	for _, q := range out.Queue {
		i, ok := byName[q.Notifier]
		if !ok {
			results = append(results, Delivery{Notifier: q.Notifier, Message: q.Message, Retry: true, Dropped: true,
				Err: fmt.Errorf("notifier %s is no longer configured", q.Notifier)})
			continue
		}
		work[i] = append(work[i], q)
	}
	retried := make([]int, len(work)) // the first retried[i] of work[i] came from the outbox
	for i := range work {
		retried[i] = len(work[i])
		for _, m := range msgs {
			work[i] = append(work[i], Queued{Notifier: s.Notifiers[i].Name(), Message: m})
		}
	}

	per := make([][]Delivery, len(s.Notifiers))
	var wg sync.WaitGroup
	for i, n := range s.Notifiers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var failed error
			for j := range work[i] {
				q := &work[i][j]
				d := Delivery{Notifier: n.Name(), Message: q.Message, Retry: j < retried[i]}
				if failed == nil && ctx.Err() == nil {
					q.Attempts++
					if err := n.Notify(ctx, q.Message); err != nil {
						failed = err
						d.Err = err
					}
				} else {
					d.Err = fmt.Errorf("not tried: %s failed earlier in this run: %w", n.Name(), firstNonNil(failed, ctx.Err()))
				}
				if d.Err != nil {
					if q.Since.IsZero() {
						q.Since = now
					}
					q.LastError = d.Err.Error()
					d.Dropped = q.Attempts >= maxAttempts || now.Sub(q.Since) >= maxAge
					d.Queued = !d.Dropped
				}
				per[i] = append(per[i], d)
			}
		}()
	}
	wg.Wait()

	out.Queue = out.Queue[:0]
	for i := range s.Notifiers {
		for j, d := range per[i] {
			if d.Queued {
				out.Queue = append(out.Queue, work[i][j])
			}
		}
		results = append(results, per[i]...)
	}
	return results
}

func firstNonNil(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
