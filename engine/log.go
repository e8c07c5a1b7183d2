package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// The engine logs events, not lines: each is one slog record at its level
// with the run's "contract" and "run_id" and the event's own fields
// ("agent", "action", "condition", "verify", "error", …), so a journal
// filtered by priority, or a query on a field, finds what happened. The
// levels:
//
//   - error: the engine could not do its job (state that cannot be read or
//     written, a panic, a notify route that cannot be built);
//   - warn: something an operator acts on (a repair that failed or did not
//     help, repairs escalated, an alert opened, a route that did not
//     deliver, a run interrupted);
//   - info: what the engine did or held back (a repair that ran and was
//     verified, a repair a guard held, a resolved incident, a run that found
//     something);
//   - debug: a run that found everything healthy and did nothing.
//
// Every string and error value is redacted (the contract's secrets) and
// made Printable (control characters from targets escaped) before it
// reaches the handler.

// LogfLogger returns a logger that hands each record to logf as one human
// line, "CONTRACT: MSG key=value …" (the contract field, when there is one,
// as the line's prefix; a value with a space in double quotes), at every
// level. It is for callers that take printf-style callbacks (tests,
// embedders); contractd itself logs through a slog handler.
func LogfLogger(logf func(format string, args ...any)) *slog.Logger {
	return slog.New(&logfHandler{logf: logf})
}

type logfHandler struct {
	logf   func(format string, args ...any)
	attrs  []slog.Attr
	prefix string // of attribute keys, from WithGroup
}

func (h *logfHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logfHandler) Handle(_ context.Context, rec slog.Record) error {
	var contract string
	var b strings.Builder
	b.WriteString(transports.Printable(rec.Message))
	add := func(a slog.Attr) {
		a.Value = a.Value.Resolve()
		if a.Equal(slog.Attr{}) {
			return
		}
		v := transports.Printable(a.Value.String())
		if a.Key == "contract" && contract == "" {
			contract = v
			return
		}
		if strings.ContainsRune(v, ' ') || v == "" {
			v = `"` + v + `"`
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(func(a slog.Attr) bool {
		a.Key = h.prefix + a.Key
		add(a)
		return true
	})
	if contract != "" {
		h.logf("%s: %s", contract, b.String())
		return nil
	}
	h.logf("%s", b.String())
	return nil
}

func (h *logfHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *logfHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// discardLogger logs nothing.
var discardLogger = slog.New(slog.DiscardHandler)

// event logs one event of the run at level, with the run's contract and
// run_id; msg and every string or error value in args (key, value pairs or
// slog.Attrs) are redacted and made Printable.
func (r *run) event(level slog.Level, msg string, args ...any) {
	clean := make([]any, len(args))
	for i, a := range args {
		clean[i] = r.cleanValue(a)
	}
	r.log.Log(r.ctx, level, r.clean(msg), clean...)
}

// clean is s as the run keeps any text: secrets redacted, control
// characters escaped.
func (r *run) clean(s string) string {
	return transports.Printable(transports.Redact(s, r.redact))
}

// unitEvent is event about unit u: its agent (or stage, for an agentless
// unit) is the field "agent".
func (r *run) unitEvent(level slog.Level, u *unit, msg string, args ...any) {
	r.event(level, msg, append([]any{"agent", u.name()}, args...)...)
}

func (r *run) cleanValue(a any) any {
	switch v := a.(type) {
	case string:
		return r.clean(v)
	case error:
		return r.clean(v.Error())
	case time.Time, time.Duration:
		return v
	case fmt.Stringer:
		return r.clean(v.String())
	case slog.Attr:
		if v.Value.Kind() == slog.KindString || v.Value.Kind() == slog.KindAny {
			v.Value = slog.StringValue(r.clean(v.Value.String()))
		}
		return v
	}
	return a
}

// logMessage logs a message the run sends as a log route would
// (notify.LogRecord): its text, at warn for what asks for attention.
func (r *run) logMessage(m notify.Message) {
	level, args := notify.LogRecord(m)
	clean := make([]any, len(args))
	for i, a := range args {
		clean[i] = r.cleanValue(a)
	}
	r.log.Log(r.ctx, level, r.clean(m.Text), clean...)
}

// logEnd logs how a run ended, unless the engine failed (the caller says
// that, knowing whether it was a shutdown, a fenced write or a failure): a
// run that found everything healthy and did nothing at debug; one that
// found something, acted or alerted at info; a skipped run at info.
func logEnd(ctx context.Context, log *slog.Logger, rep *Report, err error) {
	switch {
	case err != nil || rep == nil:
		return
	case rep.Skipped != "":
		log.Info("run skipped", "reason", rep.Skipped)
		return
	}
	ran, failed := 0, 0
	for _, a := range rep.Actions {
		switch a.Status {
		case ActionRan:
			ran++
		case ActionFailed:
			failed++
		}
	}
	level := slog.LevelInfo
	if rep.OverallSeverity == contracts.SeverityHealthy && len(rep.Actions) == 0 && len(rep.Alerts) == 0 && len(rep.Errors) == 0 {
		level = slog.LevelDebug
	}
	log.Log(ctx, level, "run finished", "severity", rep.OverallSeverity.String(), "duration_ms", rep.DurationMS,
		"repairs_ran", ran, "repairs_failed", failed, "alerts", len(rep.Alerts), "errors", len(rep.Errors))
}
