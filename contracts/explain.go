package contracts

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Plan is what a contract will do, in order: the JSON form of
// `contractd explain --json`. docs/contract-format.md documents the schema.
type Plan struct {
	Name             string           `json:"name"`
	Title            string           `json:"title,omitempty"`
	Version          string           `json:"version,omitempty"`
	Path             string           `json:"path"`
	Agent            string           `json:"agent,omitempty"`
	ReportOnlyAgents []string         `json:"report_only_agents"`
	Schedule         PlanSchedule     `json:"schedule"`
	Guards           PlanGuards       `json:"guards"`
	Targets          []PlanTarget     `json:"targets"`
	Vars             []PlanVar        `json:"vars"`
	Secrets          []string         `json:"secrets"`
	Stages           []PlanStage      `json:"stages"`
	Escalation       []PlanEscalation `json:"escalation"`
	Maintains        []PlanKey        `json:"maintains"`
	Notify           []string         `json:"notify"` // the routes' kinds, in order (see Routes)
	// Routes are the alert routes with their options in force, defaults
	// applied; AlertOn decides which messages reach them, Messages word
	// them, and Log is the file every run appends its lines to.
	Routes   []PlanRoute       `json:"routes"`
	AlertOn  string            `json:"alert_on"`
	Messages map[string]string `json:"messages"` // kind (open, reminder, resolved, repair) → template
	Log      string            `json:"log,omitempty"`
	// DependsOn are the contract's dependencies as written
	// ("jumphost", "jumphost/jump", "target:docker").
	DependsOn []string `json:"depends_on"`
	// Maintenance are the recurring maintenance windows; each one's
	// next start is filled by ExplainAsOf.
	Maintenance []PlanWindow `json:"maintenance"`
}

// PlanWindow is one recurring maintenance window.
type PlanWindow struct {
	Calendar string   `json:"calendar"` // normalized, as systemd-analyze prints it
	For      string   `json:"for"`
	Agents   []string `json:"agents"` // none: the whole contract
	Reason   string   `json:"reason,omitempty"`
	Announce bool     `json:"announce"`
	// Next is when the window next starts (now, when it is open), and
	// Until when that occurrence ends; absent when it never comes again.
	Next  *time.Time `json:"next,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	Open  bool       `json:"open,omitempty"` // the window is open now
}

// PlanRoute is one alert route: its name (how reports and metrics name
// it), its notifier kind and every option in force, defaults applied
// (durations as 10s, a URL with a path as scheme://host/…, since a
// webhook's path may be its secret).
type PlanRoute struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	Options map[string]string `json:"options"`
}

// PlanSchedule is the contract's schedule.
type PlanSchedule struct {
	Every      string `json:"every"`
	OnStart    bool   `json:"on_start"`
	StartDelay string `json:"start_delay,omitempty"` // the first run waits this long after the daemon starts
}

// PlanGuards are the contract-wide guards in force, defaults applied: every
// guard is listed, and one that is off says so ("off", "none", 0), so what
// explain shows is exactly what runs.
type PlanGuards struct {
	Debounce         string `json:"debounce"`   // "0s": none
	CrashLoop        string `json:"crash_loop"` // "10 per 1h then alert", or "off"
	UnreachableAfter int    `json:"unreachable_after"`
	UnknownAfter     int    `json:"unknown_after"`
	RecoverAfter     int    `json:"recover_after"`
	After            int    `json:"after"`
	Budget           string `json:"budget"` // "1 per 10m", or "none"
	Grace            string `json:"grace"`
	EscalateAfter    int    `json:"escalate_after"` // 0: never escalates by count
	Repeat           string `json:"repeat"`
	SlowRetry        string `json:"slow_retry"`   // "after 3 failed repairs in a row: every 5m (5x the 1m interval)", or "off"
	BlastRadius      string `json:"blast_radius"` // "at most 2 repairs per run; trip at 50% of at least 2 units", or "off"
	Flapping         string `json:"flapping"`     // "above 30% of 20 runs, until 25%; repairs held", or "off"
	// Settings are the settings of guards registered beyond the built-in
	// ones, by key, as explain says their values.
	Settings map[string]string `json:"settings,omitempty"`
	// Said is every setting in force as explain's text says it, in the
	// order of the guards' table ("debounce 5m", "verify after 30s").
	Said []string `json:"said"`
}

// PlanTarget is one named target and its whole transport chain.
type PlanTarget struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`  // local, ssh, pct, docker
	Chain string `json:"chain"` // e.g. "ssh root@192.168.68.15 → pct 112"
	// Sudo is the target's sudo: true: repairs and sudo=true steps go
	// through `sudo -n --` (local, ssh), or pct/docker itself does (on
	// the parent).
	Sudo bool `json:"sudo,omitempty"`
}

