// Package notify delivers alert and repair messages: to a log or a file, to
// a local command, to a webhook, to Zulip, to Alertmanager, and by email.
// Each kind lives in its own file, is listed in one map, and is built from
// the options the contracts package decoded against the kind's schema
// (contracts.NotifierKinds), so a route that passes lint is a route the
// run can build.
//
// Routes are independent: a route that cannot be built or fails to deliver
// never stops another. Sender bounds every delivery by the caller's context
// and the notifier's own timeout, returns a typed outcome per message and
// route, and keeps undelivered messages in an Outbox that the ledger
// persists, so they are retried, with backoff, on later runs.
//
// Secrets (API keys, bearer tokens, webhook URLs' paths) never appear in an
// error or a log line.
package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/transports"
)

// Message kinds.
const (
	KindOpen     = "open"
	KindReminder = "reminder"
	KindResolved = "resolved"
	KindRepair   = "repair"
	KindEscalate = "escalate"
	KindHoldDown = "holddown"
)

// Message is one notification. Text is composed by the engine, e.g.
// "restarted abiba (response_pipeline=blocked)".
type Message struct {
	Contract  string `json:"contract"`
	Agent     string `json:"agent,omitempty"`
	Condition string `json:"condition,omitempty"`
	Kind      string `json:"kind"`
	// Severity is the severity the message carries: the incident's on an
	// open or reminder, the unit's now on a resolve (healthy, say).
	Severity string    `json:"severity,omitempty"`
	Text     string    `json:"text"`
	Time     time.Time `json:"time"`
	// IncidentSeverity and OpenedAt are the message's incident's: the
	// severity it was raised at and when it opened. Only open, reminder
	// and resolved messages have an incident; on a resolve they still say
	// what it was, so a destination that keeps alerts as state (the
	// alertmanager route) ends the very alert it started.
	IncidentSeverity string    `json:"incident_severity,omitempty"`
	OpenedAt         time.Time `json:"opened_at,omitzero"`
}

// Line renders the message as one human line: "CONTRACT: TEXT", with the
// kind in brackets for open, reminder, resolved, escalate and hold-down
// messages, e.g. "zulip-health: [resolved] abiba back to healthy". Control
// characters (a newline from a target's output) are escaped, so it is
// always exactly one line.
func (m Message) Line() string {
	switch m.Kind {
	case KindRepair, "":
		return transports.Printable(m.Contract + ": " + m.Text)
	}
	return transports.Printable(fmt.Sprintf("%s: [%s] %s", m.Contract, m.Kind, m.Text))
}

// Notifier delivers messages to one destination.
type Notifier interface {
	// Notify delivers m. It returns an error when the message was not
	// delivered, never containing a secret and not naming the route (the
	// caller does); the context bounds it.
	Notify(ctx context.Context, m Message) error
	// Name identifies the notifier in the outbox and in reports: the
	// route's `name` option, else its kind.
	Name() string
}

// PanicError is what Deliver returns for a notifier that panicked: the
// delivery failed (the message is queued and retried like any other), and
// the caller, which knows whose run it was, reports the panic.
type PanicError struct {
	Route string // the notifier's name
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (p *PanicError) Error() string { return fmt.Sprintf("notifier %s panicked: %v", p.Route, p.Value) }

// Deliver calls n.Notify(ctx, m), turning a panic of the notifier into a
// *PanicError: one route's bug fails its own deliveries, never the process
// or another route. It returns what Notify returned otherwise.
func Deliver(ctx context.Context, n Notifier, m Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Route: n.Name(), Value: v, Stack: debug.Stack()}
		}
	}()
	return n.Notify(ctx, m)
}

// Deps are what notifiers need from the engine's host.
type Deps struct {
	// Logger, when set, receives the messages of a log notifier without a
	// path, one record each (LogRecord), instead of Log.
	Logger *slog.Logger
	// Log receives the lines of a log notifier without a path.
	Log io.Writer
	// Getenv reads the environment variables named by options such as
	// api_key_env (os.Getenv in main).
	Getenv func(string) string
	// Client sends HTTP requests; nil means a default client. Per-attempt
	// timeouts come from the notifier's options, not the client.
	Client *http.Client
	// Clock is the time a message is sent at (an alert's endsAt is
	// reckoned from it); nil means the system clock. The engine gives its
	// own when this is nil.
	Clock clock.Clock
	// PageURL is the base URL of the daemon's status page (its --listen
	// address), which alerts link to; "" when there is none (a one-shot
	// run), unless a route names one.
	PageURL string
}

