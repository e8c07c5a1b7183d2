package guard

import (
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/calendar"
	"github.com/contractd/contractd/engine/clock"
)

// A week of Sunday patch nights in Berlin, and a lunchtime window over
// one agent on weekdays, seen every 15 minutes: which window covers which
// unit when.
func TestRecurringOverAWeek(t *testing.T) {
	berlin, err := calendar.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	window := func(cal string, d time.Duration, agents ...string) *contracts.MaintenanceWindow {
		ev, err := calendar.Parse(cal, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return &contracts.MaintenanceWindow{Calendar: ev, For: d, Agents: agents, Reason: cal}
	}
	patch := window("Sun 02:00", 2*time.Hour)
	lunch := window("Mon..Fri 12:00", 30*time.Minute, "web")
	// Monday 2026-11-30 00:00 Berlin (23:00 UTC the day before).
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, berlin)
	clk := clock.NewFake(start)
	r := Recurring{Windows: []*contracts.MaintenanceWindow{patch, lunch}, Clock: clk}
	inWeb, inDB := 0, 0
	for clk.Now().Before(start.Add(7 * 24 * time.Hour)) {
		local := clk.Now().In(berlin)
		wantLunch := local.Weekday() >= time.Monday && local.Weekday() <= time.Friday && local.Hour() == 12 && local.Minute() < 30
		wantPatch := local.Weekday() == time.Sunday && local.Hour() >= 2 && local.Hour() < 4
		web, db := r.Active("web"), r.Active("db")
		if (web != nil) != (wantLunch || wantPatch) || (db != nil) != wantPatch {
			t.Fatalf("at %s: web window %v, db window %v; want lunch %v, patch %v", local, web, db, wantLunch, wantPatch)
		}
		if web != nil {
			inWeb++
			if web.By != ByContract || !web.Active(clk.Now()) {
				t.Fatalf("at %s: window %+v", local, web)
			}
		}
		if db != nil {
			inDB++
		}
		clk.Advance(15 * time.Minute)
	}
	// 5 lunches of 2 quarter-hours, one patch night of 8.
	if inWeb != 5*2+8 || inDB != 8 {
		t.Fatalf("web covered %d quarter-hours, db %d; want 18 and 8", inWeb, inDB)
	}
}