// PlanVar is one var with the value it has after the inventory and --var.
// Commands, scripts, URLs and addresses show ${name} as written: the value
// reaches them as data at run time (docs/contract-format.md, "Vars reach
// commands as data").
type PlanVar struct {
	Name string `json:"name"`
	// Value has the var's type, as expressions read it: an int, a
	// float64, a bool or a string (docs/contract-format.md, "A var has
	// the type it is declared with").
	Value any `json:"value"`
}

// PlanStage is one stage: an agent or platform checked independently.
type PlanStage struct {
	ID         string       `json:"id"`
	Title      string       `json:"title"`
	Agent      string       `json:"agent"`
	ReportOnly bool         `json:"report_only"`
	Gate       bool         `json:"gate"`
	ForEach    string       `json:"for_each,omitempty"`
	On         string       `json:"on"`     // target name
	Target     string       `json:"target"` // the transport chain
	Steps      []PlanStep   `json:"steps"`
	Actions    []PlanAction `json:"actions"`
	Line       int          `json:"line"`
	// Items are a for_each stage's runs, one per item, with its agent=
	// and on= filled from the item.
	Items []PlanItem `json:"items,omitempty"`
}

// PlanItem is one run of a for_each stage.
type PlanItem struct {
	ID         string `json:"id"` // as reports name the run: stage[item]
	Agent      string `json:"agent"`
	ReportOnly bool   `json:"report_only"`
	On         string `json:"on"`
	Target     string `json:"target"`
}

// PlanStep is one probe with its health rows.
type PlanStep struct {
	ID      string       `json:"id"`
	Kind    string       `json:"kind"` // bash, sh, http, tcp
	On      string       `json:"on"`
	Target  string       `json:"target"`
	Via     string       `json:"via,omitempty"`
	Timeout string       `json:"timeout"`
	As      string       `json:"as,omitempty"`
	Command string       `json:"command"`           // the script, "METHOD URL", or host:port
	Sudo    bool         `json:"sudo,omitempty"`    // runs as sudo -n -- COMMAND (sudo=true)
	Verdict string       `json:"verdict,omitempty"` // how a kind that judges its own steps judges it (nagios)
	Health  []PlanHealth `json:"health"`
	Line    int          `json:"line"`
}

// PlanHealth is one health cell: a field, the severity it decides and the
// compiled expression.
type PlanHealth struct {
	Field    string `json:"field"`
	Severity string `json:"severity"` // healthy, degraded, critical
	Source   string `json:"source"`   // the cell as written
	Expr     string `json:"expr"`     // what it compiled to, with the field as `it`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
}

// PlanAction is one action row with its effective guards.
type PlanAction struct {
	Condition string        `json:"condition"`
	Expr      string        `json:"expr"`
	Action    string        `json:"action"`  // the literal command, or the built-in name
	Builtin   string        `json:"builtin"` // "" for a command
	Message   string        `json:"message,omitempty"`
	On        string        `json:"on"`
	Target    string        `json:"target"`
	Guards    PlanActGuards `json:"guards"`
	Timeout   string        `json:"timeout,omitempty"` // how long the command may run before it is killed: the row's timeout=, else 30s; "" for a built-in
	Tier      int           `json:"tier,omitempty"`
	Template  string        `json:"template,omitempty"` // the Message column: the words of the messages the row causes
	Executed  bool          `json:"executed"`           // false for report-only agents: logged, never run
	// Sudo says the command runs as `sudo -n -- COMMAND ARGS…` (its
	// target has sudo: true); false for a target chosen per item.
	Sudo bool `json:"sudo,omitempty"`
	Line int  `json:"line"`
}

