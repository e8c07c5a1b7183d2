package engine

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// Mark is the status mark a report shows for a severity.
func Mark(s contracts.Severity) string {
	switch s {
	case contracts.SeverityHealthy:
		return "✔"
	case contracts.SeverityDegraded:
		return "▲"
	case contracts.SeverityCritical:
		return "✖"
	case contracts.SeverityUnreachable:
		return "⊘"
	case contracts.SeveritySkipped:
		return "–"
	case contracts.SeveritySuppressed:
		return "↓"
	}
	return "?"
}

// WriteText renders a report for people: a summary line, per stage a
// mark, the agent, the severity (after a verified repair, the state after
// it) and the failing rows with actual against expected, then the actions
// and alerts, in aligned columns. The summary line never contradicts the
// rows: an agent seen worse than its settled severity (hysteresis) is named
// in it. It returns the first write error.
func WriteText(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	if rep.Skipped != "" {
		ew.printf("%s: skipped: %s\n", rep.Contract, rep.Skipped)
		return ew.err
	}
	mode := ""
	if rep.DryRun {
		mode = " (dry run: nothing runs, nothing is sent)"
	}
	name := rep.Contract
	if rep.Version != "" {
		name += " " + rep.Version
	}
	ew.printf("%s — %s%s%s\n", name, strings.ToUpper(rep.OverallSeverity.String()), heldNote(rep), mode)
	ew.printf("run %s at %s, %d ms", rep.RunID, rep.StartedAt.Format("2006-01-02 15:04:05Z07:00"), rep.DurationMS)
	if rep.RequestedBy != "" {
		ew.printf(", requested by %s", transports.Printable(rep.RequestedBy))
	}
	ew.printf("\n\n")

	// Stage rows go through a tabwriter; the lines under each row (its
	// findings) are put back between them afterwards, so they do not
	// break the columns.
	var rows bytes.Buffer
	tw := tabwriter.NewWriter(&rows, 0, 4, 2, ' ', 0)
	under := make([][]string, len(rep.Stages))
	for i, st := range rep.Stages {
		who := st.Agent
		if who == "" {
			who = "-"
		}
		sev, extra := st.Severity.String(), ""
		if st.Verify != nil && st.Verify.Severity != st.Severity {
			sev = st.Verify.Severity.String()
			extra = "  (" + st.Severity.String() + " before the repair)"
		}
		mark := Mark(st.Severity)
		if st.Verify != nil {
			mark = Mark(st.Verify.Severity)
		}
		if st.Gate {
			extra += "  [gate]"
		}
		if st.Status == StatusSkipped || st.Status == StatusUnreachable {
			extra += "  (" + st.Status + ": " + st.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tvia %s%s\n", mark, printable(st.ID), printable(who), sev, printable(st.Target), printable(extra))
		for _, sp := range st.Steps {
			for _, f := range sp.Findings {
				under[i] = append(under[i], fmt.Sprintf("    %s %s: %s", Mark(sp.Severity), sp.ID, f))
			}
			if sp.Note != "" {
				under[i] = append(under[i], fmt.Sprintf("    ↻ %s: %s", sp.ID, sp.Note))
			}
		}
	}
	tw.Flush()
	for i, line := range strings.SplitAfter(strings.TrimSuffix(rows.String(), "\n"), "\n") {
		ew.raw(strings.TrimRight(line, " \n") + "\n")
		if i < len(under) {
			for _, u := range under[i] {
				ew.printf("%s\n", u)
			}
		}
	}
	if len(rep.Agents) > 0 {
		ew.printf("\nagents:")
		for _, n := range sortedAgents(rep) {
			a := rep.Agents[n]
			extra := ""
			if a.Raw != a.Severity && a.Raw != contracts.SeveritySkipped {
				extra = " (seen " + a.Raw.String() + ")"
			}
			if a.ReportOnly {
				extra += " [report-only]"
			}
			if a.Flapping {
				extra += fmt.Sprintf(" [flapping: %.0f%% of its last runs changed]", a.FlapPercent)
			}
			ew.printf(" %s %s=%s%s", Mark(a.Severity), n, a.Severity, extra)
		}
		ew.printf("\n")
		for _, n := range sortedAgents(rep) {
			if s := rep.Agents[n].Suppressed; s != nil {
				ew.printf("  %s suppressed (root cause %s): %s\n", n, s.Root, s.Reason)
			}
		}
	}
	if len(rep.Actions) > 0 {
		ew.printf("\nactions:\n")
		var b bytes.Buffer
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, a := range rep.Actions {
			verify := ""
			if a.Verify != "" {
				verify = " → " + a.Verify
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t[%s] %s%s\n", printable(a.Agent), a.Status, printable(a.Command()), printable(a.Condition), printable(guardSays(a)), verify)
		}
		tw.Flush()
		ew.raw(b.String())
	}
	if len(rep.Alerts) > 0 {
		ew.printf("\nalerts:\n")
		var b bytes.Buffer
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, a := range rep.Alerts {
			retry := ""
			if a.Retry {
				retry = " [retry from " + a.Time.UTC().Format(time.RFC3339) + "]"
			}
			fmt.Fprintf(tw, "  %s\t%s%s\t(%s)\n", a.Kind, printable(a.Text), retry, printable(a.Summary()))
		}
		tw.Flush()
		ew.raw(b.String())
	}
	for _, e := range rep.Errors {
		ew.printf("\nerror: %s\n", e)
	}
	return ew.err
}

// printable escapes control characters in text from a target before it
// goes through a tabwriter (which would count a raw tab as a column).
func printable(s string) string { return transports.Printable(s) }

func sortedAgents(rep *Report) []string {
	names := make([]string, 0, len(rep.Agents))
	for n, a := range rep.Agents {
		if a != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// seen is what an agent was seen as this run: its severity after a
// verified repair, else the worse of its settled and raw severities (an
// agent hysteresis holds at healthy was still seen critical).
func seen(a *AgentReport) contracts.Severity {
	if a.Suppressed != nil {
		return a.Severity // its failure is its dependency's: said there
	}
	if a.BeforeRepair != contracts.SeverityUnknown || a.Raw == contracts.SeveritySkipped || a.Raw == contracts.SeverityUnknown {
		return a.Severity
	}
	if nagiosRank(NagiosCode(a.Raw)) > nagiosRank(NagiosCode(a.Severity)) {
		return a.Raw
	}
	return a.Severity
}

// heldNote names the agents seen worse than their settled severity, so the
// summary line agrees with the rows: ", abiba seen critical (held by
// hysteresis)".
func heldNote(rep *Report) string {
	var held []string
	for _, n := range sortedAgents(rep) {
		a := rep.Agents[n]
		if s := seen(a); s != a.Severity {
			held = append(held, n+" seen "+s.String())
		}
	}
	if len(held) == 0 {
		return ""
	}
	return ", " + strings.Join(held, ", ") + " (held by hysteresis: not yet counted)"
}

// guardSays is an action's reason, prefixed by the guard that decided it
// when one did ("budget: over budget: …"), once.
func guardSays(a *ActionReport) string {
	if a.Guard == "" {
		return a.Reason
	}
	return a.Guard + ": " + a.Why()
}

// WriteWhy renders the last run h of contract name as `contractd why` and
// the MCP why tool say it: who asked, what operators did before it (and,
// from since, after it), each step's findings, the agents a dependency
// suppressed or that flap, and every candidate action with each guard's
// answer (WriteTrace).
func WriteWhy(w io.Writer, name string, h store.RunRecord, since []store.OperatorEvent) error {
	ew := &errWriter{w: w}
	ew.printf("%s run %s at %s: %s\n", name, h.RunID, h.StartedAt.Format(time.RFC3339), h.OverallSeverity)
	if h.Interrupted != "" {
		ew.printf("  interrupted: %s\n", h.Interrupted)
	}
	if h.RequestedBy != "" {
		ew.printf("  requested by %s\n", h.RequestedBy)
	}
	for _, ev := range h.Operator {
		ew.printf("  before it: %s\n", ev.String())
	}
	for _, ev := range since {
		ew.printf("  since then: %s\n", ev.String())
	}
	steps := make([]string, 0, len(h.Findings))
	for step := range h.Findings {
		steps = append(steps, step)
	}
	sort.Strings(steps)
	for _, step := range steps {
		for _, line := range h.Findings[step] {
			ew.printf("  %s: %s\n", step, line)
		}
	}
	agents := map[string]*AgentReport{}
	for a, sup := range h.Suppressed {
		agents[a] = &AgentReport{Agent: a, Suppressed: &guard.Suppression{By: sup.By, Root: sup.Root, Waiting: sup.Waiting, Reason: sup.Reason}}
	}
	flapping := make([]string, 0, len(h.Flapping))
	for a := range h.Flapping {
		flapping = append(flapping, a)
	}
	sort.Strings(flapping)
	for _, a := range flapping {
		ew.printf("  %s: flapping (its state changed in %.0f%% of its last runs): its messages wait until it settles\n", a, h.Flapping[a])
	}
	if ew.err != nil {
		return ew.err
	}
	return WriteTrace(w, &Report{RunID: h.RunID, Actions: h.Actions, Agents: agents})
}

// WriteTrace renders every candidate action with each guard's answer, for
// --dry-run and `contractd why`, after the agents a dependency suppressed
// and why.
func WriteTrace(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	for _, n := range sortedAgents(rep) {
		if s := rep.Agents[n].Suppressed; s != nil {
			ew.printf("%s: suppressed, not repaired and not alerted: %s (root cause %s)\n", n, s.Reason, s.Root)
		}
	}
	if len(rep.Actions) == 0 {
		ew.printf("no action table row held in run %s\n", rep.RunID)
	}
	for _, a := range rep.Actions {
		ew.printf("%s/%s: %s `%s` when %s\n  → %s: %s\n", a.Agent, a.Stage, a.Status, a.Command(), a.Condition, nonEmpty(a.Guard, "decided"), a.Why())
		for _, t := range a.Trace {
			ew.printf("    %s\n", t)
		}
		if a.ExitCode != nil {
			ew.printf("  exit %d\n", *a.ExitCode)
		}
		for _, out := range []struct{ name, text string }{{"stdout", a.Stdout}, {"stderr", a.Stderr}} {
			if out.text != "" {
				ew.printf("  %s: %s\n", out.name, out.text)
			}
		}
	}
	return ew.err
}

// NagiosCode maps an overall severity to a Nagios plugin exit code.
func NagiosCode(s contracts.Severity) int {
	switch s {
	case contracts.SeverityHealthy:
		return 0
	case contracts.SeverityDegraded, contracts.SeverityUnreachable:
		// An unreachable agent is critical only past unreachable_after,
		// and then the overall severity is critical: a blip warns, never pages.
		return 1
	case contracts.SeverityCritical:
		return 2
	case contracts.SeveritySuppressed:
		// Its failure is its dependency's, which pages: the check says
		// so in its text and long output, and does not page again.
		return 0
	}
	return 3
}

// nagiosRank orders Nagios codes by how bad they are: OK, WARNING,
// UNKNOWN, CRITICAL.
func nagiosRank(code int) int {
	return map[int]int{0: 0, 1: 1, 3: 2, 2: 3}[code]
}

// NagiosStatus is the Nagios plugin exit code of a report: the worst of
// the overall severity and of what every agent and agentless stage (a
// gate) was seen as this run. An agent that hysteresis holds at healthy
// but was seen critical makes the check CRITICAL: Nagios applies its own
// retries (max_check_attempts) to the state a plugin reports.
func NagiosStatus(rep *Report) int {
	code := NagiosCode(rep.OverallSeverity)
	worse := func(c int) {
		if nagiosRank(c) > nagiosRank(code) {
			code = c
		}
	}
	for _, n := range sortedAgents(rep) {
		worse(NagiosCode(seen(rep.Agents[n])))
	}
	for _, st := range rep.Stages {
		if st.Agent == "" && st.Status != StatusSkipped {
			sev := st.Severity
			if st.Verify != nil {
				sev = st.Verify.Severity
			}
			worse(NagiosCode(sev))
		}
	}
	return code
}

// NagiosLabel is the state word of a Nagios exit code.
func NagiosLabel(code int) string {
	switch code {
	case 0:
		return "OK"
	case 1:
		return "WARNING"
	case 2:
		return "CRITICAL"
	}
	return "UNKNOWN"
}

// WriteNagios prints the Nagios plugin output: one status line, whose
// state is NagiosStatus and whose text names every agent or gate not seen
// healthy and every agent a repair changed ("abiba repaired (was
// critical)"), with performance data in the plugin guidelines' syntax
// ('label'=value[UOM];warn;crit;min;max), then the long output: one line
// per repair that ran (its command, its outcome, what verification saw)
// and one per finding, a repaired stage's findings from before the repair
// marked so. After a repair (--nagios --repair) the state, the text and
// the counts are those verification saw: Nagios reads stdout only, so
// nothing of it is said on stderr alone.
func WriteNagios(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	code := NagiosStatus(rep)
	counts := map[contracts.Severity]int{}
	repairs := nagiosRepairs(rep)
	var bad []string
	for _, st := range rep.Stages {
		if st.Agent == "" && st.Status != StatusSkipped && st.Severity != contracts.SeverityHealthy {
			sev := st.Severity
			if st.Verify != nil {
				sev = st.Verify.Severity
			}
			switch {
			case sev != contracts.SeverityHealthy && st.Verify != nil:
				bad = append(bad, st.ID+" "+sev.String()+" (repaired, was "+st.Severity.String()+")")
			case sev != contracts.SeverityHealthy:
				bad = append(bad, st.ID+" "+sev.String())
			case st.Verify != nil:
				bad = append(bad, st.ID+" repaired (was "+st.Severity.String()+")")
			}
		}
	}
	names := sortedAgents(rep)
	ran := 0
	for _, n := range names {
		a := rep.Agents[n]
		s := seen(a)
		counts[s]++
		changed := a.BeforeRepair != contracts.SeverityUnknown && a.BeforeRepair != a.Severity
		switch {
		case changed && s == contracts.SeverityHealthy:
			bad = append(bad, n+" repaired (was "+a.BeforeRepair.String()+")")
		case changed:
			bad = append(bad, n+" "+s.String()+" (repaired, was "+a.BeforeRepair.String()+")")
		case s == contracts.SeverityHealthy, s == contracts.SeveritySkipped:
		case a.Suppressed != nil:
			bad = append(bad, n+" suppressed by "+a.Suppressed.Root)
		case s != a.Severity:
			bad = append(bad, n+" "+s.String()+" (held by hysteresis)")
		case repairs[n] != "":
			bad = append(bad, n+" "+s.String()+" ("+repairs[n]+")")
		default:
			bad = append(bad, n+" "+s.String())
		}
	}
	for _, a := range rep.Actions {
		if a.Kind == KindRepair && (a.Status == ActionRan || a.Status == ActionFailed) {
			ran++
		}
	}
	summary := "all agents healthy"
	if len(bad) > 0 {
		summary = strings.Join(bad, ", ")
	}
	if len(rep.Errors) > 0 {
		summary += "; " + strconv.Itoa(len(rep.Errors)) + " engine error(s)"
	}
	n := len(names)
	perf := []string{
		perfdata("healthy", strconv.Itoa(counts[contracts.SeverityHealthy]), "", "", n),
		perfdata("degraded", strconv.Itoa(counts[contracts.SeverityDegraded]), "", "", n),
		perfdata("critical", strconv.Itoa(counts[contracts.SeverityCritical]), "", "", n),
		perfdata("unreachable", strconv.Itoa(counts[contracts.SeverityUnreachable]), "", "", n),
		perfdata("repairs", strconv.Itoa(ran), "", "", -1),
		perfdata("duration", strconv.FormatFloat(float64(rep.DurationMS)/1000, 'f', 3, 64), "s", "", -1),
	}
	// The fields the contract exports ({export=true}), as stage/step.field;
	// of a repaired stage, the values after the repair.
	for _, st := range rep.Stages {
		cur := st
		if st.Verify != nil {
			cur = st.Verify
		}
		for _, sp := range cur.Steps {
			fields := make([]string, 0, len(sp.Metrics))
			for f := range sp.Metrics {
				fields = append(fields, f)
			}
			sort.Strings(fields)
			for _, f := range fields {
				perf = append(perf, perfdata(st.ID+"/"+sp.ID+"."+f, strconv.FormatFloat(sp.Metrics[f], 'f', -1, 64), "", "", -2))
			}
		}
	}
	ew.printf("%s %s - %s | %s\n", strings.ToUpper(rep.Contract), NagiosLabel(code), summary, strings.Join(perf, " "))
	for _, a := range rep.Actions {
		if a.Kind != KindRepair || (a.Status != ActionRan && a.Status != ActionFailed) {
			continue
		}
		who := nonEmpty(a.Agent, a.Stage)
		switch {
		case a.Status == ActionFailed:
			ew.printf("%s: repair failed: `%s`: %s\n", who, a.Action, a.Reason)
		case a.Verify != "":
			ew.printf("%s: repair ran: `%s` → %s%s\n", who, a.Action, a.Verify, nagiosAfter(rep, a))
		default:
			ew.printf("%s: repair ran: `%s`\n", who, a.Action)
		}
	}
	for _, n := range names {
		if s := rep.Agents[n].Suppressed; s != nil {
			ew.printf("%s: suppressed, neither repaired nor alerted: %s (root cause %s)\n", n, s.Reason, s.Root)
		}
		if a := rep.Agents[n]; a.Flapping {
			ew.printf("%s: flapping: its state changed in %.0f%% of its last runs\n", n, a.FlapPercent)
		}
	}
	for _, st := range rep.Stages {
		before := ""
		if st.Verify != nil {
			before = " (before the repair)"
		}
		for _, sp := range st.Steps {
			for _, f := range sp.Findings {
				ew.printf("%s/%s%s: %s\n", st.ID, sp.ID, before, f)
			}
		}
		if st.Verify != nil {
			for _, sp := range st.Verify.Steps {
				for _, f := range sp.Findings {
					ew.printf("%s/%s: %s\n", st.ID, sp.ID, f)
				}
			}
		}
	}
	return ew.err
}

// nagiosRepairs says, per agent, how its repairs this run ended when none
// changed its severity: "repair failed", "repair did not help".
func nagiosRepairs(rep *Report) map[string]string {
	out := map[string]string{}
	for _, a := range rep.Actions {
		if a.Kind != KindRepair || a.Agent == "" {
			continue
		}
		switch {
		case a.Status == ActionFailed:
			out[a.Agent] = "repair failed"
		case a.Status == ActionRan && a.Verify == guard.RemediationFailed && out[a.Agent] == "":
			out[a.Agent] = "repair did not help"
		}
	}
	return out
}

// nagiosAfter is what verification saw of a repaired stage: ", now
// healthy (was critical)".
func nagiosAfter(rep *Report, a *ActionReport) string {
	for _, st := range rep.Stages {
		if st.ID == a.Stage && st.Verify != nil {
			return ", now " + st.Verify.Severity.String() + " (was " + st.Severity.String() + ")"
		}
	}
	return ""
}

// perfdata renders one performance value: 'label'=value[UOM];warn;crit;min;max,
// with max when max >= 0 and min 0 for counts and durations (max >= -1);
// max < -1 leaves min out too (an exported field may be negative). Labels are quoted when they hold
// anything beyond letters, digits, '_' and '.', and a quote in a label is
// doubled, as the guidelines say.
func perfdata(label, value, uom, warncrit string, max int) string {
	l := label
	if strings.IndexFunc(label, func(r rune) bool {
		return !(r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) >= 0 {
		l = "'" + strings.ReplaceAll(label, "'", "''") + "'"
	}
	mn, mx := "0", ""
	if max >= 0 {
		mx = strconv.Itoa(max)
	}
	if max < -1 {
		mn = ""
	}
	if warncrit == "" {
		warncrit = ";"
	}
	return l + "=" + value + uom + ";" + warncrit + ";" + mn + ";" + mx
}

type errWriter struct {
	w   io.Writer
	err error
}

// raw writes text whose every piece from a target was made Printable
// already (a tabwriter's output).
func (e *errWriter) raw(s string) {
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

// printf writes one piece of human output. Every string and error
// argument is made Printable: stdout, findings and errors from a target
// cannot move the cursor, clear the screen or start a line of their own.
func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, transports.PrintableArgs(args)...)
	}
}
