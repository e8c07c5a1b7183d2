package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// TestRepairMessageSaysWhatItWasForAndWhetherItHelped: a row's Message
// template sees the findings that prompted the repair (not the state after
// it), and shapes the message whether the repair helped or not; a row
// without one is told in the engine's words, which say whether it helped.
func TestRepairMessageSaysWhatItWasForAndWhetherItHelped(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := svcContract(state, "| Condition | Action | Message |\n|-----------|--------|---------|\n"+
		"| `st.stdout == \"stopped\"` | `cat "+filepath.Join(dir, "next")+" > "+state+"` | restarted {{.Unit}} (was: {{.Findings}}) |\n")
	c := parse(t, src)
	pool := localPool(t, transports.PoolOptions{})
	bare := parse(t, svcContract(state, "| Condition | Action |\n|-----------|--------|\n"+
		"| `st.stdout == \"stopped\"` | `cat "+filepath.Join(dir, "next")+" > "+state+"` |\n"))
	for _, tc := range []struct {
		c               *contracts.Contract
		next, want, not string
	}{
		{c, "running", "restarted svc (was: ", "did not help"},
		{c, "stopped", "restarted svc (was: ", "did not help"},
		{bare, "running", "repaired svc: ", "did not help"},
		{bare, "stopped", "repair of svc did not help", "repaired svc"},
	} {
		all := messagesAfterRepair(t, pool, tc.c, state, tc.next)
		if !strings.Contains(all, tc.want) || strings.Contains(all, tc.not) {
			t.Errorf("repair leaving %q: messages %q; want %q and not %q", tc.next, all, tc.want, tc.not)
		}
		if tc.c == c && !strings.Contains(all, "(was: stdout (stopped)") {
			t.Errorf("the repair message's findings are not the state before the repair: %q", all)
		}
	}
}

// TestRepairThatFailedButHealedLeadsWithTheUnit: a repair whose command
// failed (an error exit, or cut off with its target lost) may still have
// done its work; when the verification finds the unit healthy, the message
// says so first and keeps why the command failed, instead of reading as a
// failed repair on a message labelled healthy.
func TestRepairThatFailedButHealedLeadsWithTheUnit(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := svcContract(state, "| Condition | Action |\n|-----------|--------|\n"+
		"| `st.stdout == \"stopped\"` | `cat "+filepath.Join(dir, "next")+" > "+state+"; echo already bound >&2; exit 3` |\n")
	c := parse(t, src)
	pool := localPool(t, transports.PoolOptions{})
	for _, tc := range []struct{ next, want, not string }{
		{"running", "svc is healthy after 0s, though its repair failed: ", "did not help"},
		{"stopped", "repair of svc failed: ", "is healthy"},
	} {
		all := messagesAfterRepair(t, pool, c, state, tc.next)
		if !strings.Contains(all, tc.want) || strings.Contains(all, tc.not) || !strings.Contains(all, "exit code 3: already bound") {
			t.Errorf("repair exiting 3 and leaving %q: messages %q; want %q (with the exit code) and not %q", tc.next, all, tc.want, tc.not)
		}
	}
}

// TestSnapshotFieldReportedNullIsNull: a field the probe now reports as
// null is null in the snapshot; only a field the run could not see keeps
// its last value.
func TestSnapshotFieldReportedNullIsNull(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.w.set(func(w *world) { w.pi = map[string]any{"connected": nil, "response_pipeline": "healthy"} })
	h.clock.Advance(time.Minute)
	h.run()
	st, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	abiba := st.Snapshot["agents"].(map[string]any)["abiba"].(map[string]any)
	if v, ok := abiba["connected"]; !ok || v != nil {
		t.Fatalf("abiba.connected = %v (present %v) after the probe reported null; want null", v, ok)
	}
	h.w.set(func(w *world) { w.piDown = true })
	h.clock.Advance(time.Minute)
	h.run()
	st, _ = ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if abiba := st.Snapshot["agents"].(map[string]any)["abiba"].(map[string]any); abiba["response_pipeline"] != "healthy" {
		t.Fatalf("an unreachable run lost the last seen value: %v", abiba)
	}
}

// TestTemplateThatReadsTheOutcomeShapesEveryRepair: a Message template that
// reads {{.Verify}} says the outcome itself, so it shapes a repair that did
// not help too.
func TestTemplateThatReadsTheOutcomeShapesEveryRepair(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := svcContract(state, "| Condition | Action | Message |\n|-----------|--------|---------|\n"+
		"| `st.stdout == \"stopped\"` | `true` | restart of {{.Unit}}: {{.Verify}} |\n")
	os.WriteFile(state, []byte("stopped\n"), 0o644)
	rep := runOnPool(t, localPool(t, transports.PoolOptions{}), parse(t, src), Options{})
	var texts []string
	for _, a := range rep.Alerts {
		texts = append(texts, a.Text)
	}
	if all := strings.Join(texts, "\n"); !strings.Contains(all, "restart of svc: remediation failed") {
		t.Fatalf("messages %q; want the template, saying the repair failed", all)
	}
}

// svcContract is a contract whose one stage, svc, reads the file state
// (running or stopped) and repairs it by the action table given.
func svcContract(state, actions string) string {
	return "---\n" + `kind: responsibility
name: msg
version: 1.0.0
runtime_contract: 2
agent: svc
guards: {grace: 0s}
targets:
  box: {local: true}
` + "---\n" + `
# Msg

## Execution

### Svc {#svc agent=svc on=box}

` + "```sh {id=st}\ncat " + state + "\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`running`" + ` | ` + "`stopped`" + ` |

` + actions
}

