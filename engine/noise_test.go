package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/calendar"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// sickWorld answers `echo probe NAME` with ok, or sick while sick(NAME,
// now) says so, on a fake target "t".
func sickWorld(clk *clock.Fake, sick func(unit string, now time.Time) bool) *fakeTarget {
	return &fakeTarget{name: "t", exec: func(_ context.Context, cmd transports.Command) (transports.Result, error) {
		s := cmd.Script
		i := strings.Index(s, "echo probe ")
		if i < 0 {
			return transports.Result{ExitCode: 127}, nil
		}
		unit := strings.Fields(s[i+len("echo probe "):])[0]
		if sick(unit, clk.Now()) {
			return transports.Result{Stdout: "sick\n"}, nil
		}
		return transports.Result{Stdout: "ok\n"}, nil
	}}
}

// unitsContract is a contract of one stage per unit on target t, each
// probed with `echo probe UNIT`, healthy when it says ok; front is its
// front matter beyond name, runtime_contract and the target.
func unitsContract(name, front string, units ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\nname: %s\nruntime_contract: 2\ntargets:\n  t: {ssh: root@192.0.2.1}\n%s---\n\n## Execution\n", name, front)
	for _, u := range units {
		fmt.Fprintf(&b, "\n### %s {#%s agent=%s on=t}\n\n```sh {id=probe_%s}\necho probe %s\n```\nExpected: `ok`\n", u, u, u, u, u)
	}
	return b.String()
}

// message is one delivered message, at the fake time it was sent.
type message struct {
	at   time.Time
	kind string
	text string
}

// runEvery runs c every step from start to end on the fake clock and
// returns every message delivered, each at the time of its run.
func runEvery(t *testing.T, c string, tgt *fakeTarget, clk *clock.Fake, start, end time.Time, step time.Duration) []message {
	t.Helper()
	rec := &recorder{}
	eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"t": tgt}}, Clock: clk,
		Notifiers: []notify.Notifier{rec}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	contract := parse(t, c)
	var out []message
	for now := start; now.Before(end); now = now.Add(step) {
		clk.Set(now)
		n := rec.count()
		rep, err := eng.Run(context.Background(), contract)
		if err != nil {
			t.Fatalf("run at %s: %v", now, err)
		}
		if len(rep.Errors) > 0 {
			t.Fatalf("run at %s: %v", now, rep.Errors)
		}
		for _, m := range rec.since(n) {
			out = append(out, message{at: now, kind: m.Kind, text: m.Text})
		}
	}
	return out
}

