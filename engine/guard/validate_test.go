package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// A state file with null entries may reach the rules (a store that does
// not validate, an older build's file): they are skipped, never a panic.
func TestNullEntriesDoNotPanic(t *testing.T) {
	clock := clock.NewFake(t0)
	t.Run("incidents", func(t *testing.T) {
		p := Incidents{State: map[string]*Incident{"c/zzz/critical": nil, "c/abiba/stuck": {OpenedAt: t0, LastSent: t0}}, Clock: clock}
		if got := p.Open(); len(got) != 1 || got[0] != "c/abiba/stuck" {
			t.Errorf("open = %v", got)
		}
		if a := p.Observe("c/zzz/critical", true, "", Incident{}); a.Send != SendOpen {
			t.Errorf("a null incident reopens as new: %+v", a)
		}
		p.State["c/x/y"] = nil
		if n := p.Prune(time.Hour); n != 1 || len(p.State) != 2 {
			t.Errorf("prune removed %d, left %v", n, p.State)
		}
	})
	t.Run("conditions", func(t *testing.T) {
		u := &Unit{State: StateFailing, Severity: contracts.SeverityCritical, Conditions: map[string]*Condition{"stuck": nil, "blocked": {Held: 2}}}
		s := Hysteresis{Clock: clock}.Observe(u, Observation{Severity: contracts.SeverityCritical, Conditions: []string{"blocked"}})
		if !s.Failing || u.Conditions["blocked"].Held != 3 {
			t.Errorf("settled %+v, blocked %+v", s, u.Conditions["blocked"])
		}
		if _, ok := u.Conditions["stuck"]; ok {
			t.Errorf("the null condition stayed")
		}
		u.Conditions["stuck"] = nil
		ClearUnit(u)
		if v := NewChain(contracts.Guards{}, contracts.Schedule{}, clock).Decide(u, Candidate{Condition: "stuck", Action: "pm2 restart", Severity: contracts.SeverityCritical}); v.Run || v.Status != StatusPending {
			t.Errorf("a null condition has held no run, so its repair is pending: %s", v)
		}
	})
}

func TestValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"null unit", (*Unit)(nil).Validate(), "is null"},
		{"null condition", (&Unit{Conditions: map[string]*Condition{"b": {}, "a": nil}}).Validate(), `conditions["a"]: is null`},
		{"negative held", (&Unit{Conditions: map[string]*Condition{"a": {Held: -1}}}).Validate(), `conditions["a"]: consecutive_held: negative count -1`},
		{"unknown verify", (&Condition{LastVerify: "maybe"}).Validate(), `last_verify: unknown outcome "maybe"`},
		{"unreachable count", (&Unit{Unreachable: -2}).Validate(), "consecutive_unreachable: negative count -2"},
		{"null incident", (*Incident)(nil).Validate(), "is null"},
		{"negative reminders", (&Incident{OpenedAt: t0, Reminders: -1}).Validate(), "reminders: negative count -1"},
		{"null window", (*Window)(nil).Validate(), "is null"},
		{"window ends first", (&Window{Since: t0, Until: t0.Add(-time.Hour)}).Validate(), "until 2026-11-29T18:00:00Z is before since 2026-11-29T19:00:00Z"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	good := &Unit{State: StateOK, Repairs: []time.Time{t0, t0.Add(time.Minute)}, Conditions: map[string]*Condition{"a": {Held: 1, LastVerify: Remediated}}, Restarts: &Counter{Increments: []Sample{{At: t0, N: 2}}}}
	if err := good.Validate(); err != nil {
		t.Errorf("a good unit: %v", err)
	}
}
