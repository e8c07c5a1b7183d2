package guard

import (
	"slices"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	_ "github.com/contractd/contractd/steps" // the contract below has a sh step
)

// guardNope names nope in a Step and a Verdict.
const guardNope = "nope"

// nope is a guard that exists only in this test, to show what a new
// guard takes: this file and one row in the table guards, its setting
// included. It holds back (pending) a repair whose condition says its
// word: guards.nope_word, a row's nope_word=, else "nope".
type nope struct{ c *Chain }

var _ Guard = nope{}

// nopeSettings declare nope's one setting, as its row would carry them.
var nopeSettings = []contracts.GuardSetting{{
	Key: contracts.Key{Name: "nope_word", Type: contracts.KeyString, Default: "nope", Example: "stuck",
		Doc: "the word in a condition whose repair nope holds back"},
	Contract: true, Row: true,
}}

// The package registers a table row's settings when it is initialised;
// nope's row is not in the table, so this test does it the same way.
func init() {
	for _, s := range nopeSettings {
		contracts.RegisterGuardSetting(s)
	}
}

func newNope(c *Chain) Guard { return nope{c: c} }

func (nope) Name() string { return guardNope }

func (n nope) Decide(_ *Unit, cand Candidate) Step {
	word, _ := n.c.Setting("nope_word", cand.Guard).(string)
	if strings.Contains(cand.Condition, word) {
		return deny(guardNope, StatusPending, "the condition says "+word)
	}
	return allow(guardNope, "the condition does not say "+word)
}

// withNope is the chain of the table guards with nope's row at index i,
// as a build with that row in the table has it.
func withNope(i int, clk Clock) *Chain {
	return newChain(zulipGuards, contracts.Schedule{}, clk, slices.Insert(slices.Clone(guards), i, Row{New: newNope, Settings: nopeSettings}))
}

// TestANewGuardIsOneFileAndOneRow adds nope as the table's last row, after
// debounce: Decide asks it in that place, the trace lists it before the
// report-only and dry-run steps, and the first denial still decides.
func TestANewGuardIsOneFileAndOneRow(t *testing.T) {
	held := func() *Unit {
		return &Unit{Conditions: map[string]*Condition{"svc=nope": {Held: 1}, "svc=stuck": {Held: 1}}}
	}
	tests := []struct {
		name       string
		unit       *Unit
		cand       Candidate
		wantStatus string
		wantGuard  string
		wantReason string
		wantNope   string // nope's step in the trace
	}{
		{name: "nope holds a repair no other guard holds", unit: held(), cand: Candidate{Condition: "svc=nope", Severity: C},
			wantStatus: StatusPending, wantGuard: guardNope, wantReason: "the condition says nope", wantNope: "nope: pending (the condition says nope)"},
		{name: "nope allows other conditions", unit: held(), cand: Candidate{Condition: "svc=stuck", Severity: C},
			wantStatus: StatusRun, wantReason: "all guards allow: run pm2 restart svc", wantNope: "nope: allow (the condition does not say nope)"},
		{name: "a guard before nope decides first", unit: held(), cand: Candidate{Condition: "svc=nope", Severity: U},
			wantStatus: StatusBlocked, wantGuard: GuardSeverity, wantReason: "severity unknown never acts", wantNope: "nope: pending (the condition says nope)"},
		// The reason lists every guard's answer: nope's, last, says pending.
		{name: "report-only outranks nope and names it", unit: held(), cand: Candidate{Condition: "svc=nope", Severity: C, ReportOnly: true},
			wantStatus: StatusReportOnly, wantGuard: GuardReportOnly, wantReason: "=allow nope=pending)",
			wantNope: "nope: pending (the condition says nope)"},
		{name: "dry-run comes after nope", unit: held(), cand: Candidate{Condition: "svc=nope", Severity: C, DryRun: true},
			wantStatus: StatusPending, wantGuard: guardNope, wantNope: "nope: pending (the condition says nope)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cand.Action = "pm2 restart svc"
			c := withNope(len(guards), clock.NewFake(t0))
			v := c.Decide(tt.unit, tt.cand)
			if v.Status != tt.wantStatus || v.Guard != tt.wantGuard || v.Run != (tt.wantStatus == StatusRun) {
				t.Fatalf("verdict = run %v %q by %q, want %q by %q\n%s", v.Run, v.Status, v.Guard, tt.wantStatus, tt.wantGuard, v)
			}
			if !strings.Contains(v.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", v.Reason, tt.wantReason)
			}
			var order []string
			for _, s := range v.Trace {
				order = append(order, s.Guard)
			}
			// The table's guards, nope after the last, then the closing steps.
			want := NewChain(zulipGuards, contracts.Schedule{}, nil).Guards()
			want = slices.Insert(want, len(want)-2, guardNope)
			if got := strings.Join(order, " "); got != strings.Join(want, " ") || !slices.Equal(c.Guards(), want) {
				t.Errorf("trace order = %s, want %s", got, strings.Join(want, " "))
			}
			if got := v.TraceLines()[len(want)-3]; got != tt.wantNope {
				t.Errorf("nope's trace line = %q, want %q", got, tt.wantNope)
			}
		})
	}
}