// The Sunday patch night (02:00–04:00 in Berlin, announced) over a week of
// runs every 15 minutes, with the four edge cases of a recurring window:
//
//   - web fails from Saturday 23:00 to Sunday 06:00, before the window
//     and after it: its incident opens before, and nothing new is said
//     when the window ends (its reminder, due inside, is not sent then);
//   - db breaks at 02:30 and is still broken when the window ends: one
//     incident, at its end;
//   - cache breaks at 02:30 and heals at 03:30, inside: nothing at all;
//   - the window says when it starts and when it ends.
func TestRecurringMaintenanceOverAWeek(t *testing.T) {
	berlin, err := calendar.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	sunday := func(h, m int) time.Time { return time.Date(2026, 12, 6, h, m, 0, 0, berlin) }
	saturday := func(h, m int) time.Time { return time.Date(2026, 12, 5, h, m, 0, 0, berlin) }
	between := func(now, from, to time.Time) bool { return !now.Before(from) && now.Before(to) }
	sick := func(unit string, now time.Time) bool {
		switch unit {
		case "web":
			return between(now, saturday(23, 0), sunday(6, 0))
		case "db":
			return between(now, sunday(2, 30), sunday(5, 0))
		case "cache":
			return between(now, sunday(2, 30), sunday(3, 30))
		}
		return false
	}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, berlin) // a Monday
	clk := clock.NewFake(start)
	front := `maintenance:
  - {calendar: "Sun *-*-* 02:00", for: 2h, timezone: Europe/Berlin, reason: patch night, announce: true}
`
	got := runEvery(t, unitsContract("patch", front, "web", "db", "cache"), sickWorld(clk, sick), clk, start, start.Add(7*24*time.Hour), 15*time.Minute)

	want := []struct {
		at   time.Time
		kind string
		text string
	}{
		{saturday(23, 0), notify.KindOpen, "web is critical"},
		{sunday(2, 0), notify.KindOpen, "maintenance window started: Sun *-*-* 02:00:00 Europe/Berlin for 2h (whole contract): patch night"},
		{sunday(4, 0), notify.KindOpen, "db is critical"},
		{sunday(4, 0), notify.KindResolved, "maintenance window ended"},
		{sunday(5, 0), notify.KindResolved, "db is healthy again"},
		{sunday(6, 0), notify.KindResolved, "web is healthy again"},
	}
	var lines []string
	for _, m := range got {
		lines = append(lines, fmt.Sprintf("%s %s: %s", m.at.In(berlin).Format("Mon 15:04"), m.kind, m.text))
	}
	t.Logf("messages:\n%s", strings.Join(lines, "\n"))
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d:\n%s", len(got), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		// Two messages of one run come in the order of their incidents.
		m := got[i]
		if i+1 < len(want) && want[i+1].at.Equal(w.at) && !strings.Contains(m.text, w.text) {
			got[i], got[i+1] = got[i+1], got[i]
			m = got[i]
		}
		if !m.at.Equal(w.at) || m.kind != w.kind || !strings.Contains(m.text, w.text) {
			t.Fatalf("message %d is %s %s: %s, want %s %s: …%s…\nall:\n%s", i+1, m.at.In(berlin).Format("Mon 15:04"), m.kind, m.text,
				w.at.In(berlin).Format("Mon 15:04"), w.kind, w.text, strings.Join(lines, "\n"))
		}
	}
}

// A unit whose state changes every run for 20 runs says so twice: once
// when it starts flapping, once when it has settled; not once per change.
// (Its hysteresis, after: 2, keeps the toggling from opening an incident
// of its own: with after: 1, each of the changes before the seventh, when
// flapping is detected, would open or resolve one.)
func TestAUnitToggledEveryRunSendsTwoMessages(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	const step = time.Minute
	toggledUntil := start.Add(20 * step)
	sick := func(unit string, now time.Time) bool {
		return now.Before(toggledUntil) && int(now.Sub(start)/step)%2 == 1
	}
	front := "schedule: {every: 1m}\nguards: {after: 2}\n"
	got := runEvery(t, unitsContract("flappy", front, "web"), sickWorld(clk, sick), clk, start, start.Add(60*step), step)
	var lines []string
	for _, m := range got {
		lines = append(lines, fmt.Sprintf("+%s %s: %s", m.at.Sub(start), m.kind, m.text))
	}
	t.Logf("messages:\n%s", strings.Join(lines, "\n"))
	if len(got) != 2 || got[0].kind != notify.KindOpen || !strings.Contains(got[0].text, "web is flapping") ||
		got[1].kind != notify.KindResolved || !strings.Contains(got[1].text, "web stopped flapping") {
		t.Fatalf("messages, want flapping started and stopped:\n%s", strings.Join(lines, "\n"))
	}
	if got[0].at.After(toggledUntil) || !got[1].at.After(toggledUntil) {
		t.Fatalf("flapping started or stopped at the wrong time:\n%s", strings.Join(lines, "\n"))
	}
}

// depWorld is a jump host and the units behind it: jump answers while up;
// every unit reached through it is unreachable while it is down, and
// "api" (probed from the engine's host) is sick then too.
type depWorld struct {
	up bool
}

