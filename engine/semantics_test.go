package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

const oneStepContract = "---\n" + `name: onestep
runtime_contract: 2
targets:
  ct: {local: true}
---

## Execution

### Container {#app agent=app on=ct}

` + "```sh {id=health}\necho health\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action |
|-----------|--------|
| ` + "`health.stdout != \"ok\"`" + ` | ` + "`docker restart app`" + ` |
`

// A stage with a single exec step on a target that cannot be reached is
// unreachable with the transport's reason, exactly as with two steps: not
// critical, and nothing is repaired.
func TestOneStepStageKeepsItsTransportError(t *testing.T) {
	for _, steps := range []int{1, 2} {
		src := oneStepContract
		if steps == 2 {
			src = strings.Replace(src, "```sh {id=health}", "```sh {id=pre}\necho pre\n```\n\n```sh {id=health}", 1)
		}
		c := parse(t, src)
		ct := &fakeTarget{name: "ct", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
			if strings.Contains(cmd.Script, "docker restart") {
				t.Errorf("%d step(s): a repair ran on an unreachable target", steps)
			}
			return transports.Result{ExitCode: -1}, errors.New("Error response from daemon: No such container: app")
		}}
		clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
		eng, _ := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"ct": ct}}, Clock: clk})
		rep, err := eng.Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		st := rep.Stages[0]
		if st.Status != StatusUnreachable || !strings.Contains(st.Reason, "No such container") {
			t.Errorf("%d step(s): stage %s (%q); want unreachable with the transport's reason", steps, st.Status, st.Reason)
		}
		if a := rep.Agents["app"]; a.Severity != contracts.SeverityUnreachable {
			t.Errorf("%d step(s): app is %s, want unreachable", steps, a.Severity)
		}
	}
}

const forEachOnContract = "---\n" + `name: lanes
runtime_contract: 2
targets:
  h1: {local: true}
  h2: {local: true}
for_each:
  lanes: [{name: sol, host: h1}, {name: ace, host: h2}]
---

## Execution

### Lane {#lane agent=$name on=$host for_each=lanes}

` + "```bash {id=probe}\necho probe\n```" + `

Expected: ` + "`up`" + `
`

// on=$key in a for_each stage sends every step kind to the item's target.
func TestForEachOnKeyReachesEachItemsTarget(t *testing.T) {
	c := parse(t, forEachOnContract)
	var mu sync.Mutex // the stages of the two items probe side by side
	seen := map[string]int{}
	mk := func(name string) *fakeTarget {
		return &fakeTarget{name: name, exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			seen[name]++
			return transports.Result{Stdout: "up\n"}, nil
		}}
	}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	eng, _ := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"h1": mk("h1"), "h2": mk("h2")}}, Clock: clk})
	rep, err := eng.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if seen["h1"] != 1 || seen["h2"] != 1 || rep.OverallSeverity != contracts.SeverityHealthy {
		for _, st := range rep.Stages {
			t.Logf("stage %s %s %s %s", st.ID, st.Status, st.Reason, st.Target)
		}
		t.Errorf("probes per target %v, overall %s; want one on each item's host, all healthy", seen, rep.OverallSeverity)
	}
}

// crash_loop: {then: escalate} pages a person (an escalation, sent even
// under alert_on: repair) instead of alerting.
func TestCrashLoopThenEscalatePages(t *testing.T) {
	h := newHarness(t)
	h.c = parse(t, strings.Replace(meshContract, "  grace: 5s\n", "  grace: 5s\n  crash_loop: {max_restarts: 1, per: 1h, then: escalate}\nalert_on: repair\n", 1))
	h.w.set(func(w *world) { w.pi["response_pipeline"], w.sticky = "blocked", true })
	h.run()
	h.clock.Advance(6 * time.Minute)
	n := h.rec.count()
	rep := h.run()
	msgs := h.rec.since(n)
	if len(msgs) != 1 || msgs[0].Kind != notify.KindOpen || !strings.Contains(msgs[0].Text, "needs a person") {
		t.Errorf("messages:\n%s\nwant one page that abiba needs a person, even under alert_on: repair", render(msgs))
	}
	for _, a := range rep.Actions {
		if a.Agent == "abiba" && a.Guard == "crash-loop" && (a.Status != "escalate" || !strings.Contains(a.Reason, "a person is paged instead of a repair")) {
			t.Errorf("crash-loop verdict %s (%s); want escalate, a person paged", a.Status, a.Reason)
		}
	}
	if h.w.restartCount("abiba") != 1 {
		t.Errorf("%d restarts, want 1", h.w.restartCount("abiba"))
	}
	// The loop goes on: one incident pages, and no second one opens for
	// "repairs exhausted".
	h.clock.Advance(6 * time.Minute)
	n = h.rec.count()
	h.run()
	if more := h.rec.since(n); len(more) != 0 {
		t.Errorf("third run sent:\n%s\nwant nothing new while the same crash loop lasts", render(more))
	}
}

// A condition that cannot be evaluated at run time reads as false, and the
// report says so with the row's position instead of staying silent.
func TestAConditionThatFailsAtRunTimeIsReported(t *testing.T) {
	h := newHarness(t)
	h.c = parse(t, strings.Replace(meshContract, "| `connected: false` | `pm2 restart abiba-zulip` |",
		"| `connected: false` | `pm2 restart abiba-zulip` |\n| `response_pipeline > 3` | Log — odd |", 1))
	rep := h.run()
	found := false
	for _, e := range rep.Errors {
		if strings.Contains(e, "test.md:") && strings.Contains(e, "response_pipeline > 3") && strings.Contains(e, "read as false") {
			found = true
		}
	}
	if !found {
		t.Errorf("errors %q; want the row that could not be evaluated, with its position", rep.Errors)
	}
}

