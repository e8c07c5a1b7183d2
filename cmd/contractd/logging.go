package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/contractd/contractd/transports"
)

// Logs follow the conventions of Prometheus and Alertmanager (their
// promslog): log/slog records on stderr, --log.level debug|info|warn|error,
// --log.format logfmt (slog's text handler: time=… level=… msg=… key=value)
// or json, one record a line. Under systemd (stderr is the journal stream
// JOURNAL_STREAM names) a record carries no time of its own, the journal
// stamps it, and starts with its level as a syslog priority, "<4>" for a
// warning, as sd-daemon(3) describes, so `journalctl -p warning` finds the
// warnings.

// logFlags are --log.level and --log.format, on every command that logs.
type logFlags struct {
	level  slog.Level
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	l.format = "logfmt"
	fs.Var(levelFlag{&l.level}, "log.level", "log only records at or above this `LEVEL`: debug, info, warn or error")
	fs.Var(formatFlag{&l.format}, "log.format", "log record `FORMAT`: logfmt or json")
}

// levelFlag reads --log.level.
type levelFlag struct{ l *slog.Level }

func (f levelFlag) String() string {
	if f.l == nil {
		return ""
	}
	return strings.ToLower(f.l.String())
}

func (f levelFlag) Set(v string) error {
	switch v {
	case "debug":
		*f.l = slog.LevelDebug
	case "info":
		*f.l = slog.LevelInfo
	case "warn":
		*f.l = slog.LevelWarn
	case "error":
		*f.l = slog.LevelError
	default:
		return fmt.Errorf("%q is not a level: give debug, info, warn or error", v)
	}
	return nil
}

// formatFlag reads --log.format.
type formatFlag struct{ f *string }

func (f formatFlag) String() string {
	if f.f == nil {
		return ""
	}
	return *f.f
}

func (f formatFlag) Set(v string) error {
	if v != "logfmt" && v != "json" {
		return fmt.Errorf("%q is not a log format: give logfmt or json", v)
	}
	*f.f = v
	return nil
}

// logger returns the command's logger on m.Stderr, as lf asks. Under
// systemd (journalStream) records carry no time and start with their
// priority.
func (m *Main) logger(lf logFlags) *slog.Logger {
	journal := journalStream(m.Getenv("JOURNAL_STREAM"), m.Stderr)
	opts := &slog.HandlerOptions{
		Level: lf.level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				if journal {
					return slog.Attr{} // the journal stamps every line
				}
				return slog.Attr{Key: a.Key, Value: slog.TimeValue(a.Value.Time().UTC())}
			}
			// What a target said never starts a line of its own nor
			// reaches the terminal as a control sequence.
			switch a.Value.Kind() {
			case slog.KindDuration:
				// 30s, not 30000000000: JSON as logfmt says it.
				a.Value = slog.StringValue(a.Value.Duration().String())
			case slog.KindString:
				a.Value = slog.StringValue(transports.Printable(a.Value.String()))
			case slog.KindAny:
				if err, ok := a.Value.Any().(error); ok {
					a.Value = slog.StringValue(transports.Printable(err.Error()))
				}
			}
			return a
		},
	}
	w := m.Stderr
	var pw *priorityWriter
	if journal {
		pw = &priorityWriter{w: m.Stderr}
		w = pw
	}
	var h slog.Handler
	if lf.format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	if pw != nil {
		h = &journalHandler{Handler: h, w: pw}
	}
	return slog.New(h)
}

// journalStream reports whether w is the journal's stream: JOURNAL_STREAM
// ("DEVICE:INODE", set by systemd for a unit whose output goes to the
// journal) names the file w is. A command run by hand from a unit's shell,
// or with stderr redirected, inherits the variable but writes elsewhere.
func journalStream(env string, w io.Writer) bool {
	dev, ino, ok := strings.Cut(env, ":")
	if !ok {
		return false
	}
	f, isFile := w.(*os.File)
	if !isFile {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return dev == strconv.FormatUint(uint64(st.Dev), 10) && ino == strconv.FormatUint(st.Ino, 10)
}

// journalPriority is the syslog priority of a level, as sd-daemon(3)'s
// prefixes: 3 error, 4 warning, 6 info, 7 debug.
func journalPriority(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>"
	case l >= slog.LevelWarn:
		return "<4>"
	case l >= slog.LevelInfo:
		return "<6>"
	}
	return "<7>"
}

// journalHandler prefixes each record the handler writes with its
// priority. The handler writes a record in one Write; w is shared by the
// handler and its WithAttrs/WithGroup copies, and its mutex holds the
// prefix for that one Write.
type journalHandler struct {
	slog.Handler
	w *priorityWriter
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.w.prefix = journalPriority(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{Handler: h.Handler.WithAttrs(as), w: h.w}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{Handler: h.Handler.WithGroup(name), w: h.w}
}

// priorityWriter writes prefix before each record; the caller holds mu.
type priorityWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *priorityWriter) Write(b []byte) (int, error) {
	line := make([]byte, 0, len(p.prefix)+len(b))
	line = append(append(line, p.prefix...), b...)
	if _, err := p.w.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}
