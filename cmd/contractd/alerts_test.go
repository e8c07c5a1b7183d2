package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/contractd/contractd/engine/notify"
)

// selfHeal is a contract whose probe fails until its repair creates the
// marker file, with three notify routes: a log file, a command appending
// to a file, and a webhook. Its probe prints a secret and a terminal escape
// that must reach no destination as they are.
const selfHeal = `---
name: selfheal
runtime_contract: 2
secrets: [SELFHEAL_TOKEN]
log: {{runlog}}
notify:
  - {log: {path: {{F}}}}
  - {command: {run: "cat >> {{G}}"}}
  - {webhook: {url: "http://{{hook}}/hook", retries: 0, timeout: 2s}}
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe}" + `
if test -f {{marker}}; then echo up; else printf 'down %s \033[2J\n' "$SELFHEAL_TOKEN"; fi
` + "```" + `
Expected: ` + "`up`" + `

| Condition | Action |
|-----------|--------|
| ` + "`probe.stdout != \"up\"`" + ` | ` + "`touch {{marker}}`" + ` |
`

const selfHealToken = "s3lf-h3al-t0ken"

// hookReceiver is a real HTTP server on loopback that records each POST.
type hookReceiver struct {
	mu     sync.Mutex
	bodies []notify.Message
	srv    *http.Server
	addr   string
}

func startReceiver(t *testing.T, addr string) *hookReceiver {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	h := &hookReceiver{addr: l.Addr().String()}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.bodies = append(h.bodies, m)
		h.mu.Unlock()
	})}
	go h.srv.Serve(l)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

func (h *hookReceiver) texts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range h.bodies {
		out = append(out, m.Text)
	}
	return out
}

// closedPort returns a loopback address nothing listens on (yet).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

type selfHealCase struct {
	dir, contract, state       string
	runlog, f, g, marker, hook string
}

