package contracts

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Day and Week are the units ParseDuration adds to Go's: 24 and 168 hours
// (calendar days and daylight-saving shifts do not enter into it).
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// ParseDuration reads a duration as every part of contractd writes one:
// Go's syntax (500ms, 300s, 15m, 1h30m, 1.5h) and the units d (24h) and w
// (7d), in any combination (2d, 1w, 1d12h, 1.5d). It is the one duration
// grammar of the contract format (the front matter, step and row
// attributes, notifier options, restarts() windows), of test files and
// of the command line's flags, so a duration one of them takes, every one
// takes. Negative durations parse; the callers that want a positive one
// say so. It returns an error that names the text and gives examples: an
// empty string, a number without a unit ("90") and anything else that is
// not a duration each say what to write instead.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration: give a number with a unit, e.g. 90s, 15m, 2h or 1d")
	}
	if strings.Trim(s, "0123456789.") == "" && s != "0" {
		return 0, fmt.Errorf("%q has no unit: write %ss, %sm or %sh (units: s, m, h, d for days, w for weeks)", s, s, s, s)
	}
	if !strings.ContainsAny(s, "dw") {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		return 0, notDuration(s)
	}
	// Split off the sign and read the components: a number and its unit
	// each. Go's units go to time.ParseDuration one component at a time,
	// so they mean exactly what they mean there.
	rest, neg := s, false
	if rest[0] == '-' || rest[0] == '+' {
		neg, rest = rest[0] == '-', rest[1:]
	}
	var total time.Duration
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		j := i
		for j < len(rest) && !(rest[j] >= '0' && rest[j] <= '9' || rest[j] == '.') {
			j++
		}
		num, unit := rest[:i], rest[i:j]
		rest = rest[j:]
		if num == "" || num == "." || unit == "" {
			return 0, notDuration(s)
		}
		var d time.Duration
		switch unit {
		case "d", "w":
			var n float64
			if _, err := fmt.Sscanf(num, "%g", &n); err != nil || strings.Count(num, ".") > 1 {
				return 0, notDuration(s)
			}
			per := Day
			if unit == "w" {
				per = Week
			}
			f := n * float64(per)
			if f >= math.MaxInt64 {
				return 0, fmt.Errorf("%q is too long a duration", s)
			}
			d = time.Duration(f)
		default:
			var err error
			if d, err = time.ParseDuration(num + unit); err != nil {
				return 0, notDuration(s)
			}
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("%q is too long a duration", s)
		}
		total += d
	}
	if neg {
		total = -total
	}
	return total, nil
}

func notDuration(s string) error {
	return fmt.Errorf("%q is not a duration: give a number with a unit, e.g. 90s, 15m, 2h, 1d or 1w", s)
}
