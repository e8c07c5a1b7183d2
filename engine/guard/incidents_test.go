package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

func TestIncidents(t *testing.T) {
	type obs struct {
		at     time.Duration
		active bool
		held   bool // the gate is down, or a maintenance window covers the unit
		want   string
	}
	tests := []struct {
		name string
		runs []obs
	}{
		{name: "alert once on open, once on resolve", runs: []obs{
			{0, true, false, SendOpen},
			{15 * time.Minute, true, false, SendNothing},
			{30 * time.Minute, true, false, SendNothing},
			{45 * time.Minute, false, false, SendResolved},
			{60 * time.Minute, false, false, SendNothing},
		}},
		{name: "reminders back off 4h 8h 16h then cap at 24h", runs: []obs{
			{0, true, false, SendOpen},
			{3*time.Hour + 59*time.Minute, true, false, SendNothing},
			{4 * time.Hour, true, false, SendReminder},
			{11 * time.Hour, true, false, SendNothing},
			{12 * time.Hour, true, false, SendReminder},
			{28 * time.Hour, true, false, SendReminder},
			{51 * time.Hour, true, false, SendNothing},
			{52 * time.Hour, true, false, SendReminder},
			{76 * time.Hour, true, false, SendReminder},
		}},
		{name: "reopens as a new incident", runs: []obs{
			{0, true, false, SendOpen},
			{time.Hour, false, false, SendResolved},
			{2 * time.Hour, true, false, SendOpen},
		}},
		{name: "child of a down gate does not open", runs: []obs{
			{0, true, true, SendNothing},
			{time.Hour, true, true, SendNothing},
			{2 * time.Hour, true, false, SendOpen},
		}},
		{name: "child of a down gate still resolves", runs: []obs{
			{0, true, false, SendOpen},
			{time.Hour, true, true, SendNothing},
			{2 * time.Hour, false, true, SendResolved},
		}},
		// Held (a maintenance window) past its reminder: nothing new when
		// the hold ends, and the next reminder a whole interval later.
		{name: "a held incident sends no reminder, then reminds an interval after its release", runs: []obs{
			{0, true, false, SendOpen},
			{5 * time.Hour, true, true, SendNothing},
			{6 * time.Hour, true, false, SendNothing},
			{9 * time.Hour, true, false, SendReminder},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			p := Incidents{Repeat: 4 * time.Hour, State: map[string]*Incident{}, Clock: clock}
			key := IncidentKey("zulip-health", "abiba", "response_pipeline=blocked")
			for i, o := range tt.runs {
				clock.Set(at(o.at))
				hold := ""
				if o.held {
					hold = "its gate is down"
				}
				if a := p.Observe(key, o.active, hold, Incident{}); a.Send != o.want {
					t.Fatalf("run %d at +%s: send %q, want %q (%s)", i, o.at, a.Send, o.want, a.Reason)
				}
			}
		})
	}
}

func TestIncidentActionsCarryTheStory(t *testing.T) {
	clock := clock.NewFake(t0)
	p := Incidents{State: map[string]*Incident{}, Clock: clock}
	key := IncidentKey("zulip-health", "koby", "")
	p.Observe(key, true, "", Incident{})
	clock.Advance(4 * time.Hour)
	if a := p.Observe(key, true, "", Incident{}); a.Incident.Reminders != 1 || !strings.Contains(a.Reason, "still open since 2026-11-29T19:00:00Z (reminder 1)") {
		t.Errorf("reminder: %+v", a)
	}
	if got := p.Open(); len(got) != 1 || got[0] != "zulip-health/koby/" {
		t.Errorf("open = %v", got)
	}
	clock.Advance(90 * time.Minute)
	a := p.Observe(key, false, "", Incident{})
	if a.Reason != "resolved after 5h30m" || !a.Incident.Resolved {
		t.Errorf("resolve: %+v", a)
	}
	clock.Advance(8 * 24 * time.Hour)
	if n := p.Prune(7 * 24 * time.Hour); n != 1 || len(p.State) != 0 {
		t.Errorf("pruned %d, left %d", n, len(p.State))
	}
}
