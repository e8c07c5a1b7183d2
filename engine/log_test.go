package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/notify"
)

// hasEvent reports whether a line of list starts with prefix (LogfLogger's
// "CONTRACT: MSG") and holds every one of fields ("agent=abiba").
func hasEvent(list []string, prefix string, fields ...string) bool {
	for _, s := range list {
		if !strings.HasPrefix(s, prefix) {
			continue
		}
		ok := true
		for _, f := range fields {
			ok = ok && strings.Contains(s, " "+f)
		}
		if ok {
			return true
		}
	}
	return false
}

// recordBook keeps the records a run logs, for asserting levels and fields.
type recordBook struct {
	mu   sync.Mutex
	recs []map[string]string // "level", "msg" and every attribute
}

func (b *recordBook) Enabled(context.Context, slog.Level) bool { return true }
func (b *recordBook) WithGroup(string) slog.Handler            { return b }
func (b *recordBook) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{b: b, attrs: as}
}

func (b *recordBook) Handle(_ context.Context, r slog.Record) error { return b.add(nil, r) }

func (b *recordBook) add(attrs []slog.Attr, r slog.Record) error {
	m := map[string]string{"level": r.Level.String(), "msg": r.Message}
	for _, a := range attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	b.mu.Lock()
	b.recs = append(b.recs, m)
	b.mu.Unlock()
	return nil
}

// find returns the records with msg.
func (b *recordBook) find(msg string) []map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]string
	for _, m := range b.recs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (b *recordBook) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for _, m := range b.recs {
		fmt.Fprintln(&s, m)
	}
	return s.String()
}

type withAttrs struct {
	b     *recordBook
	attrs []slog.Attr
}

func (w *withAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (w *withAttrs) WithGroup(string) slog.Handler            { return w }
func (w *withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{b: w.b, attrs: append(append([]slog.Attr(nil), w.attrs...), as...)}
}
func (w *withAttrs) Handle(_ context.Context, r slog.Record) error { return w.b.add(w.attrs, r) }

// Each event of a run is one record at its level, with the contract, the
// run's id and the event's fields: a repair that ran is info, one that did
// not help a warning, an opened incident a warning, a held repair info,
// and the run's end info when it found something. Before slog the engine
// logged "mesh: …" strings with no level and no fields.
func TestRunEventsHaveLevelsAndFields(t *testing.T) {
	h := newHarness(t)
	book := &recordBook{}
	h.w.set(func(w *world) {
		w.sticky = true
		w.pi = map[string]any{"connected": true, "response_pipeline": "blocked"}
		w.koby = map[string]any{"stuck": true}
	})
	eng, err := New(Options{
		StateDir: h.dir, Opener: h.w.opener, Clock: h.clock,
		Notifiers: []notify.Notifier{h.rec},
		Sleep:     func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil },
		Log:       slog.New(book),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Run(context.Background(), h.c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		msg, level string
		fields     map[string]string
	}{
		{"repair ran", "INFO", map[string]string{"agent": "abiba", "action": "pm2 restart abiba-zulip", "condition": "response_pipeline: blocked"}},
		{"repair did not help: condition still holds", "WARN", map[string]string{"agent": "abiba", "verify": "remediation failed", "severity": "critical"}},
		{"repair held", "INFO", map[string]string{"agent": "koby", "status": "report-only", "guard": "report-only"}},
		{"run finished", "INFO", map[string]string{"severity": "critical", "repairs_ran": "1", "repairs_failed": "0"}},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			recs := book.find(tc.msg)
			if len(recs) != 1 {
				t.Fatalf("%d records %q, want 1:\n%s", len(recs), tc.msg, book)
			}
			m := recs[0]
			want := map[string]string{"level": tc.level, "contract": "mesh", "run_id": rep.RunID}
			for k, v := range tc.fields {
				want[k] = v
			}
			for k, v := range want {
				if m[k] != v {
					t.Errorf("%s = %q, want %q (record %v)", k, m[k], v, m)
				}
			}
		})
	}
	var opened int
	for _, m := range book.recs {
		if m["kind"] == notify.KindOpen {
			opened++
			if m["level"] != "WARN" || m["agent"] == "" || !strings.Contains(m["msg"], " is critical") {
				t.Errorf("an opened incident is logged as %v; want a warning naming the agent", m)
			}
		}
	}
	if opened != 2 {
		t.Errorf("%d incidents opened in the log, want 2 (abiba, koby):\n%s", opened, book)
	}
}

// A run that finds everything healthy and does nothing ends at debug, so
// the default level keeps a daemon's journal to what happened.
func TestAHealthyRunEndsAtDebug(t *testing.T) {
	h := newHarness(t)
	book := &recordBook{}
	eng, err := New(Options{StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, Log: slog.New(book)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), h.c); err != nil {
		t.Fatal(err)
	}
	recs := book.find("run finished")
	if len(recs) != 1 || recs[0]["level"] != "DEBUG" || recs[0]["severity"] != "healthy" {
		t.Fatalf("run finished records %v, want one at DEBUG:\n%s", recs, book)
	}
	if len(book.recs) != 1 {
		t.Errorf("a healthy run logged more than its end:\n%s", book)
	}
}

// LogfLogger hands each record to a printf-style callback as one line,
// the contract first, fields after, control characters escaped.
func TestLogfLogger(t *testing.T) {
	var lines []string
	l := LogfLogger(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	l.With("contract", "mesh").WithGroup("g").Warn("repair failed", "agent", "abiba", "error", "exit 1\nforged line")
	l.Info("daemon started", "contracts", 3)
	want := []string{`mesh: repair failed g.agent=abiba g.error="exit 1\nforged line"`, "daemon started contracts=3"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
}
