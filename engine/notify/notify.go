// Package notify delivers alert and repair messages: to a log, to a local
// command, to a webhook, and to Zulip. Each kind lives in its own file and is
// listed in one map and built from the options the contract's `notify`
// front matter gives.
//
// A failing notifier never fails a run: Send bounds every delivery by the
// caller's context and the notifier's own timeout, returns what failed so
// the engine can record it, and keeps undelivered messages in an Outbox that
// the ledger persists, so they are retried on the next run.
//
// Secrets (API keys, bearer tokens, webhook URLs' paths) never appear in an
// error or a log line.
package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
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
	Contract  string    `json:"contract"`
	Agent     string    `json:"agent,omitempty"`
	Condition string    `json:"condition,omitempty"`
	Kind      string    `json:"kind"`
	Severity  string    `json:"severity,omitempty"`
	Text      string    `json:"text"`
	Time      time.Time `json:"time"`
}

// Line renders the message as one human line: "CONTRACT: TEXT", with the
// kind in brackets for open, reminder, resolved, escalate and hold-down
// messages, e.g. "zulip-health: [resolved] abiba back to healthy".
func (m Message) Line() string {
	switch m.Kind {
	case KindRepair, "":
		return m.Contract + ": " + m.Text
	}
	return fmt.Sprintf("%s: [%s] %s", m.Contract, m.Kind, m.Text)
}

// Notifier delivers messages to one destination.
type Notifier interface {
	// Notify delivers m. It returns an error (never containing a secret)
	// when the message was not delivered; the context bounds it.
	Notify(ctx context.Context, m Message) error
	// Name identifies the notifier in the outbox and in reports: the
	// route's `name` option, else its kind.
	Name() string
}

// Deps are what notifiers need from the engine's host.
type Deps struct {
	// Log receives the log notifier's lines.
	Log io.Writer
	// Getenv reads the environment variables named by options such as
	// api_key_env (os.Getenv in main).
	Getenv func(string) string
	// Client sends HTTP requests; nil means a default client. Per-attempt
	// timeouts come from the notifier's options, not the client.
	Client *http.Client
}

// Constructor builds a notifier from a route's options.
type Constructor func(opts map[string]string, deps Deps) (Notifier, error)

// kinds lists every notifier kind, one file each. It is never modified.
var kinds = map[string]Constructor{
	"log":     newLog,
	"command": newCommand,
	"webhook": newWebhook,
	"zulip":   newZulip,
}

// ErrConfig is wrapped by every error about a route's options.
var ErrConfig = errors.New("notifier configuration")

// New builds one notifier. It returns an error wrapping ErrConfig for an
// unknown kind, an unknown option or a missing or malformed one.
func New(kind string, opts map[string]string, deps Deps) (Notifier, error) {
	mk, ok := kinds[kind]
	if !ok {
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%w: unknown notifier kind %q (want one of %s)", ErrConfig, kind, strings.Join(names, ", "))
	}
	n, err := mk(opts, deps)
	if err != nil {
		return nil, fmt.Errorf("notifier %s: %w", kind, err)
	}
	return n, nil
}

// NewAll builds the notifiers of a contract's routes, in order. Two routes
// with the same name get "#2", "#3" … appended so the outbox can tell them
// apart. It returns the first configuration error, with the route's position.
func NewAll(routes []contracts.NotifyRoute, deps Deps) ([]Notifier, error) {
	var out []Notifier
	seen := map[string]int{}
	for _, r := range routes {
		n, err := New(r.Kind, r.Options, deps)
		if err != nil {
			if r.Pos.File != "" {
				return nil, fmt.Errorf("%s: %w", r.Pos, err)
			}
			return nil, err
		}
		seen[n.Name()]++
		if c := seen[n.Name()]; c > 1 {
			n = renamed{Notifier: n, name: fmt.Sprintf("%s#%d", n.Name(), c)}
		}
		out = append(out, n)
	}
	return out, nil
}

type renamed struct {
	Notifier
	name string
}

func (r renamed) Name() string { return r.name }

// options checks opts against the allowed keys and returns a reader.
func options(opts map[string]string, allowed ...string) (opt, error) {
	ok := map[string]bool{"name": true}
	for _, a := range allowed {
		ok[a] = true
	}
	var bad []string
	for k := range opts {
		if !ok[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, fmt.Errorf("%w: unknown option %s", ErrConfig, strings.Join(bad, ", "))
	}
	return opt(opts), nil
}

type opt map[string]string

func (o opt) str(key, def string) string {
	if v, ok := o[key]; ok && v != "" {
		return v
	}
	return def
}

func (o opt) required(key string) (string, error) {
	if v := o[key]; v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%w: option %s is required", ErrConfig, key)
}

func (o opt) duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: option %s: %q is not a positive duration", ErrConfig, key, v)
	}
	return d, nil
}

func (o opt) count(key string, def int) (int, error) {
	v, ok := o[key]
	if !ok || v == "" {
		return def, nil
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != v {
		return 0, fmt.Errorf("%w: option %s: %q is not a count", ErrConfig, key, v)
	}
	return n, nil
}

func (o opt) format(def string, allowed ...string) (string, error) {
	f := o.str("format", def)
	for _, a := range allowed {
		if f == a {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: option format: %q (want %s)", ErrConfig, f, strings.Join(allowed, " or "))
}
