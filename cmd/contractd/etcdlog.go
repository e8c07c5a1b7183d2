package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The etcd client logs with zap. Its warnings and errors (a member that
// refuses the client's TLS, an auth failure, a client/server version the
// other does not speak, requests retried while a member is down) are what
// an operator needs to see when --etcd does not work: etcdLogger hands
// them to contractd's log at their level, "etcd client: " before the
// message and zap's fields as attributes. The client's info and debug
// lines (connections made, endpoints chosen) are left out. The same
// message is logged once per repeatWindow with how many were held back,
// since a request retried while a member is down warns at every attempt.

// repeatWindow is how long a message the etcd client repeats is held back
// after it was logged.
const repeatWindow = 30 * time.Second

// etcdLogger returns the zap logger the etcd client logs through: its
// warnings and errors go to log.
func etcdLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&etcdCore{log: log, repeats: &repeats{every: repeatWindow, now: time.Now}})
}

// etcdCore is a zapcore.Core writing to a slog.Logger.
type etcdCore struct {
	log     *slog.Logger
	attrs   []any // fields added with With, as slog attributes
	repeats *repeats
}

var _ zapcore.Core = (*etcdCore)(nil)

// level is the slog level of a zap level.
func level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// Enabled admits warnings and worse that log admits.
func (c *etcdCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.WarnLevel && c.log.Enabled(context.Background(), level(l))
}

// With returns the core with fields added to every record.
func (c *etcdCore) With(fields []zapcore.Field) zapcore.Core {
	out := *c
	out.attrs = append(append([]any(nil), c.attrs...), attrs(fields)...)
	return &out
}

// Check adds the core to ce when it admits the entry.
func (c *etcdCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write logs the entry, unless it is about a request its caller
// cancelled (the caller's decision: a shutdown, a campaign given up) or
// the same message was logged less than repeatWindow ago.
func (c *etcdCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && (status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled)) {
			return nil
		}
	}
	held, ok := c.repeats.allow(e.Message)
	if !ok {
		return nil
	}
	args := append(append([]any(nil), c.attrs...), attrs(fields)...)
	if held > 0 {
		args = append(args, "repeats_held_back", held)
	}
	c.log.Log(context.Background(), level(e.Level), "etcd client: "+e.Message, args...)
	return nil
}

// Sync does nothing: slog writes as it goes.
func (c *etcdCore) Sync() error { return nil }

// attrs turns zap fields into slog key-value pairs.
func attrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		if s, ok := v.(fmt.Stringer); ok {
			v = s.String()
		}
		out = append(out, k, v)
	}
	return out
}

// repeats holds back a message logged less than every ago, and says how
// many were held back when it is next logged.
type repeats struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	at   time.Time // when it was last logged
	held int       // how many were held back since
}

// allow reports whether msg may be logged now, and how many of it were
// held back since it last was.
func (r *repeats) allow(msg string) (held int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.seen == nil {
		r.seen = map[string]*repeat{}
	}
	p := r.seen[msg]
	if p != nil && now.Sub(p.at) < r.every {
		p.held++
		return 0, false
	}
	if p == nil {
		if len(r.seen) >= 1000 {
			// The client has a few dozen messages; a map that grows past
			// that holds messages with values in them: start again.
			r.seen = map[string]*repeat{}
		}
		p = &repeat{}
		r.seen[msg] = p
	}
	held = p.held
	p.at, p.held = now, 0
	return held, true
}
