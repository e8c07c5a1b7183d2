package steps

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// nagiosKind runs a Nagios plugin (check_disk, check_http, check_procs,
// anything that follows the Monitoring Plugins guidelines) on the step's
// target, like a bash step: the block is one plugin command line, run by
// sh through the target's transport with the contract's vars as shell
// variables. The plugin's exit status is its verdict (0 OK healthy, 1
// WARNING degraded, 2 CRITICAL critical, 3 UNKNOWN unknown); its status
// line and long output are its findings; its perfdata are values a table
// reads (perf["/"].value). docs/contract-format.md, "Nagios plugins",
// says how a table combines with the plugin's verdict.
var nagiosKind = Kind{
	StepKind: contracts.StepKind{
		Name:     "nagios",
		Shell:    "sh",
		Parse:    parseNagios,
		Command:  nagiosCommand,
		Expected: "plugin_status",
		Values:   nagiosValues,
		As:       []contracts.AsForm{contracts.AsText},
		Verdict:  true,
		VerdictDoc: "the plugin's exit status (0 healthy, 1 degraded, 2 critical, 3 unknown), " +
			"the worst of it and the rows below; a row on exit_code or plugin_status judges the status instead",
		Reported: []string{"plugin_status", "output", "perf"},
		Words:    map[string][]string{"plugin_status": pluginStatuses()},
	},
	Replay:  replayExec,
	Observe: observeNagios,
	Judge:   judgeNagios,
}

// nagiosValues are what a nagios step produces: the exec values, the
// plugin's status, output and perfdata.
var nagiosValues = append(append([]contracts.Value{}, contracts.ExecValues...),
	contracts.Value{Name: "plugin_status", Type: contracts.TypeString, Doc: "the plugin's status by its exit code: OK (0), WARNING (1), CRITICAL (2) or UNKNOWN (3, and any other exit, a timeout's included)"},
	contracts.Value{Name: "output", Type: contracts.TypeString, Doc: "the plugin's status line: its first line of output, without the perfdata after it"},
	contracts.Value{Name: "long_output", Type: contracts.TypeString, Doc: "the plugin's long output: the lines after the status line, without perfdata, joined by newlines"},
	contracts.Value{Name: "perf", Type: contracts.TypeMap, Doc: "the plugin's perfdata by label, as printed without its quotes (perf[\"/\"]); a label the plugin did not print is missing"},
	contracts.Value{Name: "perf.*.value", Type: contracts.TypeFloat, Doc: "the measured value, in its unit of measure; null when the plugin printed U (no value)"},
	contracts.Value{Name: "perf.*.uom", Type: contracts.TypeString, Doc: "the value's unit of measure as printed (s, ms, us, %, B, KB, MB, GB, TB, c), empty when none"},
	contracts.Value{Name: "perf.*.warn", Type: contracts.TypeFloat, Doc: "the warning threshold when it is one number (N: the plugin warns above N), else null"},
	contracts.Value{Name: "perf.*.crit", Type: contracts.TypeFloat, Doc: "the critical threshold when it is one number, else null"},
	contracts.Value{Name: "perf.*.warn_range", Type: contracts.TypeString, Doc: "the warning threshold as printed, a range included (10, 10:, ~:10, 10:20, @10:20); empty when none"},
	contracts.Value{Name: "perf.*.crit_range", Type: contracts.TypeString, Doc: "the critical threshold as printed; empty when none"},
	contracts.Value{Name: "perf.*.min", Type: contracts.TypeFloat, Doc: "the least value possible, null when not printed"},
	contracts.Value{Name: "perf.*.max", Type: contracts.TypeFloat, Doc: "the greatest value possible, null when not printed"},
)

// pluginDirs are where a plugin named without a directory is looked for
// on the target, after its own PATH: Debian's and Ubuntu's
// monitoring-plugins, Fedora's and RHEL's nagios-plugins, and a build
// from source.
var pluginDirs = []string{"/usr/lib/nagios/plugins", "/usr/lib64/nagios/plugins", "/usr/local/nagios/libexec"}

// nagiosPrelude starts a nagios step's script: the plugin directories
// after the target's PATH, and the C locale, so that a plugin's numbers
// have a decimal point, as perfdata's must, and its messages read the
// same on every target.
var nagiosPrelude = "PATH=\"$PATH:" + strings.Join(pluginDirs, ":") + "\"\nLC_ALL=C\nexport LC_ALL\n"

