package notify

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Log writes one line per message to an io.Writer:
// "2026-11-29T19:30:00Z zulip-health: restarted abiba (response_pipeline=blocked)".
type Log struct {
	name string
	mu   sync.Mutex
	w    io.Writer
}

var _ Notifier = (*Log)(nil)

// NewLog returns a log notifier writing to w.
func NewLog(w io.Writer) *Log { return &Log{name: "log", w: w} }

func newLog(opts map[string]string, deps Deps) (Notifier, error) {
	o, err := options(opts)
	if err != nil {
		return nil, err
	}
	if deps.Log == nil {
		return nil, fmt.Errorf("%w: no log writer", ErrConfig)
	}
	return &Log{name: o.str("name", "log"), w: deps.Log}, nil
}

// Name returns the notifier's name.
func (l *Log) Name() string { return l.name }

// Notify writes the line; it returns the writer's error.
func (l *Log) Notify(_ context.Context, m Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := fmt.Fprintf(l.w, "%s %s\n", m.Time.UTC().Format(time.RFC3339), m.Line()); err != nil {
		return fmt.Errorf("write log line: %w", err)
	}
	return nil
}
