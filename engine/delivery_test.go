package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
)

// A route that cannot be built this run stops no other route: the command
// delivers, the broken route's message is queued with the reason (a run
// error and a log line), and once the route can be built a later run
// delivers that message to it, and to it alone.
func TestUnbuildableRouteKeepsItsMessages(t *testing.T) {
	h := newHarness(t)
	pages := filepath.Join(t.TempDir(), "pages.txt")
	logRoute, err := contracts.NewNotifyRoute("log", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cmdRoute, err := contracts.NewNotifyRoute("command", "pages", map[string]string{"run": "cat >> " + pages})
	if err != nil {
		t.Fatal(err)
	}
	h.c.Notify = []contracts.NotifyRoute{logRoute, cmdRoute}
	var engineLog, logged bytes.Buffer
	var mu sync.Mutex // Logf may be called from several stages at once
	run := func(deps notify.Deps) *Report {
		t.Helper()
		eng, err := New(Options{StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, NotifyDeps: deps,
			Logf:  func(format string, args ...any) { mu.Lock(); fmt.Fprintf(&logged, format+"\n", args...); mu.Unlock() },
			Sleep: func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := eng.Run(t.Context(), h.c)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	h.w.set(func(w *world) { w.koby["stuck"] = true })

	// No engine log to write to: the log route cannot be built.
	rep := run(notify.Deps{})
	if len(rep.Alerts) != 1 {
		t.Fatalf("alerts %+v", rep.Alerts)
	}
	a := rep.Alerts[0]
	if got := a.Summary(); !strings.HasPrefix(got, "delivered: pages; queued: log (route log could not be built") || a.Sent {
		t.Fatalf("outcome %q (sent %v)", got, a.Sent)
	}
	b, _ := os.ReadFile(pages)
	if !strings.Contains(string(b), "[open] koby") {
		t.Errorf("the command route did not deliver: %q", b)
	}
	if !containsPrefix(rep.Errors, "notify: ") || !strings.Contains(logged.String(), "could not be built") {
		t.Errorf("errors %q, log %q: the broken route must be reported and logged", rep.Errors, logged.String())
	}

	// The engine has a log again: the queued message reaches it, once.
	h.clock.Advance(15 * time.Minute)
	rep = run(notify.Deps{Log: &engineLog})
	var retried *AlertReport
	for _, a := range rep.Alerts {
		if a.Retry {
			retried = a
		}
	}
	if retried == nil || retried.Summary() != "delivered: log" || !retried.ReachedBefore || retried.FirstSent() {
		t.Fatalf("second run's alerts %+v", rep.Alerts)
	}
	if n := strings.Count(engineLog.String(), "[open] koby"); n != 1 {
		t.Errorf("the log route wrote the queued message %d times: %q", n, engineLog.String())
	}
	if b, _ := os.ReadFile(pages); strings.Count(string(b), "[open] koby") != 1 {
		t.Errorf("the command route got the message again: %q", b)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// The log: file gets one line for the run and one per action and alert,
// with secrets redacted; one that cannot be written is a run error, never
// a failed run.
func TestLogKeyFile(t *testing.T) {
	h := newHarness(t)
	// The restart does not help, so the relay quotes every finding.
	h.w.set(func(w *world) {
		w.pi["response_pipeline"], w.pi["connected"], w.sticky = "blocked", "no: hunter2-secret\x1b[2J", true
	})
	h.c.Log = filepath.Join(t.TempDir(), "zulip-health.log")
	rep := h.run()
	b, err := os.ReadFile(h.c.Log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := 1 + len(rep.Actions) + len(rep.Alerts) + len(rep.Errors)
	if len(lines) != want || !strings.Contains(lines[0], " mesh run "+rep.RunID+": ") {
		t.Fatalf("%d lines, want %d (run, actions, alerts, errors):\n%s", len(lines), want, b)
	}
	if len(rep.Actions) == 0 || !strings.Contains(string(b), " action abiba ran: pm2 restart abiba-zulip") {
		t.Errorf("no line for the repair:\n%s", b)
	}
	if strings.Contains(string(b), "hunter2-secret") || strings.ContainsRune(string(b), '\x1b') || !strings.Contains(string(b), `no: ***\x1b[2J`) {
		t.Errorf("the log file shows a secret or a raw escape, or not the redacted value:\n%s", b)
	}
	if fi, err := os.Stat(h.c.Log); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}

	h.c.Log = filepath.Join(t.TempDir(), "missing", "x.log")
	h.clock.Advance(15 * time.Minute)
	rep = h.run()
	if !containsPrefix(rep.Errors, "log: open "+h.c.Log) {
		t.Errorf("errors %q, want the log file's", rep.Errors)
	}
}
