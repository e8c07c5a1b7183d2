package engine

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
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
	}
	return "?"
}

// WriteText renders a report for people: per stage a mark, the agent, the
// severity and the failing rows with actual against expected, then the
// actions and alerts. It returns the first write error.
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
	ew.printf("%s %s — %s%s\n", rep.Contract, rep.Version, strings.ToUpper(rep.OverallSeverity.String()), mode)
	ew.printf("run %s at %s, %d ms\n\n", rep.RunID, rep.StartedAt.Format("2006-01-02 15:04:05Z07:00"), rep.DurationMS)
	for _, st := range rep.Stages {
		who := st.Agent
		if who == "" {
			who = "-"
		}
		gate := ""
		if st.Gate {
			gate = " [gate]"
		}
		line := fmt.Sprintf("%s %-14s %-12s %-11s via %s%s", Mark(st.Severity), st.ID, who, st.Severity, st.Target, gate)
		if st.Status == StatusSkipped || st.Status == StatusUnreachable {
			line += "  (" + st.Status + ": " + st.Reason + ")"
		}
		ew.printf("%s\n", line)
		for _, sp := range st.Steps {
			for _, f := range sp.Findings {
				ew.printf("    %s %s: %s\n", Mark(sp.Severity), sp.ID, f)
			}
			if sp.Note != "" {
				ew.printf("    ↻ %s: %s\n", sp.ID, sp.Note)
			}
		}
	}
	if len(rep.Agents) > 0 {
		ew.printf("\nagents:")
		names := make([]string, 0, len(rep.Agents))
		for n := range rep.Agents {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := rep.Agents[n]
			extra := ""
			if a.Raw != a.Severity && a.Raw != contracts.SeveritySkipped {
				extra = " (seen " + a.Raw.String() + ")"
			}
			if a.ReportOnly {
				extra += " [report-only]"
			}
			ew.printf(" %s %s=%s%s", Mark(a.Severity), n, a.Severity, extra)
		}
		ew.printf("\n")
	}
	if len(rep.Actions) > 0 {
		ew.printf("\nactions:\n")
		for _, a := range rep.Actions {
			verify := ""
			if a.Verify != "" {
				verify = " → " + a.Verify
			}
			ew.printf("  %-10s %-8s %s  [%s] %s%s\n", a.Agent, a.Status, a.Action, a.Condition, a.Reason, verify)
		}
	}
	if len(rep.Alerts) > 0 {
		ew.printf("\nalerts:\n")
		for _, a := range rep.Alerts {
			retry := ""
			if a.Retry {
				retry = " [retry from " + a.Time.UTC().Format(time.RFC3339) + "]"
			}
			ew.printf("  %-9s %s%s (%s)\n", a.Kind, a.Text, retry, a.Summary())
		}
	}
	for _, e := range rep.Errors {
		ew.printf("\nerror: %s\n", e)
	}
	return ew.err
}

// WriteTrace renders every candidate action with each guard's answer, for
// --dry-run and `contractd why`.
func WriteTrace(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	if len(rep.Actions) == 0 {
		ew.printf("no action table row held in run %s\n", rep.RunID)
	}
	for _, a := range rep.Actions {
		ew.printf("%s/%s: %s `%s` when %s\n  → %s: %s\n", a.Agent, a.Stage, a.Status, a.Action, a.Condition, nonEmpty(a.Guard, "decided"), a.Reason)
		for _, t := range a.Trace {
			ew.printf("    %s\n", t)
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
	}
	return 3
}

// WriteNagios prints the Nagios plugin output: one status line with
// perfdata, then one line per non-healthy agent.
func WriteNagios(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	label := map[int]string{0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}[NagiosCode(rep.OverallSeverity)]
	counts := map[contracts.Severity]int{}
	var bad []string
	names := make([]string, 0, len(rep.Agents))
	for n := range rep.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := rep.Agents[n]
		counts[a.Severity]++
		if a.Severity != contracts.SeverityHealthy {
			bad = append(bad, n+" "+a.Severity.String())
		}
	}
	summary := "all agents healthy"
	if len(bad) > 0 {
		summary = strings.Join(bad, ", ")
	}
	ew.printf("%s %s - %s | healthy=%d degraded=%d critical=%d unreachable=%d duration=%.3fs\n",
		strings.ToUpper(rep.Contract), label, summary,
		counts[contracts.SeverityHealthy], counts[contracts.SeverityDegraded], counts[contracts.SeverityCritical], counts[contracts.SeverityUnreachable],
		float64(rep.DurationMS)/1000)
	for _, st := range rep.Stages {
		for _, sp := range st.Steps {
			for _, f := range sp.Findings {
				ew.printf("%s/%s: %s\n", st.ID, sp.ID, f)
			}
		}
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

// printf writes one piece of human output. Every string and error
// argument is made Printable: stdout, findings and errors from a target
// cannot move the cursor, clear the screen or start a line of their own.
func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, transports.PrintableArgs(args)...)
	}
}
