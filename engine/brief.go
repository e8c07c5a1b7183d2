package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
)

// Briefing is what an agent that watches a contract (or one stage of it)
// needs before it starts: the contract's own prose, the plan of its
// stages (steps, health tables, the only repairs allowed, from
// contracts.Explain), what was already alerted (open incidents, recent
// messages) so it is not reported again, the maintenance windows in
// force, and the report it must write: the fields the health tables judge.
type Briefing struct {
	Contract    string `json:"contract"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Path        string `json:"path"`
	// Stage is the stage briefed, "" for the whole contract.
	Stage string `json:"stage,omitempty"`
	// Prose is the contract's Markdown body as written (the stage's
	// section alone when Stage is set); "" when the file cannot be read.
	Prose  string                `json:"prose"`
	Stages []contracts.PlanStage `json:"stages"`
	// Incidents are the open incidents, oldest first: already alerted.
	Incidents []*guard.Incident `json:"open_incidents"`
	// Messages are the messages of the recent runs, newest last.
	Messages    []BriefMessage           `json:"recent_messages"`
	Maintenance map[string]*guard.Window `json:"maintenance,omitempty"`
	// Report lists the fields a report must carry, step by step: the
	// fields each step declares (fields= or an example block) and those
	// its health table judges, each with its type.
	Report []ReportField `json:"report"`
	// ReportTo is where the report is to be written, for the session of
	// an agent step (ForReport); "" otherwise.
	ReportTo string `json:"report_to,omitempty"`
	// ReportStep is the agent step whose report that is.
	ReportStep string `json:"report_step,omitempty"`
	// Problems says what of the state could not be read.
	Problems []string `json:"problems,omitempty"`
}

// BriefMessage is one message a recent run sent (or held).
type BriefMessage struct {
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"` // open, reminder, resolved, repair, escalate, holddown
	Agent     string    `json:"agent,omitempty"`
	Condition string    `json:"condition"`
	Text      string    `json:"text"`
}

// ReportField is one field of a step's output: its type as the step
// declares it, and what each severity asks of it, as the health table's
// cells are written (none for a declared field no cell judges).
type ReportField struct {
	Stage string            `json:"stage"`
	Step  string            `json:"step"`
	Field string            `json:"field"`
	Type  string            `json:"type"`  // string, int, float, bool, list, map or any
	Cells map[string]string `json:"cells"` // severity → the cell as written
	// Declared marks a field of the step's JSON output, declared by its
	// author; the others are values of the step's kind (exit_code).
	Declared bool `json:"declared"`
}

// briefRuns is how many recent runs' messages a briefing lists.
const briefRuns = 10

// ErrNoStage is wrapped when a briefing names a stage the contract lacks.
var ErrNoStage = errors.New("no such stage")

// Brief renders contract c's briefing, or stage's alone when stage is not
// "", with the state in st as of now. It fails with ErrNoStage (naming the
// nearest stage) for a stage c does not have, and with an error wrapping
// store.ErrUnavailable when a shared store cannot be reached; what else
// cannot be read is named in Problems.
func Brief(c *contracts.Contract, stage string, st store.Backend, now time.Time) (*Briefing, error) {
	plan := contracts.Explain(c)
	b := &Briefing{Contract: c.Name, Title: c.Title, Description: c.Description, Path: c.Path, Stage: stage,
		Incidents: []*guard.Incident{}, Messages: []BriefMessage{}, Report: []ReportField{}}
	var ids []string
	for _, ps := range plan.Stages {
		ids = append(ids, ps.ID)
		if stage == "" || ps.ID == stage {
			b.Stages = append(b.Stages, ps)
		}
	}
	if len(b.Stages) == 0 {
		return nil, fmt.Errorf("%w %q in contract %s (its stages: %s)%s", ErrNoStage, stage, c.Name, strings.Join(ids, ", "), contracts.Suggest(stage, ids))
	}
	b.Prose = prose(c, stage)
	for _, ps := range b.Stages {
		for _, sp := range ps.Steps {
			b.Report = append(b.Report, reportFields(c, ps.ID, sp)...)
		}
	}
	sum, err := Summarize(st, c.Name, now)
	if err != nil {
		return nil, err
	}
	// The windows in force: an operator's, and those the contract declares.
	b.Incidents, b.Maintenance, b.Problems = sum.Incidents, AddDeclaredWindows(sum.Maintenance, c, now), sum.Problems
	hist, err := st.History(c.Name, briefRuns)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		b.Problems = append(b.Problems, "history: "+err.Error())
	}
	for _, h := range hist {
		for _, a := range h.Alerts {
			b.Messages = append(b.Messages, BriefMessage{At: h.StartedAt, Kind: a.Kind, Agent: a.Agent, Condition: a.Condition, Text: a.Text})
		}
	}
	return b, nil
}

