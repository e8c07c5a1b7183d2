package engine

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"

	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// fleetContract has three agents behind a gate and the seed's escalation
// table; each agent's probe prints whether it is ok.
var fleetContract = "---\n" + `kind: responsibility
name: fleet
version: 1.0.0
runtime_contract: 2
agent: a
guards: {debounce: 1s, escalate_after: 2, grace: 1s}
targets:
  t: {local: true}
` + "---\n" + `
# Fleet

## Execution

### Gate {#gate .gate on=t}

` + "```bash {id=gate}\necho gate\n```" + `

Expected: ` + "`up`" + `
` + stageFor("a") + stageFor("b") + stageFor("c") + `

| Aggregate | Action |
|-----------|--------|
| ` + "`critical_count == 1`" + ` | Relay — single agent critical |
| ` + "`critical_count >= 2 && !(gate_ok && critical_count == agents)`" + ` | Relay — two or more agents critical |
| ` + "`gate_ok && critical_count == agents`" + ` | Alert — network or DNS likely down |
`

func stageFor(a string) string {
	return fmt.Sprintf("\n### Agent %[1]s {#%[1]s agent=%[1]s on=t}\n\n```bash {id=probe_%[1]s}\necho probe %[1]s\n```\n\nExpected: `ok`\n\n| Condition | Action | Tier |\n|-----------|--------|------|\n| `probe_%[1]s.stdout != \"ok\"` | `restart %[1]s` | 1 |\n| `probe_%[1]s.stdout != \"ok\"` | `rebuild %[1]s` | 2 |\n", a)
}

type fleetWorld struct {
	sick map[string]bool
	ran  []string
	t    *fakeTarget
}

func newFleetWorld() *fleetWorld {
	w := &fleetWorld{sick: map[string]bool{}}
	w.t = &fakeTarget{name: "t", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		s := cmd.Script
		switch {
		case strings.Contains(s, "echo gate"):
			return transports.Result{Stdout: "up\n"}, nil
		case strings.Contains(s, "restart "), strings.Contains(s, "rebuild "):
			w.ran = append(w.ran, strings.TrimSpace(s))
			return transports.Result{}, nil // repairs that never help
		}
		for _, a := range []string{"a", "b", "c"} {
			if strings.Contains(s, "echo probe "+a) {
				if w.sick[a] {
					return transports.Result{Stdout: "sick\n"}, nil
				}
				return transports.Result{Stdout: "ok\n"}, nil
			}
		}
		return transports.Result{ExitCode: 127}, nil
	}}
	return w
}

func runFleet(t *testing.T, w *fleetWorld, dir string, clk *clock.Fake, rec *recorder) *Report {
	t.Helper()
	c := parse(t, fleetContract)
	eng, err := New(Options{StateDir: dir, Opener: &fakeOpener{targets: map[string]*fakeTarget{"t": w.t}}, Clock: clk,
		Notifiers: []notify.Notifier{rec}, Sleep: func(ctx context.Context, d time.Duration) error { clk.Advance(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestEscalationRelaysEachCriticalAgentButOneAlertWhenAllAreDown(t *testing.T) {
	tests := []struct {
		name string
		sick []string
		want []string // message texts must each contain one of these, in order
	}{
		{"one agent critical is relayed", []string{"b"}, []string{"b is critical"}},
		{"two agents critical are relayed each", []string{"a", "c"}, []string{"a is critical", "c is critical"}},
		{"all agents critical with the gate up is one network alert", []string{"a", "b", "c"}, []string{"network or DNS likely down"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newFleetWorld()
			for _, a := range tc.sick {
				w.sick[a] = true
			}
			rec := &recorder{}
			runFleet(t, w, t.TempDir(), clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), rec)
			if len(rec.msgs) != len(tc.want) {
				t.Fatalf("messages %q, want %d", rec.msgs, len(tc.want))
			}
			for i, want := range tc.want {
				if !strings.Contains(rec.msgs[i], want) {
					t.Fatalf("message %d %q does not say %q", i, rec.msgs[i], want)
				}
			}
		})
	}
}

func TestTiersEscalateInsteadOfLooping(t *testing.T) {
	w := newFleetWorld()
	w.sick["a"] = true
	dir, clk, rec := t.TempDir(), clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), &recorder{}
	var statuses []string
	for i := 0; i < 4; i++ {
		rep := runFleet(t, w, dir, clk, rec)
		for _, a := range rep.Actions {
			statuses = append(statuses, a.Status+" "+a.Action)
		}
		clk.Advance(time.Minute)
	}
	if len(w.ran) != 2 || w.ran[0] != "restart a" || w.ran[1] != "rebuild a" {
		t.Fatalf("repairs run %q; want the light repair, then the heavy one, then none", w.ran)
	}
	if got := strings.Join(statuses, ", "); !strings.Contains(got, "escalate") {
		t.Fatalf("after two failed repairs the row should escalate: %s", got)
	}
	escalations := 0
	for _, m := range rec.msgs {
		if strings.Contains(m, "a person is needed") {
			escalations++
		}
	}
	if escalations != 1 {
		t.Fatalf("messages %q; want exactly one page", rec.msgs)
	}
}

func TestGateDownSuppressesNewAlertsButNotTheirResolution(t *testing.T) {
	w := newFleetWorld()
	dir, clk, rec := t.TempDir(), clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), &recorder{}
	w.sick["a"] = true
	runFleet(t, w, dir, clk, rec) // a's incident opens
	w.t.exec = wrapGate(w.t.exec, "down")
	clk.Advance(time.Minute)
	rep := runFleet(t, w, dir, clk, rec) // gate down: a, b, c skipped
	for _, st := range rep.Stages[1:] {
		if st.Status != StatusSkipped {
			t.Fatalf("stage %s ran behind a down gate", st.ID)
		}
	}
	w.t.exec = wrapGate(w.t.exec, "up")
	w.sick["a"] = false
	clk.Advance(time.Minute)
	runFleet(t, w, dir, clk, rec)
	kinds := strings.Join(rec.kinds(), ",")
	if kinds != "open,open,resolved,resolved" {
		t.Fatalf("messages %q; want a's open, the gate's open, then both resolved", rec.msgs)
	}
}

// wrapGate makes the gate print state, leaving the other scripts alone.
func wrapGate(next func(context.Context, transports.Command) (transports.Result, error), state string) func(context.Context, transports.Command) (transports.Result, error) {
	return func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, "echo gate") {
			return transports.Result{Stdout: state + "\n"}, nil
		}
		return next(ctx, cmd)
	}
}

