package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The etcd client's warnings and errors reach contractd's log at their
// level with their fields; its info lines do not; a message repeated
// within the window is logged once, and the next says how many were held
// back.
func TestEtcdClientLogReachesOurLogAtItsLevel(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	core := &etcdCore{log: log, repeats: &repeats{every: 30 * time.Second, now: func() time.Time { return now }}}
	zl := zap.New(core).With(zap.String("target", "etcd-endpoints://x"))

	zl.Info("dialing")
	zl.Warn("retrying of unary invoker failed", zap.Error(status.Error(codes.Canceled, "context canceled"))) // the caller's own doing
	zl.Warn("retrying of unary invoker failed", zap.Error(errors.New("etcdserver: no leader")), zap.Uint("attempt", 0))
	zl.Error("auth failed", zap.Error(errors.New("authentication failed, invalid user ID or password")))
	zl.Warn("retrying of unary invoker failed", zap.Uint("attempt", 1))
	zl.Warn("retrying of unary invoker failed", zap.Uint("attempt", 2))
	now = now.Add(31 * time.Second)
	zl.Warn("retrying of unary invoker failed", zap.Uint("attempt", 3))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=WARN msg="etcd client: retrying of unary invoker failed" target=etcd-endpoints://x`,
		`level=ERROR msg="etcd client: auth failed" target=etcd-endpoints://x error="authentication failed, invalid user ID or password"`,
		`level=WARN msg="etcd client: retrying of unary invoker failed" target=etcd-endpoints://x attempt=3 repeats_held_back=2`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) && !sameAttrs(lines[i], w) {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], `error="etcdserver: no leader"`) || !strings.Contains(lines[0], "attempt=0") {
		t.Errorf("the first warning lost its fields: %s", lines[0])
	}
}

// sameAttrs compares two logfmt lines as sets of fields (zap's fields
// come out of a map, in any order).
func sameAttrs(got, want string) bool {
	g := map[string]bool{}
	for _, f := range splitLogfmt(got) {
		g[f] = true
	}
	for _, f := range splitLogfmt(want) {
		if !g[f] {
			return false
		}
	}
	return true
}

func splitLogfmt(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(out, cur.String())
}