// PlanActGuards are the guards in force for one action row.
type PlanActGuards struct {
	After         int    `json:"after"`
	Budget        string `json:"budget"` // or "none"
	Grace         string `json:"grace"`
	EscalateAfter int    `json:"escalate_after"` // 0: never by count
	Debounce      string `json:"debounce"`
	CrashLoop     string `json:"crash_loop"` // or "off"
	RestartCount  string `json:"restart_count,omitempty"`
	SlowRetry     string `json:"slow_retry"` // or "off"
	// Settings are the row's settings of guards registered beyond the
	// built-in ones (its own, else the contract's), by key.
	Settings map[string]string `json:"settings,omitempty"`
	// Said is every setting in force on the row as explain's text says
	// it: the row's own, else the contract's.
	Said []string `json:"said"`
}

// PlanEscalation is one escalation row.
type PlanEscalation struct {
	Condition string `json:"condition"`
	Expr      string `json:"expr"`
	Action    string `json:"action"`
	Message   string `json:"message"`
	Line      int    `json:"line"`
}

// PlanKey is one maintained snapshot key.
type PlanKey struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Enum     []string `json:"enum,omitempty"`
	Doc      string   `json:"doc,omitempty"`
	PerAgent bool     `json:"per_agent"`
	Value    string   `json:"value,omitempty"`  // per-agent keys: the expression that fills it
	Agents   []string `json:"agents,omitempty"` // per-agent keys: the agents whose example has it
}

// FormatDuration renders d as a contract writes it, in ParseDuration's
// grammar: 10m, 1h, 1h30m, 90s rather than Go's 10m0s, and whole days and
// weeks as such (1d, 1w, 1d12h, 10d rather than 24h, 168h, 36h, 240h).
func FormatDuration(d time.Duration) string { return fmtDuration(d) }

func fmtDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	if d < 0 && d != math.MinInt64 {
		sign, d = "-", -d
	}
	var b strings.Builder
	b.WriteString(sign)
	if d%Week == 0 {
		fmt.Fprintf(&b, "%dw", d/Week)
		return b.String()
	}
	if n := d / Day; n > 0 {
		fmt.Fprintf(&b, "%dd", n)
		d -= n * Day
	}
	if d == 0 {
		return b.String()
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return b.String() + s
}

// crashLoopText says what a crash-loop guard allows: "10 per 1h then
// alert", or "off".
func crashLoopText(c CrashLoop) string {
	if c.MaxRestarts == 0 {
		return "off"
	}
	return fmt.Sprintf("%d per %s then %s", c.MaxRestarts, fmtDuration(c.Per), c.Then)
}

// SlowRetryText says what s does under a schedule of every: "after 3
// failed repairs in a row: every 5m (5x the 1m interval)", or "" when off.
func SlowRetryText(s *SlowRetry, every time.Duration) string {
	if !s.On() {
		return ""
	}
	return fmt.Sprintf("after %d failed repairs in a row: every %s (%dx the %s interval)", s.After, fmtDuration(time.Duration(s.Factor)*every), s.Factor, fmtDuration(every))
}

// blastText says what a blast-radius guard allows, or "off".
func blastText(b *BlastRadius) string {
	if b == nil || b.MaxRepairs == 0 && b.Trip == 0 {
		return "off"
	}
	var parts []string
	if b.MaxRepairs > 0 {
		parts = append(parts, fmt.Sprintf("at most %d repairs per run", b.MaxRepairs))
	}
	if b.Trip > 0 {
		parts = append(parts, fmt.Sprintf("trip at %.0f%% of at least %d units", b.Trip*100, max(b.MinUnits, 2)))
	}
	return strings.Join(parts, "; ")
}

func budgetText(b *Budget) string {
	if b == nil {
		return ""
	}
	return fmt.Sprintf("%d per %s", b.Count, fmtDuration(b.Window))
}