// Constructor builds a notifier from a route whose options the contracts
// package decoded against the kind's schema.
type Constructor func(r contracts.NotifyRoute, deps Deps) (Notifier, error)

// kinds lists every notifier kind, one file each; contracts.NotifierKinds
// declares their options. It is never modified.
var kinds = map[string]Constructor{
	"log":          newLog,
	"command":      newCommand,
	"webhook":      newWebhook,
	"zulip":        newZulip,
	"alertmanager": newAlertmanager,
	"email":        newEmail,
}

// ErrConfig is wrapped by every error about a route that cannot be built.
var ErrConfig = errors.New("notifier configuration")

// ErrRejected is wrapped by a delivery error when the destination refused
// the message itself (Alertmanager's 400 for an alert it cannot take, 401,
// 404 for a wrong URL): a configuration error that sending again cannot
// mend. Sender drops the message at once, reporting it, instead of
// retrying it on every run.
var ErrRejected = errors.New("refused by the destination (a configuration error; not retried)")

// Refresher is a notifier whose destination forgets an alert unless it is
// sent again: Alertmanager ends an alert at the endsAt it was given. The
// engine (at the end of each run) and the daemon (every Resend between
// runs) send it the contract's open incidents.
type Refresher interface {
	Notifier
	// Resend is how often the open incidents must be sent again.
	Resend() time.Duration
	// Refresh sends the open incidents (messages of kind reminder) again,
	// all at once. It returns an error naming each destination that did
	// not take them, even when another did; the context bounds it.
	Refresh(ctx context.Context, open []Message) error
}

// New builds the notifier of one route. It returns an error wrapping
// ErrConfig for an unknown kind, options of another kind, or what the
// engine's host lacks (a log route without a path and no log writer).
func New(r contracts.NotifyRoute, deps Deps) (Notifier, error) {
	mk, ok := kinds[r.Kind]
	if !ok {
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%w: unknown notifier kind %q (want one of %s)", ErrConfig, r.Kind, strings.Join(names, ", "))
	}
	if r.Options == nil || r.Options.NotifierKind() != r.Kind {
		return nil, fmt.Errorf("%w: route %s has no %s options", ErrConfig, r.Name, r.Kind)
	}
	if r.Name == "" {
		r.Name = r.Kind
	}
	n, err := mk(r, deps)
	if err != nil {
		return nil, fmt.Errorf("notifier %s: %w", r.Name, err)
	}
	return n, nil
}

// NewAll builds the notifiers of a contract's routes, in order, one per
// route whatever happens: a route that cannot be built becomes a notifier
// whose every delivery fails with the reason, so its messages are queued
// and retried like any other undelivered message and no route ever stops
// another. It returns the build errors too, each prefixed with the route's
// position when it has one.
func NewAll(routes []contracts.NotifyRoute, deps Deps) ([]Notifier, []error) {
	out := make([]Notifier, 0, len(routes))
	var errs []error
	for _, r := range routes {
		if r.Name == "" {
			r.Name = r.Kind
		}
		n, err := New(r, deps)
		if err != nil {
			if r.Pos.File != "" {
				err = fmt.Errorf("%s: %w", r.Pos, err)
			}
			errs = append(errs, err)
			n = unbuilt{name: r.Name, err: err}
		}
		out = append(out, n)
	}
	return out, errs
}

// unbuilt stands in for a route that could not be built.
type unbuilt struct {
	name string
	err  error
}

var _ Notifier = unbuilt{}

func (u unbuilt) Name() string { return u.name }

func (u unbuilt) Notify(context.Context, Message) error {
	return fmt.Errorf("route %s could not be built: %w", u.name, u.err)
}