// TestARowsPlaceIsItsOrder puts nope first: it decides before the severity
// guard that decided when it came after.
func TestARowsPlaceIsItsOrder(t *testing.T) {
	u := &Unit{Conditions: map[string]*Condition{"svc=nope": {Held: 1}}}
	v := withNope(0, clock.NewFake(t0)).Decide(u, Candidate{Condition: "svc=nope", Action: "pm2 restart svc", Severity: U})
	if v.Guard != guardNope || v.Status != StatusPending {
		t.Fatalf("decided by %q (%s), want nope first\n%s", v.Guard, v.Status, v)
	}
	if v.Trace[0].Guard != guardNope || v.Trace[3].Guard != GuardSeverity || v.Trace[3].Allowed {
		t.Errorf("trace does not start with nope, then maintenance, dependency and the severity guard's denial:\n%s", v)
	}
}

// nope's setting, declared with its row, is read from a contract like a
// built-in one: guards: sets it, a row overrides it, explain says both,
// lint refuses a misspelt one, and the guard decides by the value in force
// on the row.
func TestANewGuardsSettingIsReadFromTheContract(t *testing.T) {
	src := "---\nname: svc\nruntime_contract: 2\nagent: svc\nguards: {nope_word: stuck}\n---\n\n## Execution\n\n### Svc {#svc agent=svc}\n\n" +
		"```sh {id=st}\necho running\n```\n\nExpected: `running`\n\n" +
		"| Condition | Action | Guards |\n|---|---|---|\n" +
		"| `st.stdout == \"stuck\"` | `systemctl restart svc` | |\n" +
		"| `st.stdout == \"wedged\"` | `systemctl kill svc` | nope_word=wedged |\n"
	c, ds := contracts.Parse("svc.md", []byte(src), contracts.Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	plan := contracts.Explain(c)
	if !slices.Contains(plan.Guards.Said, "nope word stuck") || plan.Guards.Settings["nope_word"] != "stuck" {
		t.Errorf("explain's guards: said %v, settings %v; want nope word stuck", plan.Guards.Said, plan.Guards.Settings)
	}
	if said := plan.Stages[0].Actions[1].Guards.Said; !slices.Contains(said, "nope word wedged") {
		t.Errorf("explain's second row says %v; want nope word wedged", said)
	}
	chain := newChain(c.Guards, c.Schedule, clock.NewFake(t0), slices.Insert(slices.Clone(guards), len(guards), Row{New: newNope, Settings: nopeSettings}))
	held := func() *Unit { return &Unit{Conditions: map[string]*Condition{"stuck": {Held: 1}, "wedged": {Held: 1}}} }
	for _, tc := range []struct {
		row       int
		condition string
		want      string
	}{
		{0, "stuck", "nope: pending (the condition says stuck)"},
		{1, "stuck", "nope: allow (the condition does not say wedged)"},
		{1, "wedged", "nope: pending (the condition says wedged)"},
	} {
		a := c.Stages[0].Actions[tc.row]
		v := chain.Decide(held(), Candidate{Condition: tc.condition, Action: a.Action, Severity: C, Guard: a.Guard})
		i := slices.Index(chain.Guards(), guardNope)
		if got := v.TraceLines()[i]; got != tc.want {
			t.Errorf("row %d, condition %s: %q, want %q", tc.row, tc.condition, got, tc.want)
		}
	}
	_, ds = contracts.Parse("svc.md", []byte(strings.Replace(src, "nope_word: stuck", "nope_wrod: stuck", 1)), contracts.Options{})
	if !strings.Contains(ds.String(), `svc.md:5:10: error: unknown key "nope_wrod" in guards (did you mean "nope_word"?)`) {
		t.Errorf("a misspelt setting: %s", ds)
	}
}