// Explain builds the plan of a loaded contract. It never fails; a nil
// contract gives a nil plan.
func Explain(c *Contract) *Plan {
	if c == nil {
		return nil
	}
	g := c.Guards
	p := &Plan{
		Name: c.Name, Title: c.Title, Version: c.Version, Path: c.Path, Agent: c.Agent,
		ReportOnlyAgents: append([]string{}, c.ReportOnlyAgents...),
		Schedule:         PlanSchedule{Every: fmtDuration(c.Schedule.Every), OnStart: c.Schedule.OnStart},
		Guards: PlanGuards{
			Debounce: fmtDuration(g.Debounce), CrashLoop: crashLoopText(c.Guards.CrashLoop),
			UnreachableAfter: g.UnreachableAfter, UnknownAfter: max(g.UnknownAfter, 1), RecoverAfter: g.RecoverAfter, After: g.After,
			Budget: cmp.Or(budgetText(g.Budget), "none"), Grace: fmtDuration(g.Grace), EscalateAfter: g.EscalateAfter,
			Repeat: fmtDuration(g.Repeat), SlowRetry: cmp.Or(SlowRetryText(g.SlowRetry, c.Schedule.Every), "off"),
			BlastRadius: blastText(g.BlastRadius), Flapping: flapText(g.Flapping),
		},
		DependsOn:   []string{},
		Maintenance: []PlanWindow{},
		Targets:     []PlanTarget{},
		Vars:        []PlanVar{},
		Secrets:     append([]string{}, c.Secrets...),
		Stages:      []PlanStage{},
		Escalation:  []PlanEscalation{},
		Maintains:   []PlanKey{},
		Notify:      []string{},
		Routes:      []PlanRoute{},
		Messages:    map[string]string{},
	}
	p.Guards.Said, p.Guards.Settings = contractSaid(c)

	if c.Schedule.StartDelay > 0 {
		p.Schedule.StartDelay = fmtDuration(c.Schedule.StartDelay)
	}
	names := make([]string, 0, len(c.Targets))
	for n := range c.Targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p.Targets = append(p.Targets, PlanTarget{Name: n, Kind: c.Targets[n].Kind, Chain: c.Chain(n), Sudo: c.Targets[n].Sudo})
	}
	vars := make([]string, 0, len(c.Vars))
	for n := range c.Vars {
		vars = append(vars, n)
	}
	sort.Strings(vars)
	for _, n := range vars {
		var v any = c.Vars[n]
		if typed, ok := c.VarValues[n]; ok {
			v = typed
		}
		p.Vars = append(p.Vars, PlanVar{Name: n, Value: v})
	}
	for _, st := range c.Stages {
		agent, on := st.Agent, st.On
		if st.ForEach == "" {
			// agent=$v and on=$v read the contract's vars, known now.
			vars := c.StageVars(nil)
			agent, on = ExpandAttr(st.Agent, vars), ExpandAttr(st.On, vars)
		}
		ps := PlanStage{
			ID: st.ID, Title: st.Title, Agent: agent, ReportOnly: c.IsReportOnly(agent),
			Gate: st.Gate, ForEach: st.ForEach, On: on, Target: c.Chain(on),
			Steps: []PlanStep{}, Actions: []PlanAction{}, Line: st.Pos.Line,
		}
		for i, item := range c.ForEach[st.ForEach] {
			vars := c.StageVars(item)
			it := PlanItem{ID: fmt.Sprintf("%s[%s]", st.ID, ItemName(item, i)), Agent: ExpandAttr(st.Agent, vars), On: ExpandAttr(st.On, vars)}
			if it.On == "" {
				it.On = "local"
			}
			it.ReportOnly, it.Target = c.IsReportOnly(it.Agent), c.Chain(it.On)
			ps.Items = append(ps.Items, it)
		}
		for _, s := range st.Steps {
			on := st.StepTarget(s)
			target := c.Chain(on)
			if s.Via != "" {
				target = "local, tunnelled through " + c.Chain(s.Via)
			}
			ps2 := PlanStep{
				ID: s.ID, Kind: s.Kind, On: on, Target: target, Via: s.Via,
				Timeout: fmtDuration(s.Timeout), As: s.As, Command: stepCommand(s), Sudo: s.Sudo,
				Health: []PlanHealth{}, Line: s.Pos.Line,
			}
			if k := stepKind(s.Kind); k != nil && k.Verdict {
				ps2.Verdict = k.VerdictDoc
			}
			for _, r := range s.Health {
				for _, cell := range r.Cells {
					ps2.Health = append(ps2.Health, PlanHealth{
						Field: r.Field, Severity: cell.Severity.String(), Source: cell.Source,
						Expr: cell.Expr, Line: cell.Pos.Line, Col: cell.Pos.Col,
					})
				}
			}
			ps.Steps = append(ps.Steps, ps2)
		}
		for _, a := range st.Actions {
			ps.Actions = append(ps.Actions, planAction(c, st, a))
		}
		p.Stages = append(p.Stages, ps)
	}
	for _, e := range c.Escalation {
		p.Escalation = append(p.Escalation, PlanEscalation{Condition: e.Condition, Expr: e.Expr, Action: e.Action, Message: e.Message, Line: e.Pos.Line})
	}
	for _, k := range c.Maintains.Keys {
		p.Maintains = append(p.Maintains, PlanKey{Name: k.Name, Type: k.Type, Enum: k.Enum, Doc: k.Doc})
	}
	for _, k := range c.Maintains.Agent {
		var agents []string
		for _, a := range c.Maintains.Agents {
			for _, ak := range c.Maintains.PerAgent[a] {
				if ak.Name == k.Name {
					agents = append(agents, a)
				}
			}
		}
		p.Maintains = append(p.Maintains, PlanKey{Name: k.Name, Type: k.Type, PerAgent: true, Value: k.Value, Agents: agents})
	}
	for _, r := range c.Notify {
		p.Notify = append(p.Notify, r.Kind)
		pr := PlanRoute{Name: r.Name, Kind: r.Kind, Options: map[string]string{}}
		for _, o := range routeOptions(r) {
			pr.Options[o[0]] = o[1]
		}
		p.Routes = append(p.Routes, pr)
	}
	p.AlertOn, p.Log = c.AlertOn, c.Log
	for kind, t := range c.Messages {
		p.Messages[kind] = templateText(t)
	}
	for _, r := range c.DependsOn {
		p.DependsOn = append(p.DependsOn, r.String())
	}
	for _, w := range c.Maintenance {
		p.Maintenance = append(p.Maintenance, PlanWindow{Calendar: w.Calendar.Normalized, For: fmtDuration(w.For),
			Agents: append([]string{}, w.Agents...), Reason: w.Reason, Announce: w.Announce})
	}
	return p
}