// parseNagios reads a nagios block: one command line, which a line
// ending in \ continues. Run through sudo (sudo=true), the plugin is
// named by its full path, since sudo looks in its own secure_path only;
// otherwise the script is the command line after nagiosPrelude.
func parseNagios(blk *contracts.StepBlock, st *contracts.Step) {
	text := strings.TrimSpace(blk.Text)
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	switch {
	case len(lines) == 0:
		blk.Errorf("nagios step: the block is empty: write the plugin's command line, like check_disk -w 20%% -c 10%% -p /")
		return
	case len(lines) > 1:
		const msg = "nagios step: the block is one plugin command line, and this is a second line (end a line with \\ to go on on the next)"
		if at := strings.Index(blk.Text, lines[1]); at >= 0 {
			blk.ErrorfAt(at, msg)
		} else {
			blk.Errorf(msg)
		}
		return
	}
	line := strings.TrimSpace(lines[0])
	if st.Sudo {
		if plugin, _, _ := strings.Cut(line, " "); !strings.Contains(plugin, "/") {
			blk.ErrorfAt(strings.Index(blk.Text, plugin), "nagios step: through sudo, name the plugin by its full path (%s/%s): sudo looks commands up in its secure_path only", pluginDirs[0], plugin)
		}
		st.Script = line
		return
	}
	st.Script = nagiosPrelude + text + "\n"
}

// nagiosCommand is the step as explain shows it: its command line.
func nagiosCommand(st *contracts.Step) string {
	return strings.TrimSpace(strings.TrimPrefix(st.Script, nagiosPrelude))
}

// observeNagios reads a plugin's output into the step's values: its
// status by its exit code, its status line, its long output and its
// perfdata. Perfdata it cannot read is left out, each item with a finding
// that says so.
func observeNagios(step *contracts.Step, o *Observation) {
	out := parsePluginOutput(o.Result.Stdout)
	code, _ := o.Values["exit_code"].(int)
	timedOut, _ := o.Values["timed_out"].(bool)
	o.Values["plugin_status"] = pluginStatus(code, timedOut)
	o.Values["output"] = out.status
	o.Values["long_output"] = strings.Join(out.long, "\n")
	perf := map[string]any{}
	for _, it := range out.perf {
		if _, dup := perf[it.Label]; !dup {
			perf[it.Label] = it.values()
		}
	}
	o.Values["perf"] = perf
	o.Findings = append(o.Findings, out.problems...)
}

// pluginStates are the statuses a plugin's exit code 0..3 stands for, and
// the severity each is.
var pluginStates = []struct {
	name string
	sev  contracts.Severity
}{
	{"OK", contracts.SeverityHealthy},
	{"WARNING", contracts.SeverityDegraded},
	{"CRITICAL", contracts.SeverityCritical},
	{"UNKNOWN", contracts.SeverityUnknown},
}

// pluginStatuses are the words plugin_status may be, in exit code order.
func pluginStatuses() []string {
	out := make([]string, len(pluginStates))
	for i, st := range pluginStates {
		out[i] = st.name
	}
	return out
}

// pluginStatus is the status of a plugin that exited with code: UNKNOWN
// for any code past 3, and for a plugin its deadline killed.
func pluginStatus(code int, timedOut bool) string {
	if timedOut || code < 0 || code >= len(pluginStates) {
		return "UNKNOWN"
	}
	return pluginStates[code].name
}

// maxLongFindings caps the long output's lines among a step's findings.
const maxLongFindings = 10

