package guard

import (
	"slices"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// guardNope names nope in a Step and a Verdict.
const guardNope = "nope"

// nope is a guard that exists only in this test, to show what a new
// stateless guard takes: this file and one row in the table guards. It
// holds back (pending) a repair whose condition says "nope".
type nope struct{}

var _ Guard = nope{}

func newNope(*Chain) Guard { return nope{} }

func (nope) Name() string { return guardNope }

func (nope) Decide(_ *Unit, cand Candidate) Step {
	if strings.Contains(cand.Condition, "nope") {
		return deny(guardNope, StatusPending, "the condition says nope")
	}
	return allow(guardNope, "the condition does not say nope")
}

// withNope is the chain of the table guards with nope's row at index i,
// as a build with that row in the table has it.
func withNope(i int, clk Clock) *Chain {
	return newChain(zulipGuards, contracts.Schedule{}, clk, slices.Insert(slices.Clone(guards), i, Row{New: newNope}))
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