// ExplainAsOf is Explain with each maintenance window's next start as of
// now (the one open now, when one is).
func ExplainAsOf(c *Contract, now time.Time) *Plan {
	p := Explain(c)
	if p == nil {
		return nil
	}
	for i, w := range c.Maintenance {
		since, until, open := w.Active(now)
		if !open {
			since, until, open = w.Next(now)
			if !open {
				continue
			}
			open = false
		}
		since, until = since.UTC(), until.UTC()
		p.Maintenance[i].Next, p.Maintenance[i].Until, p.Maintenance[i].Open = &since, &until, open
	}
	return p
}

// flapText says what flap detection does: "above 30% of 20 runs, until
// 25%; repairs held", or "off".
func flapText(f *Flapping) string {
	if f == nil {
		return "off"
	}
	held := "repairs held"
	if f.Repair {
		held = "repairs go on"
	}
	return fmt.Sprintf("above %g%% of %d runs, until %g%%; %s", f.High, f.Runs, f.Low, held)
}

// templateText is a message template's text as parsed.
func templateText(t *template.Template) string {
	if t == nil || t.Tree == nil || t.Tree.Root == nil {
		return ""
	}
	return t.Tree.Root.String()
}

// routeOptions lists a route's options in force, in the order its kind
// declares them, as [name, value] pairs; options that are unset (and have
// no default) are left out.
func routeOptions(r NotifyRoute) [][2]string {
	k := notifierKinds[r.Kind]
	if k == nil || r.Options == nil {
		return nil
	}
	v := reflect.ValueOf(r.Options).Elem()
	var out [][2]string
	for _, o := range k.Options {
		if o.Name == nameOption.Name {
			continue
		}
		f := v.Field(o.field)
		var s string
		switch o.Type {
		case "duration":
			if d := time.Duration(f.Int()); d != 0 {
				s = fmtDuration(d)
			}
		case "count":
			s = strconv.FormatInt(f.Int(), 10)
		case "url":
			s = shownURL(f.String())
		case "urls":
			var us []string
			for _, u := range f.Interface().([]string) {
				us = append(us, shownURL(u))
			}
			s = strings.Join(us, ", ")
		case "labels":
			m := f.Interface().(map[string]string)
			var kv []string
			for _, name := range sortedKeys(m) {
				kv = append(kv, name+"="+m[name])
			}
			s = strings.Join(kv, ", ")
		default:
			s = f.String()
		}
		if s != "" {
			out = append(out, [2]string{o.Name, s})
		}
	}
	return out
}

// shownURL is a URL as explain shows it: whole when it has no path, else
// its scheme and host (a webhook's path is often its secret).
func shownURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.User == nil {
		return s
	}
	return redactURL(s)
}