// messagesAfterRepair runs c (an svcContract) once with its state stopped
// and the repair leaving next in it, and returns the run's messages, one
// per line.
func messagesAfterRepair(t *testing.T, pool *transports.Pool, c *contracts.Contract, state, next string) string {
	t.Helper()
	os.WriteFile(state, []byte("stopped\n"), 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(state), "next"), []byte(next+"\n"), 0o644)
	rep := runOnPool(t, pool, c, Options{})
	var texts []string
	for _, a := range rep.Alerts {
		texts = append(texts, a.Text)
	}
	return strings.Join(texts, "\n")
}

// TestRepairThatDidNotHelpIsSentInTheAuthorsWords: with alert_on: repair
// and the seed watchdog's one-line Message ("restarted <unit> (<reason>)"),
// a repair that did not help still reaches a real webhook listener in the
// author's format, which the receiving side parses: the restart did happen,
// and a template says the outcome with {{.Verify}} when its author wants.
func TestRepairThatDidNotHelpIsSentInTheAuthorsWords(t *testing.T) {
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Text string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		mu.Lock()
		got = append(got, body.Text)
		mu.Unlock()
	}))
	defer hook.Close()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	pool := localPool(t, transports.PoolOptions{})
	for _, tc := range []struct{ name, message, want string }{
		{"the seed's line", "restarted {{.Unit}} (stopped: not running)", "msg: restarted svc (stopped: not running)"},
		{"a line that reads the verdict", "restarted {{.Unit}} ({{.Verify}})", "msg: restarted svc (remediation failed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			src := svcContract(state, "| Condition | Action | Message |\n|-----------|--------|---------|\n"+
				"| `st.stdout == \"stopped\"` | `cat "+filepath.Join(dir, "next")+" > "+state+"` | "+tc.message+" |\n")
			src = strings.Replace(src, "guards: {grace: 0s}\n", "guards: {grace: 0s}\nalert_on: repair\nnotify:\n  - {webhook: {url: \""+hook.URL+"\", format: text}}\n", 1)
			messagesAfterRepair(t, pool, parse(t, src), state, "stopped")
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("the webhook received %q after a repair that did not help; want exactly [%q]", got, tc.want)
			}
		})
	}
}

// TestWhySaysDebounceOffWhenDebounceIsZero: with `debounce: 0s`, the trace
// `contractd why` prints says what the guard decided, "debounce: off", not
// "allow (no recent repair)" seconds after a repair.
func TestWhySaysDebounceOffWhenDebounceIsZero(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := svcContract(state, "| Condition | Action |\n|-----------|--------|\n"+
		"| `st.stdout == \"stopped\"` | `true` |\n")
	src = strings.Replace(src, "guards: {grace: 0s}", "guards: {grace: 0s, debounce: 0s}", 1)
	c := parse(t, src)
	pool := localPool(t, transports.PoolOptions{})
	os.WriteFile(state, []byte("stopped\n"), 0o644)
	opts := Options{StateDir: t.TempDir(), Opener: PoolOpener{Pool: pool}, Sleep: func(context.Context, time.Duration) error { return nil }}
	eng, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var rep *Report
	for range 2 { // the second run comes right after a repair
		if rep, err = eng.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	WriteTrace(&b, rep)
	if !strings.Contains(b.String(), "    debounce: off\n") || strings.Contains(b.String(), "no recent repair") {
		t.Fatalf("why after a repair with debounce 0s:\n%s\nwant \"debounce: off\"", b.String())
	}
}

// TestRouteAttemptsAgreeWithItsError: a webhook route that answers 503 is
// tried 3 times a run (retries: 2); the report's attempts and the words of
// its error come from one count: 3 after the first run, 6 after the next,
// where it used to print attempts: 1 beside "(3 attempts)".
func TestRouteAttemptsAgreeWithItsError(t *testing.T) {
	var mu sync.Mutex
	posts := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts++
		mu.Unlock()
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer hook.Close()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := svcContract(state, "| Condition | Action |\n|-----------|--------|\n| `st.stdout == \"stopped\"` | `true` |\n")
	src = strings.Replace(src, "guards: {grace: 0s}\n", "guards: {grace: 0s, debounce: 0s}\nalert_on: repair\nnotify:\n  - {webhook: {url: \""+hook.URL+"\", retries: 2, backoff: 1ms}}\n", 1)
	c := parse(t, src)
	os.WriteFile(state, []byte("stopped\n"), 0o644)
	eng, err := New(Options{StateDir: t.TempDir(), Opener: PoolOpener{Pool: localPool(t, transports.PoolOptions{})}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for run, want := range []int{3, 6} {
		rep, err := eng.Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range rep.Alerts {
			for _, rd := range a.Routes {
				if rd.Tried {
					got = append(got, fmt.Sprintf("attempts %d, error %q, summary %q", rd.Attempts, rd.Error, a.Summary()))
					if rd.Attempts == want && !strings.Contains(a.Summary(), fmt.Sprintf("(%d attempts)", want)) ||
						rd.Attempts != want || strings.Contains(rd.Error, "attempts)") {
						t.Errorf("run %d: %s; want %d attempts, said once, the same in the summary", run+1, got[len(got)-1], want)
					}
				}
			}
		}
		if len(got) == 0 {
			t.Fatalf("run %d: no route tried a message: %+v", run+1, rep.Alerts)
		}
		for _, e := range rep.Errors {
			if strings.Contains(e, "attempts)") && !strings.Contains(e, fmt.Sprintf("(%d attempts)", want)) {
				t.Errorf("run %d: the run's error counts otherwise: %s", run+1, e)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if posts < 6 {
		t.Errorf("the listener saw %d posts, want at least 6", posts)
	}
}