func (w *depWorld) opener() *fakeOpener {
	down := func(string) (transports.Result, error) {
		return transports.Result{}, fmt.Errorf("%w: dial tcp 192.0.2.1:22: connect: connection refused", transports.ErrUnreachable)
	}
	answer := func(cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, "restart") {
			return transports.Result{}, nil
		}
		if !w.up {
			if strings.Contains(cmd.Script, "echo probe api") {
				return transports.Result{Stdout: "sick\n"}, nil
			}
			return down("")
		}
		return transports.Result{Stdout: "ok\n"}, nil
	}
	hop := func(_ context.Context, cmd transports.Command) (transports.Result, error) {
		if !w.up {
			return down("")
		}
		return answer(cmd)
	}
	local := func(_ context.Context, cmd transports.Command) (transports.Result, error) { return answer(cmd) }
	return &fakeOpener{targets: map[string]*fakeTarget{"jump": {name: "jump", exec: hop}, "web": {name: "web", exec: hop}, "local": {name: "local", exec: local}}}
}

const jumpContract = `---
name: jumphost
runtime_contract: 2
targets:
  jump: {ssh: root@192.0.2.1}
---

## Execution

### Jump {#jump agent=jump on=jump}

` + "```sh {id=probe}\necho probe jump\n```\nExpected: `ok`\n"

const viaContract = `---
name: behind
runtime_contract: 2
targets:
  jump: {ssh: root@192.0.2.1}
  web: {via: jump, ssh: root@192.0.2.2}
---

## Execution

### Web {#web agent=web on=web}

` + "```sh {id=probe}\necho probe web\n```\nExpected: `ok`\n"

const dependentContract = `---
name: api-health
runtime_contract: 2
depends_on: [jumphost/jump]
---

## Execution

### API {#api agent=api}

` + "```sh {id=probe}\necho probe api\n```\nExpected: `ok`\n\n| Condition | Action |\n|---|---|\n| `probe.stdout == \"sick\"` | `restart api` |\n"