// reportFields are the fields of plan step sp's output a report carries:
// those its health table judges, in the table's order, then those its
// author declared that no cell judges, by name; each with its type.
func reportFields(c *contracts.Contract, stage string, sp contracts.PlanStep) []ReportField {
	var step *contracts.Step
	for _, st := range c.Stages {
		for _, s := range st.Steps {
			if st.ID == stage && s.ID == sp.ID {
				step = s
			}
		}
	}
	typeOf := func(field string) string {
		if step != nil {
			if t, ok := step.ValueType(field); ok {
				return string(t)
			}
		}
		return string(contracts.TypeAny)
	}
	var out []ReportField
	byField := map[string]int{} // field → its index in out
	for _, h := range sp.Health {
		i, ok := byField[h.Field]
		if !ok {
			i = len(out)
			byField[h.Field] = i
			declared := false
			if step != nil {
				_, declared = step.Fields[h.Field]
			}
			out = append(out, ReportField{Stage: stage, Step: sp.ID, Field: h.Field, Type: typeOf(h.Field), Cells: map[string]string{}, Declared: declared})
		}
		out[i].Cells[h.Severity] = h.Source
	}
	if step == nil {
		return out
	}
	declared := make([]string, 0, len(step.Fields))
	for f := range step.Fields {
		if _, judged := byField[f]; !judged {
			declared = append(declared, f)
		}
	}
	sort.Strings(declared)
	for _, f := range declared {
		out = append(out, ReportField{Stage: stage, Step: sp.ID, Field: f, Type: string(step.Fields[f]), Cells: map[string]string{}, Declared: true})
	}
	return out
}

// ForReport narrows the briefing to the session of agent step step: its
// report section lists the fields that step declares, and says to write
// the report to path.
func (b *Briefing) ForReport(step, path string) {
	kept := b.Report[:0]
	for _, f := range b.Report {
		if f.Step == step && f.Declared {
			kept = append(kept, f)
		}
	}
	b.Report, b.ReportStep, b.ReportTo = kept, step, path
}

// prose returns the Markdown body of c's file after the front matter, or
// the section of stage (its heading to the next heading of its level or
// above) when stage is not ""; "" when the file cannot be read.
func prose(c *contracts.Contract, stage string) string {
	src, err := os.ReadFile(c.Path)
	if err != nil || int64(len(src)) > contracts.DefaultMaxFileSize*16 {
		return ""
	}
	lines := strings.Split(string(src), "\n")
	start := 0
	if yaml, line, ok := contracts.FrontMatterText(src); ok {
		// The body starts after the YAML's lines and the closing line,
		// as the parser reads them (a byte order mark, a "..." close).
		start = line + bytes.Count(yaml, []byte("\n"))
	}
	end := len(lines)
	if stage != "" {
		for _, st := range c.Stages {
			if st.ID != stage || st.Pos.Line < 1 || st.Pos.Line > len(lines) {
				continue
			}
			start = st.Pos.Line - 1
			level := headingLevel(lines[start])
			fence := false
			for i := start + 1; i < len(lines); i++ {
				if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
					fence = !fence
				}
				if l := headingLevel(lines[i]); !fence && l > 0 && l <= level {
					end = i
					break
				}
			}
		}
	}
	return strings.TrimSpace(strings.Join(lines[start:end], "\n"))
}

// headingLevel is the level of an ATX heading line (## x is 2), 0 for
// any other line.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || (len(line) > n && line[n] != ' ') {
		return 0
	}
	return n
}