// alertOnText says what alert_on sends.
var alertOnText = map[string]string{
	AlertOnChange:   "every open, reminder and resolve, and every repair message",
	AlertOnRepair:   "repair messages and escalations only",
	AlertOnCritical: "repair messages, escalations, and incidents raised at critical, with their resolves",
}

// stepCommand is the step as explain shows it: its kind's Command, else
// its script.
func stepCommand(s *Step) string {
	if k := stepKind(s.Kind); k != nil && k.Command != nil {
		return k.Command(s)
	}
	return strings.TrimRight(s.Script, "\n")
}

func planAction(c *Contract, st *Stage, a *ActionRow) PlanAction {
	g := PlanActGuards{
		After: a.Guard.After, Budget: budgetText(a.Guard.Budget), Grace: fmtDuration(a.Guard.Grace),
		EscalateAfter: a.Guard.EscalateAfter, Debounce: fmtDuration(c.Guards.Debounce),
		CrashLoop: crashLoopText(c.Guards.CrashLoop), RestartCount: a.Guard.RestartCount,
		SlowRetry: SlowRetryText(c.Guards.SlowRetry, c.Schedule.Every),
	}
	if a.Guard.SlowRetry != nil {
		g.SlowRetry = SlowRetryText(a.Guard.SlowRetry, c.Schedule.Every)
	}
	if g.After == 0 {
		g.After = c.Guards.After
	}
	if a.Guard.Budget == nil {
		g.Budget = budgetText(c.Guards.Budget)
	}
	g.Budget, g.SlowRetry = cmp.Or(g.Budget, "none"), cmp.Or(g.SlowRetry, "off")
	if a.Guard.Grace == 0 {
		g.Grace = fmtDuration(c.Guards.Grace)
	}
	if g.EscalateAfter == 0 {
		g.EscalateAfter = c.Guards.EscalateAfter
	}
	g.Said, g.Settings = rowSaid(c, a)
	on := a.On
	if on == "" {
		on = st.On
	}
	timeout := ""
	if a.Builtin == "" {
		timeout = fmtDuration(cmp.Or(a.Timeout, DefaultStepTimeout))
	}
	return PlanAction{
		Condition: a.Condition, Expr: a.Expr, Action: a.Action, Builtin: a.Builtin, Message: a.Message,
		On: on, Target: c.Chain(on), Guards: g, Timeout: timeout, Tier: a.Tier, Template: templateText(a.Template),
		Executed: !c.IsReportOnly(st.Agent), Line: a.Pos.Line,
		Sudo: a.Builtin == "" && c.TargetNamed(on).SudoCommands(),
	}
}

// WriteExplainText writes the plan for people, in the order the engine runs
// it. It returns the first write error.
func WriteExplainText(w io.Writer, c *Contract) error {
	return WriteExplainTextAt(w, c, time.Time{})
}

