// Package calendar reads systemd calendar events (systemd.time(7), the
// syntax of a timer's OnCalendar=): "Sun *-*-* 02:00", "Mon..Fri 12:00",
// "*-*-01 03:30 Europe/Berlin", "weekly". A contract's recurring
// maintenance windows start at them. Next gives the elapses systemd gives
// (`systemd-analyze calendar --iterations=N` is the test's oracle),
// daylight-saving gaps included: a local time that does not exist that
// day is skipped.
//
// What is not read is refused with the reason, never approximated:
// fractional seconds and the year/month/day repetition forms systemd
// itself rarely sees are out.
package calendar

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Event is one parsed calendar event.
type Event struct {
	// Source is the event as written; Normalized as systemd prints it.
	Source     string
	Normalized string
	weekdays   [7]bool // by time.Weekday; all true when none are named
	anyWeekday bool
	year       field
	month      field
	day        field
	lastDays   bool // day counts from the month's end (`~`)
	hour       field
	minute     field
	second     field
	// Location is the event's time zone: its own trailing zone, else
	// the one Parse was given.
	Location *time.Location
}

// field is the values one component takes, as written and expanded.
type field struct {
	text string
	any  bool
	set  map[int]bool
}

func (f field) has(v int) bool { return f.any || f.set[v] }

var shorthands = map[string]string{
	"minutely":     "*-*-* *:*:00",
	"hourly":       "*-*-* *:00:00",
	"daily":        "*-*-* 00:00:00",
	"monthly":      "*-*-01 00:00:00",
	"weekly":       "Mon *-*-* 00:00:00",
	"yearly":       "*-01-01 00:00:00",
	"annually":     "*-01-01 00:00:00",
	"quarterly":    "*-01,04,07,10-01 00:00:00",
	"semiannually": "*-01,07-01 00:00:00",
}

var weekdayNames = []struct {
	short, long string
	day         time.Weekday
}{
	{"Mon", "Monday", time.Monday}, {"Tue", "Tuesday", time.Tuesday}, {"Wed", "Wednesday", time.Wednesday},
	{"Thu", "Thursday", time.Thursday}, {"Fri", "Friday", time.Friday}, {"Sat", "Saturday", time.Saturday},
	{"Sun", "Sunday", time.Sunday},
}

// order is the weekdays Monday first, as systemd counts a range.
func order(d time.Weekday) int { return (int(d) + 6) % 7 }

// Parse reads a calendar event. loc is the time zone of an event that
// names none (nil: UTC). It returns an error saying what is wrong and
// where in the text, e.g. `hour 25 out of range 0..23 in "25:00"`.
func Parse(s string, loc *time.Location) (*Event, error) {
	if loc == nil {
		loc = time.UTC
	}
	src := s
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty calendar event")
	}
	if exp, ok := shorthands[strings.ToLower(s)]; ok {
		s = exp
	}
	tokens := strings.Fields(s)
	e := &Event{Source: src, Location: loc}
	// A trailing time zone: "UTC" or an IANA name.
	if n := len(tokens); n > 1 {
		last := tokens[n-1]
		if isLetter(last[0]) && !strings.ContainsAny(last, ":~*") && !isWeekdays(last) {
			z, err := LoadLocation(last)
			if err != nil {
				return nil, err
			}
			e.Location = z
			tokens = tokens[:n-1]
		}
	}
	if len(tokens) > 0 && isWeekdays(tokens[0]) {
		if err := e.parseWeekdays(tokens[0]); err != nil {
			return nil, err
		}
		tokens = tokens[1:]
	} else {
		e.anyWeekday = true
	}
	var date, clock string
	for _, t := range tokens {
		if a, b, ok := strings.Cut(t, "-"); ok && isWeekdays(a) && isWeekdays(b) {
			return nil, fmt.Errorf("%q in %q: a weekday range is written with .., as %s..%s", t, src, a, b)
		}
		switch {
		case strings.Contains(t, ":") && clock == "":
			clock = t
		case strings.ContainsAny(t, "-~") && date == "" && clock == "":
			date = t
		default:
			return nil, fmt.Errorf("cannot read %q in %q: want [WEEKDAYS] [YEAR-MONTH-DAY] [HH:MM[:SS]] [TIME ZONE], e.g. \"Sun *-*-* 02:00\"", t, src)
		}
	}
	if date == "" {
		date = "*-*-*"
	}
	if clock == "" {
		clock = "00:00:00"
	}
	if err := e.parseDate(date); err != nil {
		return nil, err
	}
	if err := e.parseTime(clock); err != nil {
		return nil, err
	}
	e.Normalized = e.normalize()
	return e, nil
}