// A repair that keeps failing pages once: the incident it opened says so,
// and the next failed repairs, while that incident is open and true, are
// in the report and the log, not sent again.
func TestAFailingRepairPagesOnce(t *testing.T) {
	h := newHarness(t)
	h.c = parse(t, strings.Replace(meshContract, "  debounce: 300s\n", "  debounce: 0s\n", 1))
	h.w.set(func(w *world) { w.pi["response_pipeline"], w.sticky = "blocked", true })
	for i := 0; i < 4; i++ {
		h.run()
		h.clock.Advance(time.Minute)
	}
	if n := h.w.restartCount("abiba"); n != 4 {
		t.Fatalf("%d restarts in 4 runs, want 4", n)
	}
	if msgs := h.rec.since(0); len(msgs) != 1 || msgs[0].Kind != notify.KindOpen {
		t.Errorf("messages:\n%s\nwant one open incident for four failed repairs", render(msgs))
	}
}

const twoStageAgent = "---\n" + `name: box
runtime_contract: 2
guards: {grace: 1s}
targets:
  host: {local: true}
  ct: {local: true}
---

## Execution

### Container {#ctr agent=app on=host}

` + "```sh {id=inspect}\necho inspect\n```" + `

Expected: ` + "`running`" + `

` + "```sh {id=inside on=ct}\necho inside\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action |
|-----------|--------|
| ` + "`inspect.stdout != \"running\"`" + ` | ` + "`docker start app`" + ` |

### Service {#svc agent=app on=ct}

` + "```sh {id=svc_probe}\necho svc\n```" + `

Expected: ` + "`up`" + `
`

// A stopped container: the step inside it cannot run, yet the row over the
// step that did run still holds, so the container is started; and the
// verification probes all of the agent's stages, so the agent is healthy
// after it: one message, no open/resolved pair.
func TestAStoppedContainerIsStartedAndVerifiedWhole(t *testing.T) {
	c := parse(t, twoStageAgent)
	running := false
	host := &fakeTarget{name: "host", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		switch {
		case strings.Contains(cmd.Script, "docker start"):
			running = true
			return transports.Result{}, nil
		case running:
			return transports.Result{Stdout: "running\n"}, nil
		}
		return transports.Result{Stdout: "exited\n"}, nil
	}}
	ct := &fakeTarget{name: "ct", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if !running {
			return transports.Result{ExitCode: -1}, errors.New("container app is not running")
		}
		if strings.Contains(cmd.Script, "echo svc") {
			return transports.Result{Stdout: "up\n"}, nil
		}
		return transports.Result{Stdout: "ok\n"}, nil
	}}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rec := &recorder{}
	eng, _ := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"host": host, "ct": ct}}, Clock: clk,
		Notifiers: []notify.Notifier{rec}, Sleep: func(ctx context.Context, d time.Duration) error { clk.Advance(d); return nil }})
	rep, err := eng.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !running {
		t.Fatalf("the container was not started; actions %+v", rep.Actions)
	}
	if a := rep.Agents["app"]; a.Severity != contracts.SeverityHealthy {
		t.Errorf("app is %s after the verified start, want healthy (every stage probed again)", a.Severity)
	}
	if msgs := rec.since(0); len(msgs) != 1 || msgs[0].Kind != notify.KindRepair {
		t.Errorf("messages:\n%s\nwant one repair message", render(msgs))
	}
}

// unreachable_after holds however the unit was before: a degraded unit that
// becomes unreachable for one run (of two needed) opens nothing.
func TestUnreachableAfterHoldsAfterADegradedRun(t *testing.T) {
	h := newHarness(t)
	src := strings.Replace(meshContract, "| Field | Healthy | Critical |\n|-------|---------|----------|\n| `connected` | `true` | `false` |\n| `response_pipeline` | `healthy` | `blocked` |",
		"| Field | Healthy | Degraded | Critical |\n|-------|---------|----------|----------|\n| `connected` | `true` | | `false` |\n| `response_pipeline` | `healthy` | `degraded` | `blocked` |", 1)
	if src == meshContract {
		t.Fatal("the mesh contract no longer has the table this test edits")
	}
	h.c = parse(t, src)
	h.w.set(func(w *world) { w.pi["response_pipeline"] = "degraded" })
	if rep := h.run(); rep.Agents["abiba"].Severity != contracts.SeverityDegraded {
		t.Fatalf("first run: abiba %s, want degraded", rep.Agents["abiba"].Severity)
	}
	n := h.rec.count()
	h.w.set(func(w *world) { w.piDown = true })
	h.clock.Advance(15 * time.Minute)
	rep := h.run()
	if msgs := h.rec.since(n); len(msgs) != 0 {
		t.Errorf("one unreachable run of the two unreachable_after needs sent:\n%s", render(msgs))
	}
	if a := rep.Agents["abiba"]; a.Severity != contracts.SeverityUnreachable || a.Failing {
		t.Errorf("abiba %s failing=%v; want unreachable, not yet failing", a.Severity, a.Failing)
	}
}

// What a repair command printed is in the report and in `why`.
func TestWhyShowsWhatARepairPrinted(t *testing.T) {
	c := parse(t, oneStepContract)
	ct := &fakeTarget{name: "ct", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, "docker restart") {
			return transports.Result{Stdout: "already running\n"}, nil
		}
		return transports.Result{Stdout: "down\n"}, nil
	}}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	eng, _ := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"ct": ct}}, Clock: clk,
		Sleep: func(ctx context.Context, d time.Duration) error { clk.Advance(d); return nil }})
	rep, err := eng.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTrace(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "stdout: already running") {
		t.Errorf("why:\n%s\nwant the repair's stdout", b.String())
	}
}
