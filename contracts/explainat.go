package contracts

import (
	"strings"
)

// ExplainAt returns what explain says of what is written on a line of the
// contract's file (1-based): a stage's heading, a step's fence, a health
// cell's row (with its step), an action row with the guards in force on
// it, an escalation row, a target with its chain, or an alert route with
// its options; "" for any other line. A draft (Draft) explains as far as
// it was read. It never fails.
func ExplainAt(c *Contract, line int) string {
	p := Explain(c)
	if p == nil {
		return ""
	}
	var b strings.Builder
	ew := &errWriter{w: &b}
	for _, st := range p.Stages {
		if st.Line == line {
			ew.stage(st)
			return b.String()
		}
		for _, s := range st.Steps {
			if s.Line == line {
				ew.step(s)
				return b.String()
			}
			var cells []PlanHealth
			for _, h := range s.Health {
				if h.Line == line {
					cells = append(cells, h)
				}
			}
			if len(cells) > 0 {
				ew.printf("   step %s (%s) on %s, judged:\n", s.ID, s.Kind, s.Target)
				for _, h := range cells {
					ew.health(h)
				}
				return b.String()
			}
		}
		for _, a := range st.Actions {
			if a.Line == line {
				ew.printf("stage %s:\n", st.ID)
				ew.action(a)
				return b.String()
			}
		}
	}
	for _, e := range p.Escalation {
		if e.Line == line {
			ew.printf("escalation: when %s → %s: %s\n", e.Expr, e.Action, e.Message)
			return b.String()
		}
	}
	for _, t := range p.Targets {
		if tg := c.Targets[t.Name]; tg != nil && tg.Pos.Line == line && tg.Pos.File == c.Path {
			sudo := ""
			if t.Sudo {
				sudo = " (sudo: true)"
			}
			ew.printf("target %s: %s%s\n", t.Name, t.Chain, sudo)
			return b.String()
		}
	}
	for _, r := range c.Notify {
		if r.Pos.Line == line {
			ew.printf("%s\n", routeText(r))
			return b.String()
		}
	}
	return ""
}

// ExplainKey returns what explain says of a front-matter key's setting in
// force: the schedule, the guards, alert_on, depends_on, the maintenance
// windows; "" for other keys. It never
// fails.
func ExplainKey(c *Contract, key string) string {
	p := Explain(c)
	if p == nil {
		return ""
	}
	switch key {
	case "schedule":
		return "schedule: " + scheduleText(p.Schedule) + "\n"
	case "guards":
		return "guards: " + guardsText(p.Guards) + "\n"
	case "alert_on":
		return "alerts: alert_on " + p.AlertOn + ": " + alertOnText[p.AlertOn] + "\n"
	case "depends_on":
		return "depends on: " + strings.Join(p.DependsOn, ", ") + " (while one fails, a unit that fails too is suppressed: no repair, no incident)\n"
	case "maintenance":
		var b strings.Builder
		for _, w := range c.Maintenance {
			b.WriteString("maintenance: " + w.String() + "\n")
		}
		return b.String()
	}
	return ""
}