// judgeNagios is the plugin's verdict: its exit status as a severity,
// with its status line (and, past it, its long output) as findings. A
// table row on exit_code or plugin_status judges the status itself, so
// the verdict steps aside for it (healthy). A row that reads a perfdata
// label the plugin did not print says which labels it did.
func judgeNagios(step *contracts.Step, o *Observation) (contracts.Severity, []string) {
	code, _ := o.Values["exit_code"].(int)
	timedOut, _ := o.Values["timed_out"].(bool)
	text, _ := o.Values["output"].(string)
	if text == "" {
		text = "the plugin printed no status line"
		if e := FirstLine(strings.TrimSpace(o.Result.Stderr)); e != "" {
			text = e
		}
	}
	judges := true
	for _, row := range step.Health {
		if row.Field == "exit_code" || row.Field == "plugin_status" {
			judges = false
		}
	}
	sev := contracts.SeverityHealthy
	lead := text
	switch {
	case !judges:
	case timedOut:
		sev = contracts.SeverityUnknown
		lead = fmt.Sprintf("%s (timed out after %s → unknown)", text, contracts.FormatDuration(step.Timeout))
	case code >= 0 && code < len(pluginStates):
		sev = pluginStates[code].sev
		if code != 0 {
			lead = fmt.Sprintf("%s (exit %d %s → %s)", text, code, pluginStates[code].name, sev)
		}
	default:
		sev = contracts.SeverityUnknown
		why := "not a plugin status (0 to 3)"
		switch code {
		case 126:
			why = "the plugin is not executable"
		case 127:
			why = "the plugin could not be run: it is in neither the PATH nor " + strings.Join(pluginDirs, ", ") + ", or a library it needs is missing"
		}
		lead = fmt.Sprintf("%s (exit %d: %s → unknown)", text, code, why)
	}
	said := []string{lead}
	said = append(said, missingLabels(step, o)...)
	long, _ := o.Values["long_output"].(string)
	if long != "" {
		lines := strings.Split(long, "\n")
		for i, l := range lines {
			if i == maxLongFindings {
				said = append(said, fmt.Sprintf("… and %d more lines of long output", len(lines)-i))
				break
			}
			if l = strings.TrimSpace(l); l != "" {
				said = append(said, l)
			}
		}
	}
	return sev, said
}

// missingLabels says, for each row that reads a perfdata label the plugin
// did not print, which labels it printed.
func missingLabels(step *contracts.Step, o *Observation) []string {
	perf, _ := o.Values["perf"].(map[string]any)
	if perf == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, row := range step.Health {
		parts := contracts.SplitPath(row.Field)
		if len(parts) < 2 || parts[0] != "perf" || seen[parts[1]] {
			continue
		}
		seen[parts[1]] = true
		if _, ok := perf[parts[1]]; ok {
			continue
		}
		labels := make([]string, 0, len(perf))
		for l := range perf {
			labels = append(labels, strconv.Quote(l))
		}
		slices.Sort(labels)
		printed := "none"
		if len(labels) > 0 {
			printed = strings.Join(labels, ", ")
		}
		out = append(out, fmt.Sprintf("%s: the plugin printed no perfdata labelled %q (its labels: %s)", contracts.JoinPath(parts[:2]), parts[1], printed))
	}
	return out
}

// pluginOutput is a plugin's output read by the guidelines' layout:
//
//	STATUS LINE | PERFDATA
//	LONG OUTPUT LINE
//	…
//	LONG OUTPUT LINE | PERFDATA
//	PERFDATA LINE
//	…
//
// that is, the status line up to its first |, long output until a line
// with a |, and perfdata after every | and on every line after that one.
type pluginOutput struct {
	status   string
	long     []string
	perf     []PerfItem
	problems []string
}

// parsePluginOutput reads stdout as a plugin's output (pluginOutput).
func parsePluginOutput(stdout string) pluginOutput {
	var out pluginOutput
	lines := strings.Split(strings.TrimRight(stdout, "\r\n"), "\n")
	var perf []string
	first, p, hasPerf := strings.Cut(strings.TrimRight(lines[0], "\r"), "|")
	out.status = strings.TrimSpace(first)
	if hasPerf {
		perf = append(perf, p)
	}
	inPerf := false
	for _, l := range lines[1:] {
		l = strings.TrimRight(l, "\r")
		switch text, p, ok := strings.Cut(l, "|"); {
		case inPerf:
			perf = append(perf, l)
		case ok:
			inPerf = true
			if strings.TrimSpace(text) != "" {
				out.long = append(out.long, strings.TrimRight(text, " \t"))
			}
			perf = append(perf, p)
		default:
			out.long = append(out.long, l)
		}
	}
	for len(out.long) > 0 && strings.TrimSpace(out.long[len(out.long)-1]) == "" {
		out.long = out.long[:len(out.long)-1]
	}
	out.perf, out.problems = ParsePerfdata(strings.Join(perf, " "))
	return out
}

// PerfItem is one item of a plugin's perfdata,
// 'label'=value[UOM];[warn];[crit];[min];[max], as the Monitoring
// Plugins guidelines define it.
type PerfItem struct {
	// Label is the label without its quotes (a quote doubled in a quoted
	// label is one quote).
	Label string
	// Value is the value; nil when the plugin printed U (none measured).
	Value *float64
	// UOM is the unit of measure, as printed; empty when none.
	UOM string
	// Warn and Crit are the thresholds as printed, ranges included
	// (10, 10:, ~:10, 10:20, @10:20); empty when none.
	Warn, Crit string
	// Min and Max are the value's bounds; nil when not printed, or not a
	// number.
	Min, Max *float64
}

