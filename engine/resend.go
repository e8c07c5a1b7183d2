package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
)

// Resend is what one route's resend of the open incidents did.
type Resend struct {
	Route     string
	Incidents int   // the open incidents posted
	Err       error // nil when every destination took them
	// New says Err is news: the route's previous resend did not fail this
	// way, so it is worth a log line; a repeat of the same error is not.
	New bool
	// Recovered says the route's previous resend failed and this one worked.
	Recovered bool
}

// refreshers returns the notifiers that keep alerts as state.
func refreshers(ns []notify.Notifier) []notify.Refresher {
	var out []notify.Refresher
	for _, n := range ns {
		if rf, ok := n.(notify.Refresher); ok {
			out = append(out, rf)
		}
	}
	return out
}

// ResendEvery returns how often the contract's open incidents must be
// posted again: the shortest resend of its routes that keep alerts as
// state (alertmanager); 0 when it has none.
func (e *Engine) ResendEvery(c *contracts.Contract) time.Duration {
	ns, _ := notify.NewAll(c.Notify, e.opts.NotifyDeps)
	var every time.Duration
	for _, rf := range refreshers(ns) {
		if d := rf.Resend(); every == 0 || d < every {
			every = d
		}
	}
	return every
}

// Resend posts the contract's open incidents again to each of its routes
// that keeps alerts as state (notify.Refresher: alertmanager), so that none
// expires there while it is open; the daemon calls it every ResendEvery
// between runs, and every run does the same at its end. It holds the run
// lock while it reads the ledger and posts, so it never posts an incident
// a run is resolving. A route whose resend fails keeps its error in the
// ledger, so the failure is New only once.
//
// It returns one Resend per such route. It fails with an error wrapping
// store.ErrLocked when a run holds the lock (that run posts them at its
// end), and with the store's error when the ledger cannot be read or
// written; it does nothing in a dry run.
func (e *Engine) Resend(ctx context.Context, c *contracts.Contract) ([]Resend, error) {
	if e.opts.DryRun {
		return nil, nil
	}
	ns, _ := notify.NewAll(c.Notify, e.opts.NotifyDeps) // a route that cannot be built is reported by the runs
	rfs := refreshers(ns)
	if len(rfs) == 0 {
		return nil, nil
	}
	st, err := e.openStore()
	if err != nil {
		return nil, err
	}
	unlock, err := st.Lock(ctx, c.Name, 0)
	if err != nil {
		return nil, fmt.Errorf("resend %s: %w", c.Name, err)
	}
	defer unlock()
	l, err := ReadLedger(st, c.Name)
	if err != nil {
		return nil, fmt.Errorf("resend %s: %w", c.Name, err)
	}
	out, changed := resend(ctx, c.Name, l, rfs, e.opts.Clock.Now())
	if changed {
		if err := WriteLedger(st, c.Name, l); err != nil {
			return out, fmt.Errorf("resend %s: ledger: %w", c.Name, err)
		}
	}
	return out, nil
}

// resendOpen posts the open incidents again at the end of a run, to the
// routes that keep alerts as state; a new failure is an error deliver says
// (s) and a log line, a repeat is neither (the ledger keeps it).
func (r *run) resendOpen(ctx context.Context, s *said) {
	rfs := refreshers(r.notifiers)
	if len(rfs) == 0 || ctx.Err() != nil {
		return // an interrupted run leaves them to the next resend
	}
	sctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	out, _ := resend(sctx, r.c.Name, r.ledger, rfs, r.e.opts.Clock.Now())
	for _, rs := range out {
		switch {
		case rs.Err != nil && rs.New:
			line := fmt.Sprintf("notify %s: resend of %d open incident(s) failed: %v", rs.Route, rs.Incidents, rs.Err)
			s.error(line)
			r.event(slog.LevelWarn, line, "route", rs.Route, "incidents", rs.Incidents)
		case rs.Recovered:
			r.event(slog.LevelInfo, fmt.Sprintf("notify %s: resend works again (%d open incident(s))", rs.Route, rs.Incidents), "route", rs.Route, "incidents", rs.Incidents)
		}
	}
}

// resend posts l's open incidents to every route in rfs and records each
// route's failure in l.ResendErrors; it reports whether l changed.
func resend(ctx context.Context, contract string, l *Ledger, rfs []notify.Refresher, now time.Time) ([]Resend, bool) {
	open := openMessages(contract, l, now)
	out := make([]Resend, 0, len(rfs))
	changed := false
	for _, rf := range rfs {
		rs := Resend{Route: rf.Name(), Incidents: len(open)}
		rs.Err = deliverRefresh(ctx, rf, open)
		prev, failed := l.ResendErrors[rs.Route]
		switch {
		case rs.Err != nil && (!failed || prev != rs.Err.Error()):
			rs.New = true
			if l.ResendErrors == nil {
				l.ResendErrors = map[string]string{}
			}
			l.ResendErrors[rs.Route] = rs.Err.Error()
			changed = true
		case rs.Err == nil && failed:
			rs.Recovered = true
			delete(l.ResendErrors, rs.Route)
			changed = true
		}
		out = append(out, rs)
	}
	return out, changed
}

// deliverRefresh is rf.Refresh with a panic made a failed resend.
func deliverRefresh(ctx context.Context, rf notify.Refresher, open []notify.Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &notify.PanicError{Route: rf.Name(), Value: v, Stack: debug.Stack()}
		}
	}()
	return rf.Refresh(ctx, open)
}

// openMessages returns a reminder for every open incident of l that the
// routes may hear of (alert_on kept none of its messages back), in key
// order, saying what the incident's last message said.
func openMessages(contract string, l *Ledger, now time.Time) []notify.Message {
	keys := make([]string, 0, len(l.Incidents))
	for k, inc := range l.Incidents {
		if inc != nil && !inc.Resolved && !inc.Unsent {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]notify.Message, 0, len(keys))
	for _, k := range keys {
		inc := l.Incidents[k]
		text := inc.Text
		if text == "" {
			text = fmt.Sprintf("%s: %s (open since %s)", inc.Agent, inc.Condition, inc.OpenedAt.UTC().Format(time.RFC3339))
		}
		out = append(out, notify.Message{Contract: contract, Agent: inc.Agent, Condition: inc.Condition, Kind: notify.KindReminder,
			Severity: inc.Severity, IncidentSeverity: inc.Severity, OpenedAt: inc.OpenedAt, Text: text, Time: now})
	}
	return out
}
