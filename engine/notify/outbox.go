package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

// Queued is a message a route failed to deliver, kept for a later run.
type Queued struct {
	Notifier  string    `json:"notifier"` // the route's name
	Message   Message   `json:"message"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	Since     time.Time `json:"since"`                 // first failed attempt
	Next      time.Time `json:"next_attempt,omitzero"` // not tried again before this
	// Reached says another route has delivered the message.
	Reached bool `json:"reached,omitempty"`
}

// Outbox holds undelivered messages. It is plain data persisted in the
// ledger, so a message that could not be sent is retried on a later run,
// in order, before that run's own messages.
type Outbox struct {
	Queue []Queued `json:"queue,omitempty"`
}

// Outcome is what became of one message at one route.
type Outcome string

// Outcomes of a delivery.
const (
	// OutcomeDelivered: the route accepted the message.
	OutcomeDelivered Outcome = "delivered"
	// OutcomeQueued: not delivered; kept in the outbox and retried on a
	// later run.
	OutcomeQueued Outcome = "queued"
	// OutcomeDropped: not delivered and given up on (too old, its route is
	// no longer configured, or the destination refused it: ErrRejected).
	OutcomeDropped Outcome = "dropped"
)

// Delivery is what happened to one message at one route in one Send.
type Delivery struct {
	Route   string // the route's name
	Message Message
	// Index is the message's position among Send's msgs; -1 for a message
	// retried from the outbox.
	Index   int
	Outcome Outcome
	Err     error // why it was not delivered; nil when OutcomeDelivered
	// Tried says an attempt was made in this Send; false when the message
	// waited behind an earlier failure of its route, for the route's
	// backoff, or for a cancelled context.
	Tried    bool
	Attempts int       // attempts so far, this Send's included: each request a route retried within a Send counts
	Next     time.Time // OutcomeQueued: the earliest time of the next attempt
	// ReachedBefore: a message from the outbox that another route had
	// already delivered in an earlier Send.
	ReachedBefore bool
}

// Retry reports whether the message came from the outbox.
func (d Delivery) Retry() bool { return d.Index < 0 }

// Defaults for Sender.
const (
	DefaultMaxAge   = 24 * time.Hour
	DefaultRetryMax = 30 * time.Minute
)

// Sender delivers messages to every route and keeps what failed in an
// Outbox. Routes work concurrently, so a slow one does not delay the
// others, and each route's failure is its own. Within one route messages
// go in order; after its first failure in a call the rest of its messages
// are queued without being tried, so one dead destination costs at most one
// attempt per run.
//
// Retries back off per route, in proportion to how long the route has been
// failing: after a failed attempt it waits a quarter of the time since its
// oldest undelivered message first failed, at most RetryMax. A route that
// just failed is tried again on the next run; one down for an hour, every
// 15 minutes; one down for longer, every RetryMax. Its new messages queue
// behind, in order.
type Sender struct {
	Notifiers []Notifier
	Clock     clock.Clock // nil means clock.UTC
	// MaxAge drops a message still undelivered this long after its first
	// failure (default 24h). MaxAttempts, when above zero, also drops it
	// after that many attempts.
	MaxAge      time.Duration
	MaxAttempts int
	// RetryMax caps the wait between two attempts of a route (default 30m).
	RetryMax time.Duration
}

// backoff returns how long a route whose oldest undelivered message first
// failed at since waits after failing again at now.
func (s Sender) backoff(since, now time.Time) time.Duration {
	max := s.RetryMax
	if max <= 0 {
		max = DefaultRetryMax
	}
	return min(now.Sub(since)/4, max)
}

// Send retries the outbox's messages, then delivers msgs to every route,
// and rewrites out.Queue with what is still undelivered. It never fails as
// a whole: it returns one Delivery per message and route, each with its
// outcome. Messages queued for a route that is no longer configured are
// dropped.
func (s Sender) Send(ctx context.Context, out *Outbox, msgs ...Message) []Delivery {
	clk := s.Clock
	if clk == nil {
		clk = clock.UTC{}
	}
	now := clk.Now()
	maxAge := s.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}

	type item struct {
		q     Queued
		index int
	}
	work := make([][]item, len(s.Notifiers))
	byName := make(map[string]int, len(s.Notifiers))
	for i, n := range s.Notifiers {
		byName[n.Name()] = i
	}
	var results []Delivery
	for _, q := range out.Queue {
		i, ok := byName[q.Notifier]
		if !ok {
			results = append(results, Delivery{Route: q.Notifier, Message: q.Message, Index: -1, Outcome: OutcomeDropped, Attempts: q.Attempts,
				Err: fmt.Errorf("route %s is no longer configured", q.Notifier)})
			continue
		}
		work[i] = append(work[i], item{q: q, index: -1})
	}
	for i := range work {
		for j, m := range msgs {
			work[i] = append(work[i], item{q: Queued{Notifier: s.Notifiers[i].Name(), Message: m}, index: j})
		}
	}

	per := make([][]Delivery, len(s.Notifiers))
	var wg sync.WaitGroup
	for i, n := range s.Notifiers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// blocked is why the route tries nothing more in this Send.
			var blocked error
			next := time.Time{}
			if len(work[i]) > 0 && work[i][0].index < 0 && work[i][0].q.Next.After(now) {
				head := work[i][0].q
				next = head.Next
				blocked = fmt.Errorf("not tried: %s is backing off until %s (failing since %s): %s",
					n.Name(), head.Next.UTC().Format(time.RFC3339), head.Since.UTC().Format(time.RFC3339), head.LastError)
			}
			for j := range work[i] {
				q := &work[i][j].q
				d := Delivery{Route: n.Name(), Message: q.Message, Index: work[i][j].index, Outcome: OutcomeDelivered, ReachedBefore: q.Reached}
				if blocked == nil && ctx.Err() != nil {
					blocked = fmt.Errorf("not tried: %w", ctx.Err())
				}
				if blocked == nil {
					d.Tried = true
					var tries int
					err := Deliver(withAttempts(ctx, &tries), n, q.Message)
					q.Attempts += max(tries, 1)
					if errors.Is(err, ErrRejected) {
						// Refused as it is: dropped and reported now, never
						// retried; the route's next message is tried as usual.
						d.Err, d.Outcome, d.Attempts = err, OutcomeDropped, q.Attempts
						per[i] = append(per[i], d)
						continue
					} else if err != nil {
						d.Err = err
						since := work[i][0].q.Since // the route's oldest undelivered message
						if since.IsZero() {
							since = now
						}
						next = now.Add(s.backoff(since, now))
						blocked = fmt.Errorf("not tried: %s failed earlier in this run: %w", n.Name(), err)
					}
				} else {
					d.Err = blocked
				}
				d.Attempts = q.Attempts
				if d.Err != nil {
					if q.Since.IsZero() {
						q.Since = now
					}
					if d.Tried || q.LastError == "" {
						q.LastError = d.Err.Error()
					}
					q.Next = next
					d.Next = next
					d.Outcome = OutcomeQueued
					if now.Sub(q.Since) >= maxAge || (s.MaxAttempts > 0 && q.Attempts >= s.MaxAttempts) {
						d.Outcome = OutcomeDropped
					}
				}
				per[i] = append(per[i], d)
			}
		}()
	}
	wg.Wait()

	delivered := map[Message]bool{}
	for i := range per {
		for _, d := range per[i] {
			if d.Outcome == OutcomeDelivered {
				delivered[d.Message] = true
			}
		}
	}
	out.Queue = out.Queue[:0]
	for i := range s.Notifiers {
		for j, d := range per[i] {
			if d.Outcome == OutcomeQueued {
				q := work[i][j].q
				q.Reached = q.Reached || delivered[q.Message]
				out.Queue = append(out.Queue, q)
			}
		}
		results = append(results, per[i]...)
	}
	return results
}

// attemptsKey is the context key of the counter a Send gives each delivery.
type attemptsKey struct{}

// withAttempts returns ctx carrying n, the count of attempts a notifier
// makes at one message: the one place a Delivery's Attempts comes from.
func withAttempts(ctx context.Context, n *int) context.Context {
	return context.WithValue(ctx, attemptsKey{}, n)
}

// attempted counts one attempt at the message being delivered, for a
// notifier that retries within a Send (each HTTP request); one that never
// calls it makes one attempt per Send.
func attempted(ctx context.Context) {
	if n, ok := ctx.Value(attemptsKey{}).(*int); ok {
		*n++
	}
}