func newSelfHeal(t *testing.T, hook string) *selfHealCase {
	t.Helper()
	t.Setenv("SELFHEAL_TOKEN", selfHealToken)
	dir := t.TempDir()
	c := &selfHealCase{dir: dir, contract: filepath.Join(dir, "selfheal.md"), state: filepath.Join(dir, "state"),
		runlog: filepath.Join(dir, "run.log"), f: filepath.Join(dir, "F.log"), g: filepath.Join(dir, "G.txt"),
		marker: filepath.Join(dir, "marker"), hook: hook}
	text := strings.NewReplacer("{{runlog}}", c.runlog, "{{F}}", c.f, "{{G}}", c.g, "{{marker}}", c.marker, "{{hook}}", hook).Replace(selfHeal)
	if err := os.WriteFile(c.contract, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// runReport is the part of run --json these tests read, decoded from the
// documented schema (docs/report-schema.md).
type runReport struct {
	Actions []struct {
		Action, Status, Verify string
	}
	Alerts []*runAlert
	Errors []string
}

type runAlert struct {
	Key, Kind, Text, Error string
	Retry, Sent            bool
	ReachedBefore          bool `json:"reached_before"`
	Routes                 []struct {
		Route, Outcome, Error string
		Tried                 bool
		Attempts              int
	}
}

func (c *selfHealCase) run(t *testing.T) *runReport {
	t.Helper()
	code, out, errs := runMain(t, "contractd", "run", "--json", "--quiet", "--verify-grace", "100ms", "--state-dir", c.state, c.contract)
	if code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, errs, out)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	return &rep
}

// lines returns the file's lines; a missing file has none.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// outcomes renders each route's outcome of an alert: "F:delivered ...".
func outcomes(a *runAlert) string {
	var parts []string
	for _, r := range a.Routes {
		parts = append(parts, r.Route+":"+r.Outcome)
	}
	return strings.Join(parts, " ")
}

// countContaining counts the lines that contain s.
func countContaining(ls []string, s string) int {
	n := 0
	for _, l := range ls {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// checkClean fails when a destination shows the secret or a raw control
// character from the probe's output.
func checkClean(t *testing.T, what string, ls []string) {
	t.Helper()
	for _, l := range ls {
		if strings.Contains(l, selfHealToken) || strings.ContainsRune(l, '\x1b') {
			t.Errorf("%s shows the secret or a raw escape: %q", what, l)
		}
	}
}

// A probe that fails and a repair that fixes it: the message reaches the
// log file, the command and a real HTTP receiver, and run --json lists it
// with each route's outcome.
func TestSelfHealReachesEveryRoute(t *testing.T) {
	hook := startReceiver(t, "127.0.0.1:0")
	c := newSelfHeal(t, hook.addr)

	rep := c.run(t)
	if len(rep.Actions) == 0 || rep.Actions[0].Action != "touch "+c.marker || rep.Actions[0].Status != "remediated" && rep.Actions[0].Verify != "remediated" {
		t.Fatalf("the repair did not run and verify: %+v", rep.Actions)
	}
	// A self-heal is one message per route: what was repaired and that it
	// was verified, no open/resolved pair.
	if len(rep.Alerts) != 1 || rep.Alerts[0].Kind != "repair" || !strings.Contains(rep.Alerts[0].Text, "verified healthy") {
		t.Fatalf("alerts %+v; want exactly one repair message", rep.Alerts)
	}
	f, g, w := lines(t, c.f), lines(t, c.g), hook.texts()
	if !strings.Contains(rep.Alerts[0].Text, `\x1b[2J`) || !strings.Contains(rep.Alerts[0].Text, "***") {
		t.Errorf("the alert does not show the probe's output, redacted and escaped: %q", rep.Alerts[0].Text)
	}
	for _, a := range rep.Alerts {
		if got := outcomes(a); got != "log:delivered command:delivered webhook:delivered" || !a.Sent {
			t.Errorf("alert %q: routes %s, sent %v; want delivered to all three", a.Text, got, a.Sent)
		}
		if countContaining(f, a.Text) != 1 || countContaining(g, a.Text) != 1 || countContaining(w, a.Text) != 1 {
			t.Errorf("alert %q: in F %d times, in G %d times, at the webhook %d times; want once each", a.Text,
				countContaining(f, a.Text), countContaining(g, a.Text), countContaining(w, a.Text))
		}
	}
	if len(f) != 1 || len(g) != 1 || len(w) != 1 {
		t.Errorf("F has %d lines, G %d, the webhook %d messages; the report lists %d", len(f), len(g), len(w), len(rep.Alerts))
	}
	checkClean(t, "F", f)
	checkClean(t, "G", g)
	checkClean(t, "the webhook", w)
	for _, p := range []string{c.f, c.runlog} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", p, err)
		}
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
}

// With the webhook's port closed, the log file and the command still get
// the message, the report and the log show the webhook's failure, and the
// next run delivers the queued message once the receiver is up.
func TestUnreachableWebhookStopsNoOtherRoute(t *testing.T) {
	addr := closedPort(t)
	c := newSelfHeal(t, addr)

	rep := c.run(t)
	if len(rep.Alerts) == 0 {
		t.Fatal("no alert in the report")
	}
	first := rep.Alerts[0]
	if got := outcomes(first); got != "log:delivered command:delivered webhook:queued" {
		t.Fatalf("routes %s; want log and command delivered, webhook queued", got)
	}
	wr := first.Routes[2]
	if !wr.Tried || !strings.Contains(wr.Error, "connection refused") || wr.Attempts != 1 {
		t.Errorf("webhook outcome %+v; want one refused attempt", wr)
	}
	if countContaining(lines(t, c.f), first.Text) != 1 || countContaining(lines(t, c.g), first.Text) != 1 {
		t.Errorf("F or G missed %q:\nF: %q\nG: %q", first.Text, lines(t, c.f), lines(t, c.g))
	}
	if first.Sent || !strings.Contains(first.Error, "queued: webhook") {
		t.Errorf("sent %v, error %q: an alert the webhook did not get is not sent, and says why", first.Sent, first.Error)
	}
	if !containsLine(rep.Errors, "notify webhook: ") || !containsLine(rep.Errors, "connection refused") {
		t.Errorf("the run's errors do not show the webhook failure: %v", rep.Errors)
	}
	runlog := lines(t, c.runlog)
	if countContaining(runlog, " selfheal run ") != 1 || countContaining(runlog, " selfheal action svc ") != 1 || countContaining(runlog, "error: notify webhook") != 1 {
		t.Errorf("run log:\n%s", strings.Join(runlog, "\n"))
	}
	checkClean(t, "the run log", runlog)

	// The receiver comes up on the same port; the next run delivers the
	// queued message to it, and the log file and command get it no second time.
	hook := startReceiver(t, addr)
	rep2 := c.run(t)
	var retried *runAlert
	for _, a := range rep2.Alerts {
		if a.Retry && a.Text == first.Text {
			retried = a
		}
	}
	if retried == nil || outcomes(retried) != "webhook:delivered" || !retried.Sent || !retried.ReachedBefore {
		t.Fatalf("second run's alerts do not show the queued message delivered: %+v", rep2.Alerts)
	}
	if n := countContaining(hook.texts(), first.Text); n != 1 {
		t.Errorf("the receiver got the queued message %d times, want once: %q", n, hook.texts())
	}
	if countContaining(lines(t, c.f), first.Text) != 1 || countContaining(lines(t, c.g), first.Text) != 1 {
		t.Errorf("the retry reached F or G again")
	}

	// History says which route delivered what, run by run.
	code, out, _ := runMain(t, "contractd", "history", "--state-dir", c.state, "selfheal")
	if code != 0 || !strings.Contains(out, "delivered: log, command; queued: webhook") || !strings.Contains(out, "(retry)") {
		t.Errorf("history exit %d:\n%s", code, out)
	}
}

func containsLine(ls []string, s string) bool { return countContaining(ls, s) > 0 }
