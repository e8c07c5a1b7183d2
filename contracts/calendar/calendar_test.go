package calendar

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
)

// events are read by Parse and by systemd-analyze alike; the test holds
// their elapses side by side, across the daylight-saving changes of a
// zone that has them.
var events = []string{
	"Sun *-*-* 02:00",
	"Sun *-*-* 02:00 Europe/Berlin",
	"*-*-* 02:30 Europe/Berlin", // a local time 2025-03-30 does not have, and one 2025-10-26 has twice
	"*-*-* *:30 Europe/Berlin",
	"Mon..Fri 12:00",
	"Mon..Fri 9..17/2:00",
	"Sat,Sun 23:45",
	"Wed 12-10",
	"Sat",
	"*-*-01 03:30",
	"*-*~01",
	"*-05~07/1",
	"*-02~03 06:00",
	"2026-*-15 08:00",
	"*-*-1,15 00:00",
	"*:0/15",
	"*:*:20/20",
	"weekly",
	"daily",
	"monthly",
	"quarterly",
	"semiannually",
	"yearly",
	"hourly",
	"Fri *-*-13 13:13 America/New_York",
	"*-02-29 12:00",
}

// bases are the moments the elapses are counted from: around both of
// 2025's daylight-saving changes in Europe and one in America.
var bases = []string{"2025-03-28 00:00:00", "2025-10-24 22:00:00", "2025-11-01 12:00:00", "2026-06-15 09:41:07"}

// systemdNext returns systemd-analyze's first n elapses of event after
// base (UTC), as UTC times.
func systemdNext(t *testing.T, bin, event, base string, n int) ([]time.Time, string) {
	t.Helper()
	out, err := exec.Command(bin, "calendar", "--iterations="+strconv.Itoa(n), "--base-time="+base+" UTC", event).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze calendar %q: %v\n%s", event, err, out)
	}
	var times []time.Time
	normalized := ""
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		switch {
		case k == "Normalized form":
			normalized = v
		case k == "Next elapse" || strings.HasPrefix(k, "Iter. #"):
			// "Sun 2025-03-02 01:00:00 UTC"
			f := strings.Fields(v)
			if len(f) < 4 {
				t.Fatalf("unexpected line %q", line)
			}
			at, err := time.Parse("2006-01-02 15:04:05", f[1]+" "+f[2])
			if err != nil {
				t.Fatal(err)
			}
			times = append(times, at)
		}
	}
	return times, normalized
}

func TestNextAgreesWithSystemdAnalyze(t *testing.T) {
	bin := need.Command(t, "systemd-analyze", "systemd")
	const n = 40
	for _, ev := range events {
		t.Run(ev, func(t *testing.T) {
			e, err := Parse(ev, nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for _, base := range bases {
				want, normalized := systemdNext(t, bin, ev, base, n)
				if e.Normalized != normalized {
					t.Errorf("normalized %q, systemd says %q", e.Normalized, normalized)
				}
				at, err := time.Parse("2006-01-02 15:04:05", base)
				if err != nil {
					t.Fatal(err)
				}
				for i, w := range want {
					got, ok := e.Next(at)
					if !ok || !got.Equal(w) {
						t.Fatalf("from %s, elapse %d: got %s (%v), systemd says %s", base, i+1, got.UTC(), ok, w)
					}
					at = got
				}
			}
		})
	}
}

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty calendar event"},
		{"25:00", `hour 25 out of range 0..23 in "25:00"`},
		{"Sun *-*-* 02:00 Mars/Olympus", `unknown time zone "Mars/Olympus"`},
		{"Fri..Mon 02:00", "runs backwards"},
		{"Sunday at 2", `cannot read "at"`},
		{"*-13-01", "month 13 out of range 1..12"},
		{"02:00:00.5", "fractional seconds are not supported"},
		{"*:*/0", "want a positive number after /"},
		{"02:00 local", "name the zone"},
		{"*~*", "~ needs a day count"},
		{"Mon-Fri 12:00", `"Mon-Fri" in "Mon-Fri 12:00": a weekday range is written with .., as Mon..Fri`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.in, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestAnEventThatNeverComesHasNoElapse(t *testing.T) {
	e, err := Parse("*-02-30 12:00", nil)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := e.Next(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
		t.Fatalf("Feb 30 elapsed at %s", at)
	}
}

func TestTheGivenZoneIsTheDefault(t *testing.T) {
	berlin, err := LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse("Sun 02:00", berlin)
	if err != nil {
		t.Fatal(err)
	}
	// Sunday 2025-01-05 02:00 in Berlin is 01:00 UTC.
	got, _ := e.Next(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2025, 1, 5, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("next = %s, want %s", got.UTC(), want)
	}
	if e.Normalized != "Sun *-*-* 02:00:00 Europe/Berlin" {
		t.Fatalf("normalized %q", e.Normalized)
	}
}
