package engine

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// unknownContract judges a JSON output's declared field; an output that
// lacks it leaves the row, and the unit, unknown.
const unknownContract = `---
name: quota
runtime_contract: 2
schedule: {every: 1m}
ALERT_ON
targets:
  box: {local: true}
---

## Execution

### Disk {#disk agent=disk on=box}

` + "```bash {id=usage as=json fields=\"used_pct:int\"}\nreport-usage\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`used_pct`" + ` | < 90 | >= 90 |
`

// TestUnknownIsNeverSilent: a unit judged unknown (the output lost the
// field its row reads) opened no incident and sent nothing, run after
// run. After unknown_after runs (3 by default) it is an incident of its
// own: exactly one message per route, none while it stays unknown, and
// one when the unit is judged again.
func TestUnknownIsNeverSilent(t *testing.T) {
	for _, alertOn := range []string{"change", "critical"} {
		t.Run("alert_on "+alertOn, func(t *testing.T) {
			c := parse(t, strings.Replace(unknownContract, "ALERT_ON", "alert_on: "+alertOn, 1))
			var out atomic.Value
			out.Store(`{"total": 100}`) // used_pct is gone
			box := &fakeTarget{name: "box", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
				return transports.Result{Stdout: out.Load().(string)}, nil
			}}
			rec := &recorder{}
			clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"box": box}},
				Clock: clk, Notifiers: []notify.Notifier{rec}})
			if err != nil {
				t.Fatal(err)
			}
			run := func() *Report {
				t.Helper()
				clk.Advance(time.Minute)
				rep, err := eng.Run(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			for i := 1; i <= 2; i++ {
				if rep := run(); rep.Agents["disk"].Severity != contracts.SeverityUnknown || rec.count() != 0 {
					t.Fatalf("run %d: disk %s, messages %v; want unknown and no message yet", i, rep.Agents["disk"].Severity, rec.msgs)
				}
			}
			run()
			msgs := rec.since(0)
			if len(msgs) != 1 || msgs[0].Kind != notify.KindOpen || msgs[0].Condition != "unknown" || msgs[0].Severity != "unknown" ||
				!strings.Contains(msgs[0].Text, "disk is unknown, 3 runs in a row") || !strings.Contains(msgs[0].Text, "used_pct") {
				t.Fatalf("third unknown run sent %+v; want one open message naming disk, 3 runs and the row (used_pct)", msgs)
			}
			for i := 0; i < 3; i++ {
				run()
			}
			if n := rec.count(); n != 1 {
				t.Fatalf("still unknown: %d messages, want the one open", n)
			}
			out.Store(`{"used_pct": 41}`)
			if rep := run(); rep.Agents["disk"].Severity != contracts.SeverityHealthy {
				t.Fatalf("judged again: disk %s, want healthy", rep.Agents["disk"].Severity)
			}
			msgs = rec.since(1)
			if len(msgs) != 1 || msgs[0].Kind != notify.KindResolved || msgs[0].Condition != "unknown" || !strings.Contains(msgs[0].Text, "disk is judged again (now healthy)") {
				t.Fatalf("judged again sent %+v; want one resolve", msgs)
			}
			run()
			if n := rec.count(); n != 2 {
				t.Fatalf("healthy again: %d messages in all, want 2", n)
			}
		})
	}
}

// TestUnknownAfterIsTheContracts: guards.unknown_after sets the count,
// and a unit whose verdict changes in between starts counting again.
func TestUnknownAfterIsTheContracts(t *testing.T) {
	c := parse(t, strings.Replace(unknownContract, "ALERT_ON", "guards: {unknown_after: 2}", 1))
	outs := []string{`{}`, `{"used_pct": 10}`, `{}`, `{}`}
	i := 0
	box := &fakeTarget{name: "box", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		o := outs[min(i, len(outs)-1)]
		return transports.Result{Stdout: o}, nil
	}}
	rec := &recorder{}
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"box": box}},
		Clock: clk, Notifiers: []notify.Notifier{rec}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []int
	for i = 0; i < len(outs); i++ {
		clk.Advance(time.Minute)
		if _, err := eng.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, rec.count())
	}
	// unknown, healthy (the count starts again), unknown, unknown: the
	// incident opens at the fourth run, the second unknown in a row.
	if want := []int{0, 0, 0, 1}; !slices.Equal(kinds, want) {
		t.Fatalf("messages after each run %v, want %v (%v)", kinds, want, rec.msgs)
	}
}

