package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// Log writes one line per message, to the engine's log or appended to a
// file: "2026-11-29T19:30:00Z zulip-health: restarted abiba
// (response_pipeline=blocked)" (format text, control characters escaped),
// or the message as one JSON object (format json).
//
// A file is opened for each message (O_APPEND, created 0600), so a rotated
// or deleted file is simply created again and a path that cannot be written
// is a failed delivery, queued and retried like any other.
type Log struct {
	name   string
	path   string
	format string
	mu     sync.Mutex
	w      io.Writer    // when path is ""
	slog   *slog.Logger // when path is "", instead of w
}

var _ Notifier = (*Log)(nil)

// NewLog returns a log notifier named "log" writing text lines to w.
func NewLog(w io.Writer) *Log { return &Log{name: "log", format: "text", w: w} }

func newLog(r contracts.NotifyRoute, deps Deps) (Notifier, error) {
	o := r.Options.(*contracts.LogOptions)
	l := &Log{name: r.Name, path: o.Path, format: o.Format, w: deps.Log, slog: deps.Logger}
	if l.path == "" && l.w == nil && l.slog == nil {
		return nil, fmt.Errorf("%w: no path and no engine log to write to", ErrConfig)
	}
	return l, nil
}

// Name returns the notifier's name.
func (l *Log) Name() string { return l.name }

// EngineLog reports whether l writes to the engine's own log (a route
// with no path): the engine then leaves its own line about each message
// out, so the journal has every alert once.
func (l *Log) EngineLog() bool { return l.path == "" }

// Notify writes the line. It returns the error of opening or writing the
// file (or the writer's).
func (l *Log) Notify(ctx context.Context, m Message) error {
	if l.path == "" && l.slog != nil {
		// The record's format is the log's (--log.format), not the route's.
		level, args := LogRecord(m)
		l.slog.Log(ctx, level, transports.Printable(m.Text), append([]any{"contract", transports.Printable(m.Contract)}, args...)...)
		return nil
	}
	line := m.Time.UTC().Format(time.RFC3339) + " " + m.Line() + "\n"
	if l.format == "json" {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode message: %w", err)
		}
		line = string(b) + "\n"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		if _, err := io.WriteString(l.w, line); err != nil {
			return fmt.Errorf("write log line: %w", err)
		}
		return nil
	}
	if err := AppendLine(l.path, line); err != nil {
		return err
	}
	return nil
}

// LogRecord is how a message goes to a slog log: its text is the record's
// message; its kind, agent, condition and severity are fields (the
// contract is the caller's to add). Messages
// that ask for attention (open, reminder, escalate, hold-down) are
// warnings; resolves and repairs are info.
func LogRecord(m Message) (slog.Level, []any) {
	level := slog.LevelInfo
	switch m.Kind {
	case KindOpen, KindReminder, KindEscalate, KindHoldDown:
		level = slog.LevelWarn
	}
	args := []any{"kind", m.Kind}
	for _, f := range [][2]string{{"agent", m.Agent}, {"condition", m.Condition}, {"severity", m.Severity}} {
		if f[1] != "" {
			args = append(args, f[0], transports.Printable(f[1]))
		}
	}
	return level, args
}

// AppendLine appends text to the file at path in one write, creating the
// file with mode 0600 when it does not exist. It returns the open, write or
// close error.
func AppendLine(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return f.Close()
}