func TestForEachExpandsOneUnitPerItem(t *testing.T) {
	src := "---\n" + `kind: responsibility
name: lanes
version: 1.0.0
runtime_contract: 2
agent: lab
targets:
  t: {local: true}
for_each:
  lanes:
    - {name: sol, port: 1}
    - {name: ace, port: 2}
` + "---\n" + `
# Lanes

## Execution

### Lane {#lane for_each=lanes agent=lab on=t}

` + "```bash {id=probe}\necho lane $name\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action |
|-----------|--------|
| ` + "`probe.stdout != \"ok\"`" + ` | ` + "`restart ${name}`" + ` |
`
	var ran []string
	tgt := &fakeTarget{name: "t", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		if strings.Contains(cmd.Script, "restart ${name}") {
			// The repair runs as declared and the item's value reaches it as
			// a shell variable: run the script in a real shell to see which.
			out, err := exec.CommandContext(ctx, "sh", "-c", "restart() { printf 'restart %s' \"$*\"; }\n"+cmd.Script).Output()
			if err != nil {
				t.Errorf("repair script: %v\n%s", err, cmd.Script)
			}
			ran = append(ran, string(out))
			return transports.Result{}, nil
		}
		if strings.Contains(cmd.Script, "name=ace") {
			return transports.Result{Stdout: "wedged\n"}, nil
		}
		return transports.Result{Stdout: "ok\n"}, nil
	}}
	c := parse(t, src)
	eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"t": tgt}}, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 2 || rep.Stages[0].ID != "lane[sol]" || rep.Stages[1].ID != "lane[ace]" {
		t.Fatalf("stages %v", rep.Stages)
	}
	if rep.Agents["lane[sol]"].Severity != contracts.SeverityHealthy || rep.Agents["lane[ace]"].Severity != contracts.SeverityCritical {
		t.Fatalf("agents %+v", rep.Agents)
	}
	if len(ran) != 1 || ran[0] != "restart ace" {
		t.Fatalf("repairs %q; want only the sick item's, with its own value", ran)
	}
}

func TestBlastRadiusCapsRepairsAndOpensTheCircuit(t *testing.T) {
	tests := []struct {
		name     string
		guards   string
		sick     []string
		repairs  int
		circuit  bool
		statuses string
	}{
		{"at most one repair per run", "{debounce: 1s, blast_radius: {max_repairs: 1}}", []string{"a", "b"}, 1, false, "ran,pending"},
		{"most units failing at once is the network, not the agents", "{debounce: 1s, blast_radius: {trip: 60%}}", []string{"a", "b"}, 0, true, "alert,alert"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newFleetWorld()
			for _, a := range tc.sick {
				w.sick[a] = true
			}
			src := strings.Replace(fleetContract, "guards: {debounce: 1s, escalate_after: 2, grace: 1s}", "guards: "+tc.guards, 1)
			c := parse(t, src)
			rec := &recorder{}
			clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			eng, err := New(Options{StateDir: t.TempDir(), Opener: &fakeOpener{targets: map[string]*fakeTarget{"t": w.t}}, Clock: clk,
				Notifiers: []notify.Notifier{rec}, Sleep: func(context.Context, time.Duration) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := eng.Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			var st []string
			for _, a := range rep.Actions {
				st = append(st, a.Status)
			}
			if len(w.ran) != tc.repairs || strings.Join(st, ",") != tc.statuses {
				t.Fatalf("repairs %q, statuses %v", w.ran, st)
			}
			circuit := strings.Contains(strings.Join(rec.msgs, "\n"), "circuit breaker open")
			if circuit != tc.circuit {
				t.Fatalf("messages %q", rec.msgs)
			}
		})
	}
}