// LoadLocation loads a time zone by its IANA name ("Europe/Berlin") or
// "UTC", saying what to write when the name is not one.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("time zone %q: name the zone (e.g. Europe/Berlin), so the window does not move with the host's setting", name)
	}
	z, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: want UTC or an IANA name such as Europe/Berlin", name)
	}
	return z, nil
}

func isWeekdays(t string) bool {
	for _, part := range strings.FieldsFunc(t, func(r rune) bool { return r == ',' || r == '.' }) {
		if _, ok := weekday(part); !ok {
			return false
		}
	}
	return t != "" && isLetter(t[0])
}

func isLetter(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

func weekday(s string) (time.Weekday, bool) {
	for _, w := range weekdayNames {
		if strings.EqualFold(s, w.short) || strings.EqualFold(s, w.long) {
			return w.day, true
		}
	}
	return 0, false
}

func (e *Event) parseWeekdays(t string) error {
	for _, part := range strings.Split(t, ",") {
		from, to, isRange := strings.Cut(part, "..")
		a, ok := weekday(from)
		if !ok {
			return fmt.Errorf("unknown weekday %q in %q", from, e.Source)
		}
		b := a
		if isRange {
			if b, ok = weekday(to); !ok {
				return fmt.Errorf("unknown weekday %q in %q", to, e.Source)
			}
		}
		if order(b) < order(a) {
			return fmt.Errorf("weekday range %s runs backwards in %q: systemd counts Monday to Sunday", part, e.Source)
		}
		for i := order(a); i <= order(b); i++ {
			e.weekdays[(i+1)%7] = true
		}
	}
	return nil
}

func (e *Event) parseDate(d string) error {
	sep := "-"
	if strings.Contains(d, "~") {
		sep = "~"
		e.lastDays = true
	}
	// The day follows the last separator; a ~ may stand only there.
	i := strings.LastIndex(d, sep)
	head, dayText := d[:i], d[i+1:]
	if strings.Contains(head, "~") {
		return fmt.Errorf("date %q in %q: ~ may only stand before the day", d, e.Source)
	}
	parts := strings.Split(head, "-")
	yearText, monthText := "*", ""
	switch len(parts) {
	case 1:
		monthText = parts[0]
	case 2:
		yearText, monthText = parts[0], parts[1]
	default:
		return fmt.Errorf("date %q in %q: want YEAR-MONTH-DAY or MONTH-DAY", d, e.Source)
	}
	var err error
	if e.year, err = parseField(yearText, "year", 1970, lastYear, e.Source); err != nil {
		return err
	}
	if e.month, err = parseField(monthText, "month", 1, 12, e.Source); err != nil {
		return err
	}
	parseDay := parseField
	if e.lastDays {
		// After ~ a day counts from the month's end, and a repetition
		// runs toward it: ~07/1 is the last seven days.
		parseDay = parseFieldDown
	}
	if e.day, err = parseDay(dayText, "day", 1, 31, e.Source); err != nil {
		return err
	}
	if e.lastDays && e.day.any {
		return fmt.Errorf("date %q in %q: ~ needs a day count from the month's end, e.g. ~01 for the last day", d, e.Source)
	}
	return nil
}

func (e *Event) parseTime(t string) error {
	parts := strings.Split(t, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("time %q in %q: want HH:MM or HH:MM:SS", t, e.Source)
	}
	if len(parts) == 2 {
		parts = append(parts, "00")
	}
	if strings.Contains(parts[2], ".") {
		return fmt.Errorf("time %q in %q: fractional seconds are not supported", t, e.Source)
	}
	var err error
	if e.hour, err = parseField(parts[0], "hour", 0, 23, e.Source); err != nil {
		return err
	}
	if e.minute, err = parseField(parts[1], "minute", 0, 59, e.Source); err != nil {
		return err
	}
	e.second, err = parseField(parts[2], "second", 0, 59, e.Source)
	return err
}

// parseField reads one component: *, N, N..M, N/S, N..M/S, */S, and
// comma lists of them.
func parseField(text, what string, lo, hi int, src string) (field, error) {
	f := field{text: text}
	if text == "*" {
		f.any = true
		return f, nil
	}
	if text == "" {
		return f, fmt.Errorf("%s missing in %q", what, src)
	}
	f.set = map[int]bool{}
	num := func(s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%s %q is not a number in %q", what, s, src)
		}
		if v < lo || v > hi {
			return 0, fmt.Errorf("%s %d out of range %d..%d in %q", what, v, lo, hi, src)
		}
		return v, nil
	}
	for _, part := range strings.Split(text, ",") {
		spec, stepText, repeat := strings.Cut(part, "/")
		step := 0
		if repeat {
			s, err := strconv.Atoi(stepText)
			if err != nil || s < 1 {
				return f, fmt.Errorf("%s repetition %q in %q: want a positive number after /", what, stepText, src)
			}
			step = s
		}
		var from, to int
		switch a, b, isRange := strings.Cut(spec, ".."); {
		case spec == "*" && repeat:
			from, to = lo, hi
		case isRange:
			var err error
			if from, err = num(a); err != nil {
				return f, err
			}
			if to, err = num(b); err != nil {
				return f, err
			}
			if to < from {
				return f, fmt.Errorf("%s range %s runs backwards in %q", what, spec, src)
			}
		default:
			v, err := num(spec)
			if err != nil {
				return f, err
			}
			from, to = v, v
			if repeat {
				to = hi
			}
		}
		if step == 0 {
			step = 1
		}
		for v := from; v <= to; v += step {
			f.set[v] = true
		}
	}
	return f, nil
}