// WriteBrief writes the briefing as Markdown, for an agent's prompt or a
// person. It returns the first write error.
func WriteBrief(w io.Writer, b *Briefing) error {
	var out bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }
	what := "contract " + b.Contract
	if b.Stage != "" {
		what = "stage " + b.Stage + " of contract " + b.Contract
	}
	p("# Briefing: %s\n\n", what)
	if b.Title != "" {
		p("%s\n\n", b.Title)
	}
	if b.Description != "" {
		p("%s\n\n", b.Description)
	}
	p("You watch what this contract declares. Report what you observe; do not repair: " +
		"the engine runs only the repairs listed below, inside its guards. " +
		"Do not report again what is listed under \"Already alerted\".\n\n")

	p("## What to check\n\n")
	for _, st := range b.Stages {
		who := ""
		if st.Agent != "" {
			who = ", agent " + st.Agent
		}
		ro := ""
		if st.ReportOnly {
			ro = " (report-only: never repaired)"
		}
		p("### Stage %s — %s (on %s%s)%s\n\n", st.ID, st.Title, st.Target, who, ro)
		for _, sp := range st.Steps {
			if sp.ID == b.ReportStep {
				// The harness's own script is no news to the agent.
				p("Step `%s` (%s, timeout %s) is this session: your report, below, is its output.\n\n", sp.ID, sp.Kind, sp.Timeout)
			} else {
				p("Step `%s` (%s, timeout %s):\n\n```\n%s\n```\n\n", sp.ID, sp.Kind, sp.Timeout, sp.Command)
			}
			if len(sp.Health) > 0 {
				p("| field | severity | when |\n|---|---|---|\n")
				for _, h := range sp.Health {
					p("| `%s` | %s | `%s` |\n", h.Field, h.Severity, h.Source)
				}
				p("\n")
			}
		}
		if len(st.Actions) == 0 {
			p("Allowed repairs: none.\n\n")
			continue
		}
		p("Allowed repairs (nothing else ever runs):\n\n")
		for _, a := range st.Actions {
			what := "`" + a.Action + "`"
			if a.Builtin != "" {
				what = a.Builtin
			}
			never := ""
			if !a.Executed {
				never = " (report-only agent: logged, never run)"
			}
			p("- when `%s`: %s%s\n", a.Condition, what, never)
		}
		p("\n")
	}

	p("## Already alerted\n\n")
	if len(b.Incidents) == 0 {
		p("No open incident.\n\n")
	}
	for _, inc := range b.Incidents {
		who := inc.Agent
		if who == AllAgents || who == "" {
			who = "the contract"
		}
		p("- open since %s: %s: %s (%s)", inc.OpenedAt.UTC().Format(time.RFC3339), who, inc.Condition, nonEmptyOr(inc.Severity, "unknown"))
		if inc.Text != "" {
			p(" — %s", oneLine(inc.Text))
		}
		p("\n")
	}
	if len(b.Incidents) > 0 {
		p("\n")
	}
	if len(b.Messages) > 0 {
		p("Recent messages (newest last):\n\n")
		for _, m := range b.Messages {
			who := m.Agent
			if who == "" || who == AllAgents {
				who = "contract"
			}
			p("- %s %s %s: %s: %s\n", m.At.UTC().Format(time.RFC3339), m.Kind, who, m.Condition, oneLine(m.Text))
		}
		p("\n")
	}

	p("## Maintenance\n\n")
	if len(b.Maintenance) == 0 {
		p("No maintenance window.\n\n")
	}
	keys := sortedKeys(b.Maintenance)
	for _, k := range keys {
		who := "agent " + k
		if k == AllAgents {
			who = "the whole contract"
		}
		p("- %s: %s\n", who, b.Maintenance[k].String())
	}
	if len(keys) > 0 {
		p("\n")
	}

	p("## Your report\n\n")
	switch {
	case b.ReportTo != "":
		p("Write your report to `%s` (the path is also in $CONTRACTD_REPORT) as one JSON object with exactly these fields, each of its type, "+
			"then exit. A report that is late, missing, not JSON, lacks a field, has one of another type or one not listed here is not taken: "+
			"the step is then unknown. The health tables judge the fields as shown:\n\n", b.ReportTo)
		p("| field | type | healthy | degraded | critical |\n|---|---|---|---|---|\n")
		for _, f := range b.Report {
			p("| `%s` | %s | %s | %s | %s |\n", f.Field, f.Type, cellOr(f.Cells["healthy"]), cellOr(f.Cells["degraded"]), cellOr(f.Cells["critical"]))
		}
	case len(b.Report) == 0:
		p("The stages briefed judge no field.\n")
	default:
		p("A JSON object per step with these fields, each of its type; the health tables judge them as shown:\n\n")
		p("| stage | step | field | type | healthy | degraded | critical |\n|---|---|---|---|---|---|---|\n")
		for _, f := range b.Report {
			p("| %s | %s | `%s` | %s | %s | %s | %s |\n", f.Stage, f.Step, f.Field, f.Type, cellOr(f.Cells["healthy"]), cellOr(f.Cells["degraded"]), cellOr(f.Cells["critical"]))
		}
	}
	if len(b.Problems) > 0 {
		p("\nNot read: %s\n", strings.Join(b.Problems, "; "))
	}
	if b.Prose != "" {
		p("\n## The contract as written\n\n%s\n", b.Prose)
	}
	_, err := w.Write(out.Bytes())
	return err
}

func cellOr(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

func nonEmptyOr(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// oneLine keeps a message's first line, for a list item.
func oneLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}