// WriteExplainTextAt is WriteExplainText with each maintenance window's
// next start as of now; a zero now leaves them out.
func WriteExplainTextAt(w io.Writer, c *Contract, now time.Time) error {
	p := Explain(c)
	if !now.IsZero() {
		p = ExplainAsOf(c, now)
	}
	if p == nil {
		return fmt.Errorf("explain: no contract")
	}
	ew := &errWriter{w: w}
	title := p.Name
	if p.Version != "" {
		title += " " + p.Version
	}
	if p.Title != "" {
		title += " — " + p.Title
	}
	ew.printf("%s\n", title)
	ew.printf("file: %s\n", p.Path)
	if p.Agent != "" {
		ew.printf("agent: %s\n", p.Agent)
	}
	if len(p.ReportOnlyAgents) > 0 {
		ew.printf("report-only (never repaired): %s\n", strings.Join(p.ReportOnlyAgents, ", "))
	}
	ew.printf("schedule: %s\n", scheduleText(p.Schedule))
	ew.printf("guards: %s\n", guardsText(p.Guards))
	if len(p.DependsOn) > 0 {
		ew.printf("depends on: %s (while one fails, a unit that fails too is suppressed: no repair, no incident; besides, each unit depends on the targets its stage reaches through via)\n", strings.Join(p.DependsOn, ", "))
	}
	for i, mw := range p.Maintenance {
		ew.printf("maintenance: %s", c.Maintenance[i])
		if mw.Announce {
			ew.printf(", announced")
		}
		switch {
		case mw.Open:
			ew.printf("; open now, until %s\n", mw.Until.Format(time.RFC3339))
		case mw.Next != nil:
			ew.printf("; next %s until %s\n", mw.Next.Format(time.RFC3339), mw.Until.Format(time.RFC3339))
		case now.IsZero():
			ew.printf("\n")
		default:
			ew.printf("; never again\n")
		}
	}
	if len(p.Targets) > 0 {
		ew.printf("targets:\n")
		for _, t := range p.Targets {
			ew.printf("  %-12s %s\n", t.Name, t.Chain)
		}
	}
	if len(p.Vars) > 0 {
		ew.printf("vars (each reaches a command as a shell variable, never as command text):\n")
		for _, v := range p.Vars {
			val := fmt.Sprint(v.Value) // a number, or true or false
			if str, ok := v.Value.(string); ok {
				val = strconv.Quote(str)
			}
			ew.printf("  %-12s %s\n", v.Name, val)
		}
	}
	if len(p.Secrets) > 0 {
		ew.printf("secrets (from the environment at run time, redacted): %s\n", strings.Join(p.Secrets, ", "))
	}
	for i, st := range p.Stages {
		ew.printf("\n%d. ", i+1)
		ew.stage(st)
		for _, s := range st.Steps {
			ew.step(s)
		}
		if len(st.Actions) > 0 {
			ew.printf("   actions:\n")
		}
		for _, a := range st.Actions {
			ew.action(a)
		}
	}
	if len(p.Escalation) > 0 {
		ew.printf("\nescalation:\n")
		for _, e := range p.Escalation {
			ew.printf("  when %s → %s: %s\n", e.Expr, e.Action, e.Message)
		}
	}
	if len(p.Maintains) > 0 {
		ew.printf("\nmaintains:\n")
		for _, k := range p.Maintains {
			t := k.Type
			if len(k.Enum) > 0 {
				t = `"` + strings.Join(k.Enum, `" | "`) + `"`
			}
			scope := ""
			if k.PerAgent {
				scope = "agents.*."
			}
			from := ""
			if k.Value != "" {
				from = " = " + k.Value
			}
			if len(k.Agents) > 0 {
				from += " (" + strings.Join(k.Agents, ", ") + ")"
			}
			ew.printf("  %s%s: %s%s\n", scope, k.Name, t, from)
		}
	}
	ew.printf("\nalerts: alert_on %s: %s\n", p.AlertOn, alertOnText[p.AlertOn])
	if len(c.Notify) == 0 {
		ew.printf("  no routes: messages are kept in the report and history only\n")
	}
	for _, r := range c.Notify {
		ew.printf("  %s\n", routeText(r))
	}
	for _, kind := range messageKinds {
		if t, ok := p.Messages[kind]; ok {
			ew.printf("  %s message: %s\n", kind, t)
		}
	}
	if p.Log != "" {
		ew.printf("log: %s (one line per run, action, alert and error)\n", p.Log)
	}
	return ew.err
}

// scheduleText says when the contract runs: "every 15m, and once on
// start".
func scheduleText(s PlanSchedule) string {
	onStart := ""
	if s.OnStart {
		onStart = ", and once on start"
	}
	delay := ""
	if s.StartDelay != "" {
		delay = fmt.Sprintf(", the first run %s after the daemon starts", s.StartDelay)
	}
	return "every " + s.Every + onStart + delay
}

// routeText is one alert route with its options in force: "route zulip:
// site https://…, …".
func routeText(r NotifyRoute) string {
	var opts []string
	for _, o := range routeOptions(r) {
		opts = append(opts, o[0]+" "+o[1])
	}
	what := strings.Join(opts, ", ")
	if r.Kind == "log" {
		if lo, ok := r.Options.(*LogOptions); ok && lo.Path == "" {
			what = "contractd's own log (stderr, or the journal), " + what
		}
	}
	name := r.Name
	if name != r.Kind {
		name += " (" + r.Kind + ")"
	}
	return "route " + name + ": " + what
}

// contractSaid says the contract's guard settings in force, in the
// table's order, and the registered ones' values by key.
func contractSaid(c *Contract) ([]string, map[string]string) {
	said := []string{}
	var more map[string]string
	for _, s := range guardSettings {
		if !s.Contract {
			continue
		}
		v := s.value(&c.Guards)
		if t := s.say(v, c.Schedule.Every); t != "" {
			said = append(said, t)
		}
		if s.Get == nil {
			if more == nil {
				more = map[string]string{}
			}
			more[s.Name] = showValue(v)
		}
	}
	return said, more
}