// parseFieldDown reads the day after ~: counts from the month's end,
// where N/S is N, N-S, … down to the last day.
func parseFieldDown(text, what string, lo, hi int, src string) (field, error) {
	if text == "*" || strings.HasPrefix(text, "*/") {
		return parseField(text, what, lo, hi, src)
	}
	f := field{text: text, set: map[int]bool{}}
	for _, part := range strings.Split(text, ",") {
		spec, stepText, repeat := strings.Cut(part, "/")
		g, err := parseField(spec, what, lo, hi, src)
		if err != nil {
			return f, err
		}
		step := 1
		if repeat {
			if step, err = strconv.Atoi(stepText); err != nil || step < 1 {
				return f, fmt.Errorf("%s repetition %q in %q: want a positive number after /", what, stepText, src)
			}
		}
		for v := range g.set {
			f.set[v] = true
			for x := v; repeat && x >= lo; x -= step {
				f.set[x] = true
			}
		}
	}
	return f, nil
}

// normalize renders the event as systemd-analyze prints it.
func (e *Event) normalize() string {
	var b strings.Builder
	if !e.anyWeekday {
		b.WriteString(e.weekdayText())
		b.WriteString(" ")
	}
	sep := "-"
	if e.lastDays {
		sep = "~"
	}
	fmt.Fprintf(&b, "%s-%s%s%s %s:%s:%s", pad(e.year.text, 4), pad(e.month.text, 2), sep, pad(e.day.text, 2),
		pad(e.hour.text, 2), pad(e.minute.text, 2), pad(e.second.text, 2))
	if e.Location != time.UTC {
		b.WriteString(" " + e.Location.String())
	}
	return b.String()
}

