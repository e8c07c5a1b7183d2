package contracts

import (
	"fmt"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/contractd/contractd/contracts/calendar"
)

// MaintenanceWindow is a recurring maintenance window the contract
// declares: from each elapse of Calendar (systemd's OnCalendar syntax, in
// its time zone) for For, the units it covers are not repaired and no new
// incident opens for them, as in a window opened with `contractd
// maintenance`. Checks keep running; an incident already open still
// resolves, and sends no reminder while the window lasts.
type MaintenanceWindow struct {
	Calendar *calendar.Event
	For      time.Duration
	// Agents are the units it covers; none means the whole contract.
	Agents []string
	Reason string
	// Announce sends a message when the window starts and one when it
	// ends.
	Announce bool
	Pos      Pos
	// agentPos are where each of Agents is written, for lint.
	agentPos []Pos
}

var windowKeys = []string{"calendar", "for", "timezone", "agents", "reason", "announce"}

// decodeMaintenance reads `maintenance: [{calendar: "Sun 02:00", for: 2h,
// timezone: Europe/Berlin, agents: [web], reason: patch night, announce:
// true}]`.
func (y *yamlDec) decodeMaintenance(n ast.Node) []*MaintenanceWindow {
	seq, ok := unwrap(n).(*ast.SequenceNode)
	if !ok {
		y.d.errorf(y.pos(n), "maintenance: expected a list of windows such as {calendar: \"Sun 02:00\", for: 2h}, got %s", kindName(n))
		return nil
	}
	var out []*MaintenanceWindow
	for i, v := range seq.Values {
		what := fmt.Sprintf("maintenance[%d]", i)
		entries, ok := y.mapping(v, what)
		if !ok {
			continue
		}
		w := &MaintenanceWindow{Pos: y.pos(v)}
		var calText string
		var calNode ast.Node
		loc := time.UTC
		good := true
		for _, e := range entries {
			k := what + "." + e.key
			switch e.key {
			case "calendar":
				calText, good = y.str(e.value, k)
				calNode = e.value
			case "for":
				if d, ok := y.duration(e.value, k); ok {
					w.For = d
				} else {
					good = false
				}
			case "timezone":
				if s, ok := y.str(e.value, k); ok {
					z, err := calendar.LoadLocation(s)
					if err != nil {
						y.d.errorf(y.textPos(e.value), "%s: %v", k, err)
						good = false
						continue
					}
					loc = z
				}
			case "agents":
				w.Agents, _ = y.strList(e.value, k)
				if seq, ok := unwrap(e.value).(*ast.SequenceNode); ok {
					for _, a := range seq.Values {
						w.agentPos = append(w.agentPos, y.textPos(a))
					}
				}
			case "reason":
				w.Reason, _ = y.str(e.value, k)
			case "announce":
				w.Announce, _ = y.boolean(e.value, k)
			default:
				y.unknownKey(e, what, windowKeys)
			}
		}
		if calNode == nil || w.For == 0 {
			if good {
				y.d.errorf(w.Pos, "%s: needs calendar (when it starts, as systemd's OnCalendar: \"Sun *-*-* 02:00\") and for (how long: 2h)", what)
			}
			continue
		}
		if !good {
			continue
		}
		ev, err := calendar.Parse(calText, loc)
		if err != nil {
			y.d.errorf(y.textPos(calNode), "%s.calendar: %v", what, err)
			continue
		}
		w.Calendar = ev
		out = append(out, w)
	}
	return out
}

// checkWindowAgents resolves each agent a maintenance window names to a
// unit of the contract: a window over a name that matches none covers
// nothing, and the agent it was meant for is repaired during it.
func (b *bodyParser) checkWindowAgents() {
	units := b.c.UnitNames()
	for _, w := range b.c.Maintenance {
		for i, a := range w.Agents {
			if contains(units, a) {
				continue
			}
			p := w.Pos
			if i < len(w.agentPos) {
				p = w.agentPos[i]
			}
			b.d.errorf(p, "maintenance: agent %q names no agent of this contract%s; the window would cover nothing", a, hint(a, units, ""))
		}
	}
}

// Covers reports whether the window covers unit (an agent, or a for_each
// item's unit): every unit when it names none.
func (w *MaintenanceWindow) Covers(unit string) bool {
	if len(w.Agents) == 0 {
		return true
	}
	return contains(w.Agents, unit)
}

// Active returns the occurrence of the window in force at now: when it
// started and when it ends; ok is false when none is. Occurrences that
// overlap (an event more frequent than the window is long) make one
// window, to the end of the last that has started.
func (w *MaintenanceWindow) Active(now time.Time) (since, until time.Time, ok bool) {
	start, found := w.Calendar.Next(now.Add(-w.For))
	if !found || start.After(now) {
		return time.Time{}, time.Time{}, false
	}
	since, until = start, start.Add(w.For)
	for i := 0; i < 1000; i++ {
		next, found := w.Calendar.Next(start)
		if !found || next.After(now) {
			break
		}
		start, until = next, next.Add(w.For)
	}
	return since, until, true
}

// Next returns the next occurrence of the window that starts after now.
func (w *MaintenanceWindow) Next(now time.Time) (since, until time.Time, ok bool) {
	start, found := w.Calendar.Next(now)
	if !found {
		return time.Time{}, time.Time{}, false
	}
	return start, start.Add(w.For), true
}

// String renders the window as explain prints it: "Sun *-*-* 02:00:00
// Europe/Berlin for 2h (web): patch night".
func (w *MaintenanceWindow) String() string {
	s := w.Calendar.Normalized + " for " + fmtDuration(w.For)
	if len(w.Agents) > 0 {
		s += " (" + joinWords(w.Agents, "and") + ")"
	} else {
		s += " (whole contract)"
	}
	if w.Reason != "" {
		s += ": " + w.Reason
	}
	return s
}
