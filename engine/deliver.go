package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// outgoing is a message of this run and the alert it reports.
type outgoing struct {
	msg    notify.Message
	report *AlertReport
}

// buildNotifiers builds one notifier per notify route, plus the engine's
// own. A route that cannot be built stays in the list as a notifier whose
// deliveries fail, so its messages are queued and retried like any other;
// the reason is an error open says (s) and a log line.
func (r *run) buildNotifiers(s *said) []notify.Notifier {
	own, errs := notify.NewAll(r.c.Notify, r.e.opts.NotifyDeps)
	for _, err := range errs {
		s.error("notify: " + err.Error())
		r.event(slog.LevelError, "notify route cannot be built", "error", err)
	}
	for _, n := range own {
		if l, ok := n.(*notify.Log); ok && l.EngineLog() {
			r.logRoute = true // it writes each message to the log: once is enough
		}
	}
	return append(own, r.e.opts.Notifiers...)
}

// deliver is the sixth phase: it takes the run's messages, retries the
// outbox, then delivers the messages to every route, and records per
// message and route what happened in the message's AlertReport. A failing
// route never fails the run nor stops another: its messages stay in the
// ledger's outbox and are retried with backoff; its failure is an error it
// says, a log line, and an outcome in alerts[]. The alerts it says are the
// outbox's retries.
//
// The messages and their incidents are written to the ledger first
// (write-ahead): a ledger that cannot be written means nothing is sent, so
// a state dir that cannot record a page does not repeat it every run; each
// message goes to the log (stderr, the journal) instead, and the returned
// error fails the run.
//
// Then the routes that keep alerts as state (alertmanager) are sent every
// open incident again (resendOpen), so none expires there while it is open.
func (r *run) deliver(ctx context.Context, out []outgoing) (said, error) {
	var s said
	r.enter("deliver", &s)
	if r.e.opts.DryRun {
		return s, nil
	}
	if len(out) > 0 || len(r.ledger.Outbox.Queue) > 0 {
		if err := r.send(ctx, out, &s); err != nil {
			return s, err
		}
	}
	r.resendOpen(ctx, &s)
	return s, nil
}

// send delivers the run's messages and the outbox's, as deliver says.
func (r *run) send(ctx context.Context, out []outgoing, s *said) error {
	msgs := make([]notify.Message, len(out))
	for i, o := range out {
		msgs[i] = o.msg
	}
	r.ledger.Sending = msgs
	if r.ledger.Run != nil {
		r.ledger.Run.Messages = msgs
	}
	if err := r.persist(); err != nil {
		for _, o := range out {
			o.report.Error = "not sent: " + err.Error()
			r.event(slog.LevelError, "alert not sent", "error", err, "kind", o.msg.Kind, "agent", o.msg.Agent, "text", o.msg.Text)
		}
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	sender := notify.Sender{Notifiers: r.notifiers, Clock: r.e.opts.Clock}
	deliveries := sender.Send(sctx, &r.ledger.Outbox, msgs...)
	// The routes have the messages (delivered, or queued in the outbox):
	// recorded at once, as a repair's end is, so a process stopped from
	// here on leaves nothing for the next run to send again. Only a stop
	// between a route's delivery and this write repeats the message.
	r.ledger.Sending = nil
	if err := r.persist(); err != nil {
		s.error("ledger after delivery: " + err.Error())
		r.event(slog.LevelError, "ledger not written after delivery", "error", err)
	}

	type routeTrouble struct {
		queued, dropped int
		err             string // the first error of an attempt, else the first error
		tried           bool   // err is an attempt's
		next            time.Time
	}
	trouble := map[string]*routeTrouble{}
	var troubled []string
	retried := map[notify.Message]*AlertReport{}
	for _, d := range deliveries {
		rd := RouteDelivery{Route: d.Route, Outcome: store.Outcome(d.Outcome), Tried: d.Tried, Attempts: d.Attempts, NextAttempt: d.Next}
		if d.Err != nil {
			rd.Error = transports.Redact(d.Err.Error(), r.redact)
		}
		if np := (*notify.PanicError)(nil); errors.As(d.Err, &np) {
			// Failed like any delivery (queued, retried), and a bug: the
			// run records everything, then ends as an engine failure.
			r.notePanic(&PanicError{Where: "notifier " + np.Route, Value: np.Value, Stack: np.Stack})
		}
		var ar *AlertReport
		if d.Retry() {
			if ar = retried[d.Message]; ar == nil {
				m := d.Message
				ar = &AlertReport{Key: guard.IncidentKey(m.Contract, m.Agent, m.Condition), Agent: m.Agent, Condition: m.Condition,
					Kind: m.Kind, Text: m.Text, Retry: true, Time: m.Time, ReachedBefore: d.ReachedBefore}
				retried[d.Message] = ar
				s.alerts = append(s.alerts, ar)
			}
		} else {
			ar = out[d.Index].report
		}
		ar.Sent = (len(ar.Routes) == 0 || ar.Sent) && d.Outcome == notify.OutcomeDelivered
		ar.Routes = append(ar.Routes, rd)
		if d.Outcome == notify.OutcomeDelivered {
			continue
		}
		t := trouble[d.Route]
		if t == nil {
			t = &routeTrouble{}
			trouble[d.Route] = t
			troubled = append(troubled, d.Route)
		}
		if t.err == "" || (d.Tried && !t.tried) {
			t.err, t.tried = rd.Error+rd.AttemptsNote(), d.Tried
		}
		if d.Outcome == notify.OutcomeDropped {
			t.dropped++
			r.event(slog.LevelWarn, "alert dropped: undeliverable", "route", d.Route, "kind", d.Message.Kind, "agent", d.Message.Agent, "text", d.Message.Text, "error", rd.Error)
		} else {
			t.queued++
			t.next = d.Next
		}
	}
	for _, o := range out {
		if ar := o.report; !ar.Sent && ar.Error == "" {
			if len(ar.Routes) == 0 {
				ar.Error = "no notify routes"
			} else {
				ar.Error = "not delivered: " + ar.Summary()
			}
		}
	}
	for _, name := range troubled {
		t := trouble[name]
		var what []string
		if t.queued > 0 {
			w := fmt.Sprintf("%d message(s) queued for retry", t.queued)
			if t.next.After(r.e.opts.Clock.Now()) {
				w += " after " + t.next.UTC().Format(time.RFC3339)
			}
			what = append(what, w)
		}
		if t.dropped > 0 {
			what = append(what, fmt.Sprintf("%d message(s) dropped", t.dropped))
		}
		line := fmt.Sprintf("notify %s: %s: %s", name, strings.Join(what, ", "), t.err)
		s.error(line)
		r.event(slog.LevelWarn, "alerts not delivered", "route", name, "queued", t.queued, "dropped", t.dropped, "error", t.err)
	}
	return nil
}