// weekdayText renders the weekdays as ranges, Monday first: "Mon..Fri".
func (e *Event) weekdayText() string {
	var parts []string
	for i := 0; i < 7; {
		if !e.weekdays[(i+1)%7] {
			i++
			continue
		}
		j := i
		for j+1 < 7 && e.weekdays[(j+2)%7] {
			j++
		}
		name := weekdayNames[i].short
		switch {
		case j == i:
			parts = append(parts, name)
		case j == i+1:
			parts = append(parts, name, weekdayNames[j].short)
		default:
			parts = append(parts, name+".."+weekdayNames[j].short)
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// pad zero-pads the numbers of a component to width, as systemd does.
func pad(text string, width int) string {
	var b strings.Builder
	digits := ""
	flush := func() {
		if digits != "" {
			b.WriteString(strings.Repeat("0", max(0, width-len(digits))) + digits)
			digits = ""
		}
	}
	for _, r := range text {
		if r >= '0' && r <= '9' {
			digits += string(r)
			continue
		}
		flush()
		b.WriteRune(r)
		if r == '/' {
			// A repetition is a count, not a value: as written.
			width = 1
		}
	}
	flush()
	return b.String()
}

// lastYear bounds the search for the next elapse, as systemd's does: an
// event that matches no day before it (Feb 30) never elapses.
const lastYear = 2199

// Next returns the event's first elapse strictly after t, and false when
// it has none (a date that never comes, such as *-02-30).
func (e *Event) Next(t time.Time) (time.Time, bool) {
	loc := e.Location
	start := t.In(loc).Truncate(time.Second).Add(time.Second)
	y, m, d := start.Date()
	for i := 0; ; i++ {
		day := time.Date(y, m, d+i, 12, 0, 0, 0, loc)
		if day.Year() > lastYear {
			return time.Time{}, false
		}
		if !e.dayMatches(day) {
			continue
		}
		dy, dm, dd := day.Date()
		for h := 0; h < 24; h++ {
			if !e.hour.has(h) {
				continue
			}
			for mi := 0; mi < 60; mi++ {
				if !e.minute.has(mi) {
					continue
				}
				// Skip whole minutes before the start.
				if last := time.Date(dy, dm, dd, h, mi, 59, 0, loc); last.Before(start) && last.Hour() == h {
					continue
				}
				for s := 0; s < 60; s++ {
					if !e.second.has(s) {
						continue
					}
					c, ok := wallClock(dy, dm, dd, h, mi, s, loc, start)
					if ok {
						return c, true
					}
				}
			}
		}
	}
}

// wallClock returns the instant that reads y-m-d h:mi:s in loc when it is
// not before start. A local time the day does not have (a daylight-saving
// gap) has none; one it has twice (the hour repeated when clocks go back)
// is its earlier instant only, as systemd counts it.
func wallClock(y int, m time.Month, d, h, mi, s int, loc *time.Location, start time.Time) (time.Time, bool) {
	c := time.Date(y, m, d, h, mi, s, 0, loc)
	if c.Hour() != h || c.Minute() != mi || c.Day() != d {
		return time.Time{}, false
	}
	for _, back := range []time.Duration{2 * time.Hour, time.Hour, 30 * time.Minute} {
		earlier := c.Add(-back)
		if eh, em, es := earlier.Clock(); eh == h && em == mi && es == s && earlier.Day() == d {
			c = earlier
			break
		}
	}
	return c, !c.Before(start)
}

// dayMatches reports whether the event elapses on day (at noon, local).
func (e *Event) dayMatches(day time.Time) bool {
	y, m, d := day.Date()
	if !e.year.has(y) || !e.month.has(int(m)) {
		return false
	}
	if !e.anyWeekday && !e.weekdays[day.Weekday()] {
		return false
	}
	if e.lastDays {
		last := time.Date(y, m+1, 0, 12, 0, 0, 0, day.Location()).Day()
		return e.day.has(last - d + 1)
	}
	return e.day.has(d)
}