// values are the item as a step's perf[label] entry (nagiosValues).
func (it PerfItem) values() map[string]any {
	return map[string]any{
		"value": floatOrNil(it.Value), "uom": it.UOM,
		"warn": floatOrNil(threshold(it.Warn, it.UOM)), "crit": floatOrNil(threshold(it.Crit, it.UOM)),
		"warn_range": it.Warn, "crit_range": it.Crit,
		"min": floatOrNil(it.Min), "max": floatOrNil(it.Max),
	}
}

func floatOrNil(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// reNumberPrefix is a perfdata number at the start of a field: digits with
// a decimal point (or, from a plugin run in a locale that writes one, a
// decimal comma) and an exponent; what follows it is its unit.
var reNumberPrefix = regexp.MustCompile(`^[-+]?(?:[0-9]+(?:\.[0-9]*|,[0-9]+)?|[.,][0-9]+)(?:[eE][-+]?[0-9]+)?`)

// reNumberTail is what no unit starts with, since a number could go on
// with it: a value like 1.5.3 or 1e5e5 is no number and a unit.
var reNumberTail = regexp.MustCompile(`^(?:[.,0-9]|[eE][-+]?[0-9])`)

// number reads a number at the start of s: the number, and the rest of s
// (its unit); nil when s does not start with one.
func number(s string) (*float64, string) {
	m := reNumberPrefix.FindString(s)
	if m == "" {
		return nil, s
	}
	f, err := strconv.ParseFloat(strings.Replace(m, ",", ".", 1), 64)
	if err != nil {
		return nil, s
	}
	return &f, s[len(m):]
}

// threshold is a threshold that is one number (N, or N and the value's
// unit), else nil: a range (10:20, @10:20, ~:10, 10:) is not one number.
func threshold(s, uom string) *float64 {
	f, rest := number(s)
	if f == nil || rest != "" && rest != uom {
		return nil
	}
	return f
}

// bound is a min or max: a number, a unit after it allowed; nil otherwise.
func bound(s string) *float64 {
	f, _ := number(s)
	return f
}

// ParsePerfdata reads a plugin's perfdata: items separated by spaces, each
// 'label'=value[UOM];[warn];[crit];[min];[max], a label with spaces or
// quotes quoted (a quote in it doubled), fields after the value optional. An item it
// cannot read is left out, with a problem saying why; it never fails as a
// whole.
func ParsePerfdata(s string) (items []PerfItem, problems []string) {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	token := func(i int) int {
		for i < len(s) && !space(s[i]) {
			i++
		}
		return i
	}
	bad := func(text, why string) {
		problems = append(problems, fmt.Sprintf("perfdata %q left out: %s", text, why))
	}
	for i := 0; ; {
		for i < len(s) && space(s[i]) {
			i++
		}
		if i >= len(s) {
			return items, problems
		}
		start := i
		var label strings.Builder
		if s[i] == '\'' {
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						label.WriteByte('\'')
						i++
						continue
					}
					closed = true
					i++
					break
				}
				label.WriteByte(s[i])
			}
			if !closed {
				bad(s[start:], "its label's quote is not closed")
				return items, problems
			}
		} else {
			for i < len(s) && s[i] != '=' && !space(s[i]) {
				label.WriteByte(s[i])
				i++
			}
		}
		if i >= len(s) || s[i] != '=' {
			end := token(i)
			bad(s[start:end], "not label=value")
			i = end
			continue
		}
		end := token(i + 1)
		it, why := perfItem(label.String(), s[i+1:end])
		if why != "" {
			bad(s[start:end], why)
		} else {
			items = append(items, it)
		}
		i = end
	}
}

// perfItem reads one item's fields after its label's =; why is not empty
// when it cannot.
func perfItem(label, data string) (PerfItem, string) {
	it := PerfItem{Label: label}
	if label == "" {
		return it, "no label"
	}
	f := strings.Split(data, ";")
	f = append(f, make([]string, max(0, 5-len(f)))...)
	switch v := f[0]; v {
	case "U":
	case "":
		return it, "no value"
	default:
		n, uom := number(v)
		if n == nil || reNumberTail.MatchString(uom) {
			return it, fmt.Sprintf("the value %q is not a number", v)
		}
		it.Value, it.UOM = n, uom
	}
	it.Warn, it.Crit = f[1], f[2]
	it.Min, it.Max = bound(f[3]), bound(f[4])
	return it, ""
}