// budgetContract repairs a degraded disk at most once an hour.
const budgetContract = `---
name: budget
runtime_contract: 2
schedule: {every: 5m}
guards: {debounce: 0s, grace: 0s, budget: "1 per 1h"}
targets:
  box: {local: true}
---

## Execution

### Disk {#disk agent=disk on=box}

` + "```sh {id=df}\nreport-usage\n```" + `

| Field | Healthy | Degraded |
|-------|---------|----------|
| ` + "`stdout`" + ` | < 80 | >= 80 |

| Condition | Action |
|-----------|--------|
| ` + "`severity == \"degraded\"`" + ` | ` + "`clean-tmp`" + ` |
`

// TestBudgetHeldRepairOfADegradedUnitIsToldOnce: a degraded unit is not
// relayed, so a repair its budget held back was silent, run after run.
// The hold is told once (an incident), nothing more while it lasts, and
// resolved once when the unit is healthy again.
func TestBudgetHeldRepairOfADegradedUnitIsToldOnce(t *testing.T) {
	c := parse(t, budgetContract)
	var usage atomic.Value
	usage.Store("91")
	repairs := 0
	box := &fakeTarget{name: "box", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, "clean-tmp") {
			repairs++
			return transports.Result{}, nil
		}
		return transports.Result{Stdout: usage.Load().(string)}, nil
	}}
	rec := &recorder{}
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"box": box}},
		Clock: clk, Notifiers: []notify.Notifier{rec}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		clk.Advance(5 * time.Minute)
		if _, err := eng.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	run() // the repair runs, and does not help
	if repairs != 1 || rec.count() != 1 || rec.all[0].Kind != notify.KindRepair {
		t.Fatalf("first run: %d repairs, messages %v; want the repair and its message", repairs, rec.msgs)
	}
	run() // the budget holds the next one back
	msgs := rec.since(1)
	if repairs != 1 || len(msgs) != 1 || msgs[0].Kind != notify.KindOpen || !strings.Contains(msgs[0].Text, "disk is degraded and its repair is held by its budget") {
		t.Fatalf("second run: %d repairs, messages %+v; want one open message saying the budget holds the repair", repairs, msgs)
	}
	for i := 0; i < 3; i++ {
		run()
	}
	if n := rec.count(); n != 2 || repairs != 1 {
		t.Fatalf("held: %d messages, %d repairs; want nothing more", n, repairs)
	}
	usage.Store("40")
	run()
	msgs = rec.since(2)
	if len(msgs) != 1 || msgs[0].Kind != notify.KindResolved {
		t.Fatalf("healthy again: messages %+v; want one resolve", msgs)
	}
}

// TestUnknownNeverResolvesAnIncident: a critical unit whose next runs are
// unknown (its probe's output lost the field) kept nothing open: the
// incident resolved with "web is unknown again (was critical)". Nothing is
// resolved on unknown; the unit judged healthy again resolves it.
func TestUnknownNeverResolvesAnIncident(t *testing.T) {
	c := parse(t, strings.Replace(unknownContract, "ALERT_ON", "guards: {unknown_after: 9}", 1))
	var out atomic.Value
	out.Store(`{"used_pct": 97}`)
	box := &fakeTarget{name: "box", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		return transports.Result{Stdout: out.Load().(string)}, nil
	}}
	rec := &recorder{}
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"box": box}},
		Clock: clk, Notifiers: []notify.Notifier{rec}})
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		clk.Advance(time.Minute)
		if _, err := eng.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if k := rec.kinds(); len(k) != 1 || k[0] != notify.KindOpen {
		t.Fatalf("critical: messages %v, want one open", rec.msgs)
	}
	out.Store(`{}`)
	run()
	run()
	if n := rec.count(); n != 1 {
		t.Fatalf("unknown: %d messages (%v); an unknown run resolved the critical incident", n, rec.msgs)
	}
	out.Store(`{"used_pct": 20}`)
	run()
	if k := rec.kinds(); len(k) != 2 || k[1] != notify.KindResolved {
		t.Fatalf("healthy again: messages %v, want the resolve", rec.msgs)
	}
}