// rowSaid says the guard settings in force on an action row: the row's
// own, else the contract's, for every setting a row sets or explain says
// on every row (PerRow).
func rowSaid(c *Contract, a *ActionRow) ([]string, map[string]string) {
	said := []string{}
	var more map[string]string
	for _, s := range guardSettings {
		if !s.Row && !s.PerRow {
			continue
		}
		v := s.value(&c.Guards)
		if s.Row {
			if rv, ok := s.rowValue(a); ok {
				v = rv
			}
		}
		if t := s.say(v, c.Schedule.Every); t != "" {
			said = append(said, t)
		}
		if s.Get == nil && s.GetRow == nil {
			if more == nil {
				more = map[string]string{}
			}
			more[s.Name] = showValue(v)
		}
	}
	return said, more
}

// guardsText is the contract-wide guards in force, as one line.
func guardsText(g PlanGuards) string {
	return strings.Join(g.Said, ", ")
}

// stage writes a stage's heading lines: what it is, who and where, and a
// for_each stage's runs.
func (ew *errWriter) stage(st PlanStage) {
	flags := ""
	if st.Gate {
		flags += " [gate: when critical, the stages after it are skipped]"
	}
	if st.ReportOnly {
		flags += " [report-only]"
	}
	ew.printf("stage %s — %s%s\n", st.ID, st.Title, flags)
	who := ""
	if st.Agent != "" {
		who = "agent " + st.Agent + ", "
	}
	if st.Target == st.On {
		ew.printf("   %son %s\n", who, st.On)
	} else {
		ew.printf("   %son %s (%s)\n", who, st.On, st.Target)
	}
	if st.ForEach != "" {
		ew.printf("   once for each item of %s:\n", st.ForEach)
		for _, it := range st.Items {
			who := ""
			if it.Agent != "" {
				who = "agent " + it.Agent + ", "
			}
			ro := ""
			if it.ReportOnly {
				ro = " [report-only]"
			}
			if it.Target == it.On {
				ew.printf("     %s: %son %s%s\n", it.ID, who, it.On, ro)
			} else {
				ew.printf("     %s: %son %s (%s)%s\n", it.ID, who, it.On, it.Target, ro)
			}
		}
	}
}

// step writes a step: its kind, timeout and target, its command, and the
// health cells that judge it.
func (ew *errWriter) step(s PlanStep) {
	as := ""
	if s.As != "" {
		as = ", as " + s.As
	}
	if s.Sudo {
		as += ", through sudo -n"
	}
	ew.printf("   step %s (%s, timeout %s%s) on %s:\n", s.ID, s.Kind, s.Timeout, as, s.Target)
	for _, l := range strings.Split(s.Command, "\n") {
		ew.printf("       %s\n", l)
	}
	if s.Verdict != "" {
		ew.printf("     judged by %s\n", s.Verdict)
	}
	for _, h := range s.Health {
		ew.health(h)
	}
}

// health writes one health cell: the severity it decides, the field and
// what it compiled to.
func (ew *errWriter) health(h PlanHealth) {
	ew.printf("     %-9s when %-28s %s\n", h.Severity, h.Field, h.Expr)
}

// action writes an action row: its condition, what it does, and the
// guards in force on it.
func (ew *errWriter) action(a PlanAction) {
	what := "run `" + a.Action + "` on " + a.Target + " (timeout " + a.Timeout + ")"
	if a.Sudo {
		what = "run `sudo -n -- " + a.Action + "` on " + a.Target + " (timeout " + a.Timeout + ")"
	}
	if a.Builtin != "" {
		what = a.Builtin + ": " + a.Message
	}
	if !a.Executed {
		what += " (never executed: report-only agent)"
	}
	ew.printf("     when %s → %s\n", a.Expr, what)
	if a.Builtin == "" {
		g := strings.Join(a.Guards.Said, ", ")
		if a.Tier > 0 {
			g += fmt.Sprintf(", tier %d", a.Tier)
		}
		ew.printf("       guards: %s\n", g)
	}
	if a.Template != "" {
		ew.printf("       message: %s\n", a.Template)
	}
}

// errWriter keeps the first write error so the text writer reads straight.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err != nil {
		return
	}
	_, e.err = fmt.Fprintf(e.w, format, args...)
}