// A jump host down: its contract's incident is the one message and names
// the units it suppresses; the unit reached through it and the one that
// depends on it are suppressed (no repair, no message); back up, they are
// healthy and say nothing. Alone (no fleet watches the jump host), the
// contract behind it raises the target's incident itself.
func TestAJumpHostDownIsOneAlert(t *testing.T) {
	w := &depWorld{up: true}
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	rec := &recorder{}
	eng, err := New(Options{StateDir: dir, Opener: w.opener(), Clock: clk, Notifiers: []notify.Notifier{rec},
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	jump, behind, api := parse(t, jumpContract), parse(t, viaContract), parse(t, dependentContract)
	ctx := WithFleet(context.Background(), NewFleet([]*contracts.Contract{jump, behind, api}))
	run := func(c *contracts.Contract) *Report {
		t.Helper()
		rep, err := eng.Run(ctx, c)
		if err != nil || len(rep.Errors) > 0 {
			t.Fatalf("%s: %v %v", c.Name, err, rep.Errors)
		}
		clk.Advance(time.Minute)
		return rep
	}
	for _, c := range []*contracts.Contract{jump, behind, api} {
		run(c)
	}
	w.up = false
	// The dependents first: they wait for the jump host's word.
	for i, c := range []*contracts.Contract{behind, api, jump, behind, api} {
		rep := run(c)
		for name, a := range rep.Agents {
			t.Logf("down, run %d: %s/%s %s %+v", i, c.Name, name, a.Severity, a.Suppressed)
		}
		if i < 2 {
			for name, a := range rep.Agents {
				if a.Suppressed == nil || !a.Suppressed.Waiting {
					t.Fatalf("%s/%s, run before the jump host's: %+v, want waiting for it", c.Name, name, a)
				}
			}
		}
		for _, a := range rep.Actions {
			if a.Status == ActionRan {
				t.Fatalf("%s repaired %s while its dependency is down", c.Name, a.Agent)
			}
		}
	}
	if len(rec.all) != 1 || !strings.Contains(rec.all[0].Text, "jump is unreachable") || !strings.Contains(rec.all[0].Text, "2 units suppressed: api-health/api, behind/web") {
		t.Fatalf("messages while down: %q", rec.msgs)
	}
	for c, agent := range map[*contracts.Contract]string{behind: "web", api: "api"} {
		rep := run(c)
		a := rep.Agents[agent]
		if a.Severity != contracts.SeveritySuppressed || a.Suppressed == nil || a.Suppressed.Root != "jumphost/jump" {
			t.Fatalf("%s/%s: %+v", c.Name, agent, a)
		}
	}
	w.up = true
	for _, c := range []*contracts.Contract{jump, behind, api} {
		rep := run(c)
		if rep.OverallSeverity != contracts.SeverityHealthy {
			t.Fatalf("%s is %s after the jump host is back", c.Name, rep.OverallSeverity)
		}
	}
	if len(rec.all) != 2 || rec.all[1].Kind != notify.KindResolved || !strings.Contains(rec.all[1].Text, "jump is healthy again") {
		t.Fatalf("messages after: %q", rec.msgs)
	}

	// Alone, the contract behind the jump host says the target is down,
	// once, naming the unit it suppresses.
	rec2 := &recorder{}
	eng2, err := New(Options{StateDir: t.TempDir(), Opener: w.opener(), Clock: clk, Notifiers: []notify.Notifier{rec2},
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	w.up = false
	for range 3 {
		rep, err := eng2.Run(context.Background(), behind)
		if err != nil {
			t.Fatal(err)
		}
		if a := rep.Agents["web"]; a.Severity != contracts.SeveritySuppressed || a.Suppressed.Root != "target:jump" {
			t.Fatalf("web alone: %+v", a)
		}
		clk.Advance(time.Minute)
	}
	if len(rec2.all) != 1 || !strings.Contains(rec2.all[0].Text, "target jump (ssh root@192.0.2.1) cannot be reached") || !strings.Contains(rec2.all[0].Text, "1 unit suppressed: web") {
		t.Fatalf("messages alone: %q", rec2.msgs)
	}
	w.up = true
	if _, err := eng2.Run(context.Background(), behind); err != nil {
		t.Fatal(err)
	}
	if len(rec2.all) != 2 || !strings.Contains(rec2.all[1].Text, "target jump is reached again") {
		t.Fatalf("messages alone, after: %q", rec2.msgs)
	}
}

// A suppressed agent pages nowhere from a Nagios check either: the check
// is OK, its text says what suppresses the agent, its long output why.
func TestNagiosSaysWhatSuppressesAnAgent(t *testing.T) {
	rep := &Report{Contract: "behind", OverallSeverity: contracts.SeveritySuppressed, Agents: map[string]*AgentReport{
		"web": {Agent: "web", Severity: contracts.SeveritySuppressed, Raw: contracts.SeverityUnreachable,
			Suppressed: &guard.Suppression{By: "jumphost/jump", Root: "jumphost/jump", Reason: "jumphost/jump is unreachable (judged 2026-11-30T09:05:00Z)"}},
		"db": {Agent: "db", Severity: contracts.SeverityHealthy, Raw: contracts.SeverityHealthy, Flapping: true, FlapPercent: 35},
	}}
	var b strings.Builder
	if err := WriteNagios(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if NagiosStatus(rep) != 0 || !strings.HasPrefix(out, "BEHIND OK - web suppressed by jumphost/jump |") ||
		!strings.Contains(out, "\nweb: suppressed, neither repaired nor alerted: jumphost/jump is unreachable (judged 2026-11-30T09:05:00Z) (root cause jumphost/jump)\n") ||
		!strings.Contains(out, "\ndb: flapping: its state changed in 35% of its last runs\n") {
		t.Fatalf("exit %d:\n%s", NagiosStatus(rep), out)
	}
}
