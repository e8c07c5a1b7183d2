package steps_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/replay"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// perf is one perf[label] entry as a nagios step produces it; nil is null.
type perf struct {
	value       any
	uom         string
	warn, crit  any
	wrange      string
	crange      string
	min, max    any
	description string
}

func (p perf) values() map[string]any {
	return map[string]any{"value": p.value, "uom": p.uom, "warn": p.warn, "crit": p.crit,
		"warn_range": p.wrange, "crit_range": p.crange, "min": p.min, "max": p.max}
}

// observe is what a nagios step makes of a plugin's output and exit code.
func observe(stdout string, code int) *steps.Observation {
	return steps.FromResult(&contracts.Step{ID: "p", Kind: "nagios"}, transports.Result{Stdout: stdout, ExitCode: code}, nil)
}

// TestPluginOutputOfRealPlugins reads what real plugins print, by the
// Monitoring Plugins guidelines: the status line, the long output and the
// perfdata, each item's label, value, unit, thresholds (a range kept as
// printed, a one-number threshold a number too), min and max. The outputs
// are Debian's monitoring-plugins 2.3.3 as run here, the Nagios Core
// documentation's multi-line example, NSClient++ and check_nt on Windows,
// and the guidelines' own corner cases.
func TestPluginOutputOfRealPlugins(t *testing.T) {
	f := func(x float64) any { return x }
	for _, tc := range []struct {
		name, stdout   string
		code           int
		status, output string
		long           string
		perf           map[string]perf
		problems       []string
	}{
		{
			name:   "check_disk -w 20% -c 10% -p /",
			stdout: "DISK OK - free space: / 74978MiB (80% inode=97%);| /=19172163584B;216442024755;243497277849;0;270552530944\n",
			status: "OK", output: "DISK OK - free space: / 74978MiB (80% inode=97%);",
			perf: map[string]perf{"/": {value: f(19172163584), uom: "B", warn: f(216442024755), crit: f(243497277849), wrange: "216442024755", crange: "243497277849", min: f(0), max: f(270552530944)}},
		},
		{
			name:   "check_load -w 5,4,3 -c 10,8,6 (a trailing space, an empty max)",
			stdout: "LOAD OK - total load average: 2.47, 2.76, 2.10|load1=2.470;5.000;10.000;0; load5=2.760;4.000;8.000;0; load15=2.100;3.000;6.000;0; \n",
			status: "OK", output: "LOAD OK - total load average: 2.47, 2.76, 2.10",
			perf: map[string]perf{
				"load1":  {value: f(2.47), warn: f(5), crit: f(10), wrange: "5.000", crange: "10.000", min: f(0)},
				"load5":  {value: f(2.76), warn: f(4), crit: f(8), wrange: "4.000", crange: "8.000", min: f(0)},
				"load15": {value: f(2.1), warn: f(3), crit: f(6), wrange: "3.000", crange: "6.000", min: f(0)},
			},
		},
		{
			name:   "check_procs -C sshd -c 1: (a range threshold, a quoted name in the status line)",
			stdout: "PROCS CRITICAL: 0 processes with command name 'sshd' | procs=0;;1:;0;\n", code: 2,
			status: "CRITICAL", output: "PROCS CRITICAL: 0 processes with command name 'sshd'",
			perf: map[string]perf{"procs": {value: f(0), crange: "1:", min: f(0)}},
		},
		{
			name:   "check_http on a 404",
			stdout: "HTTP WARNING: HTTP/1.0 404 File not found - 520 bytes in 0.002 second response time |time=0.002434s;;;0.000000;10.000000 size=520B;;;0;\n", code: 1,
			status: "WARNING", output: "HTTP WARNING: HTTP/1.0 404 File not found - 520 bytes in 0.002 second response time",
			perf: map[string]perf{"time": {value: f(0.002434), uom: "s", min: f(0), max: f(10)}, "size": {value: f(520), uom: "B", min: f(0)}},
		},
		{
			name:   "check_tcp -w 1 -c 2",
			stdout: "TCP OK - 0.000 second response time on 127.0.0.1 port 18089|time=0.000270s;1.000000;2.000000;0.000000;10.000000\n",
			status: "OK", output: "TCP OK - 0.000 second response time on 127.0.0.1 port 18089",
			perf: map[string]perf{"time": {value: f(0.00027), uom: "s", warn: f(1), crit: f(2), wrange: "1.000000", crange: "2.000000", min: f(0), max: f(10)}},
		},
		{
			name:   "check_file_age (two items)",
			stdout: "FILE_AGE CRITICAL: /etc/hostname is 3083 seconds old and 3 bytes | age=3083s;1;2 size=3B;0;0;0\n", code: 2,
			status: "CRITICAL", output: "FILE_AGE CRITICAL: /etc/hostname is 3083 seconds old and 3 bytes",
			perf: map[string]perf{"age": {value: f(3083), uom: "s", warn: f(1), crit: f(2), wrange: "1", crange: "2"},
				"size": {value: f(3), uom: "B", warn: f(0), crit: f(0), wrange: "0", crange: "0", min: f(0)}},
		},
		{
			name:   "check_dummy 1 hello (no perfdata)",
			stdout: "WARNING: hello\n", code: 1,
			status: "WARNING", output: "WARNING: hello", perf: map[string]perf{},
		},
		{
			name:   "check_tcp on a closed port (no perfdata)",
			stdout: "connect to address 127.0.0.1 and port 1: Connection refused\n", code: 2,
			status: "CRITICAL", output: "connect to address 127.0.0.1 and port 1: Connection refused", perf: map[string]perf{},
		},
		{
			name: "the Nagios Core documentation's multi-line output",
			stdout: "DISK OK - free space: / 3326 MB (56%); | /=2643MB;5948;5958;0;5968\n/ 15272 MB (77%);\n/boot 68 MB (69%);\n" +
				"/home 69357 MB (27%);\n/var/log 819 MB (84%); | /boot=68MB;88;93;0;98\n/home=69357MB;253404;253409;0;253414 \n/var/log=818MB;970;975;0;980\n",
			status: "OK", output: "DISK OK - free space: / 3326 MB (56%);",
			long: "/ 15272 MB (77%);\n/boot 68 MB (69%);\n/home 69357 MB (27%);\n/var/log 819 MB (84%);",
			perf: map[string]perf{
				"/":        {value: f(2643), uom: "MB", warn: f(5948), crit: f(5958), wrange: "5948", crange: "5958", min: f(0), max: f(5968)},
				"/boot":    {value: f(68), uom: "MB", warn: f(88), crit: f(93), wrange: "88", crange: "93", min: f(0), max: f(98)},
				"/home":    {value: f(69357), uom: "MB", warn: f(253404), crit: f(253409), wrange: "253404", crange: "253409", min: f(0), max: f(253414)},
				"/var/log": {value: f(818), uom: "MB", warn: f(970), crit: f(975), wrange: "970", crange: "975", min: f(0), max: f(980)},
			},
		},
		{
			name:   "NSClient++ check_cpu (quoted labels with spaces)",
			stdout: "OK: CPU load is ok.|'total 5m'=0%;80;90 'total 1m'=0%;80;90 'total 5s'=0%;80;90\r\n",
			status: "OK", output: "OK: CPU load is ok.",
			perf: map[string]perf{
				"total 5m": {value: f(0), uom: "%", warn: f(80), crit: f(90), wrange: "80", crange: "90"},
				"total 1m": {value: f(0), uom: "%", warn: f(80), crit: f(90), wrange: "80", crange: "90"},
				"total 5s": {value: f(0), uom: "%", warn: f(80), crit: f(90), wrange: "80", crange: "90"},
			},
		},
		{
			name:   "check_nt USEDDISKSPACE (a backslash in a quoted label, thresholds in the unit)",
			stdout: "c:\\ - total: 59.99 Gb - used: 27.51 Gb (46%) - free 32.48 Gb (54%) | 'c:\\ Used Space'=27.51Gb;47.99Gb;53.99Gb;0.00;59.99\n",
			status: "OK", output: "c:\\ - total: 59.99 Gb - used: 27.51 Gb (46%) - free 32.48 Gb (54%)",
			perf: map[string]perf{"c:\\ Used Space": {value: f(27.51), uom: "Gb", warn: f(47.99), crit: f(53.99), wrange: "47.99Gb", crange: "53.99Gb", min: f(0), max: f(59.99)}},
		},
		{
			name:   "the guidelines' corner cases: U, ranges, a quote in a label, a decimal comma, a counter",
			stdout: "UNKNOWN - partial | 'it''s'=U;@10:20;~:30 temp=21,5C;10:;@0:5;; rx=123456c size=10MB;5:8;10 bare=7\n", code: 3,
			status: "UNKNOWN", output: "UNKNOWN - partial",
			perf: map[string]perf{
				"it's": {value: nil, wrange: "@10:20", crange: "~:30"},
				"temp": {value: f(21.5), uom: "C", wrange: "10:", crange: "@0:5"},
				"rx":   {value: f(123456), uom: "c"},
				"size": {value: f(10), uom: "MB", wrange: "5:8", crange: "10", crit: f(10)},
				"bare": {value: f(7)},
			},
		},
		{
			name:   "perfdata it cannot read is left out, each item with a finding",
			stdout: "OK | good=1 bad=abc nolabel =3 ''=4 'open=5\n",
			status: "OK", output: "OK",
			perf: map[string]perf{"good": {value: f(1)}},
			problems: []string{`perfdata "bad=abc" left out: the value "abc" is not a number`, `perfdata "nolabel" left out: not label=value`,
				`perfdata "=3" left out: no label`, `perfdata "''=4" left out: no label`, `perfdata "'open=5" left out: its label's quote is not closed`},
		},
		{
			name:   "a plugin that printed nothing",
			stdout: "", code: 3, status: "UNKNOWN", perf: map[string]perf{},
		},
		{
			name:   "an exit past 3 is UNKNOWN",
			stdout: "boom\n", code: 4, status: "UNKNOWN", output: "boom", perf: map[string]perf{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(tc.stdout, tc.code)
			if o.Values["plugin_status"] != tc.status || o.Values["output"] != tc.output || o.Values["long_output"] != tc.long {
				t.Errorf("plugin_status %q output %q long_output %q, want %q %q %q", o.Values["plugin_status"], o.Values["output"], o.Values["long_output"], tc.status, tc.output, tc.long)
			}
			want := map[string]any{}
			for label, p := range tc.perf {
				want[label] = p.values()
			}
			if got := o.Values["perf"]; !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("perf:\n got %s\nwant %s", g, w)
			}
			if !reflect.DeepEqual(o.Findings, tc.problems) && len(o.Findings)+len(tc.problems) > 0 {
				t.Errorf("findings %q, want %q", o.Findings, tc.problems)
			}
		})
	}
}

// formatPerfdata writes items back as perfdata, every label quoted.
func formatPerfdata(items []steps.PerfItem) string {
	num := func(f *float64) string {
		if f == nil {
			return ""
		}
		return strconv.FormatFloat(*f, 'f', -1, 64)
	}
	var out []string
	for _, it := range items {
		v := "U"
		if it.Value != nil {
			v = num(it.Value) + it.UOM
		}
		out = append(out, fmt.Sprintf("'%s'=%s;%s;%s;%s;%s", strings.ReplaceAll(it.Label, "'", "''"), v, it.Warn, it.Crit, num(it.Min), num(it.Max)))
	}
	return strings.Join(out, " ")
}

// FuzzPerfdata: whatever a plugin prints, the parser returns (it never
// fails as a whole, nor panics), every item it keeps has a label and a
// number or U, and what it read, written back, reads the same.
func FuzzPerfdata(f *testing.F) {
	for _, seed := range []string{
		"/=19172163584B;216442024755;243497277849;0;270552530944",
		"load1=2.470;5.000;10.000;0; load5=2.760;4.000;8.000;0; load15=2.100;3.000;6.000;0; ",
		"procs=0;;1:;0;", "time=0.002434s;;;0.000000;10.000000 size=520B;;;0;",
		"'total 5m'=0%;80;90 'total 1m'=0%;80;90", "'c:\\ Used Space'=27.51Gb;47.99Gb;53.99Gb;0.00;59.99",
		"'it''s'=U;@10:20;~:30 temp=21,5C;10:;@0:5;; rx=123456c", "good=1 bad=abc nolabel =3 ''=4 'open=5",
		"a=1e5x;1.e3;-.5;+2;3,", "x=1;2;3;4;5;6;7", "'a\nb'=1\t'c'='d'=2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, _ := steps.ParsePerfdata(s)
		for _, it := range items {
			if it.Label == "" {
				t.Fatalf("%q: an item without a label: %+v", s, it)
			}
			if it.Value != nil && (math.IsInf(*it.Value, 0) || math.IsNaN(*it.Value)) {
				t.Fatalf("%q: item %q has value %v", s, it.Label, *it.Value)
			}
		}
		again := formatPerfdata(items)
		back, problems := steps.ParsePerfdata(again)
		if len(problems) > 0 || !reflect.DeepEqual(back, items) && len(items) > 0 {
			t.Fatalf("%q read %+v; written back as %q it reads %+v (problems %q)", s, items, again, back, problems)
		}
	})
}

// nagiosContract is a contract with one nagios step; TABLE is replaced
// by what follows the step.
const nagiosContract = "---\nname: plugin\nruntime_contract: 2\nvars:\n  mount: /\n---\n\n## Execution\n\n### Disk {#disk}\n\n" +
	"```nagios {id=df}\ncheck_disk -w 20% -c 10% -p ${mount}\n```\n\nTABLE\n"

const diskOut = "DISK %s - free space: / 100MiB (%d%% inode=97%%);| /=%dMB;900;950;0;1000\n"

// TestNagiosVerdict: the plugin's exit status is the step's verdict, with
// its status line and long output as findings, unless a table row judges
// exit_code or plugin_status; every other row adds to it, the worst
// winning; a row on a label the plugin did not print is unknown and says
// which labels it printed.
func TestNagiosVerdict(t *testing.T) {
	perfRows := "| Field | Healthy | Degraded | Critical |\n|---|---|---|---|\n| `perf[\"/\"].value` | < 900 | 900–949 | >= 950 |\n"
	for _, tc := range []struct {
		name, table string
		rec         steps.Recording
		want        contracts.Severity
		findings    []string
	}{
		{"no table: OK is healthy", "", steps.Recording{Stdout: fmt.Sprintf(diskOut, "OK", 80, 100)}, contracts.SeverityHealthy, nil},
		{"no table: WARNING is degraded, with the status line", "", steps.Recording{Stdout: fmt.Sprintf(diskOut, "WARNING", 8, 920), Exit: 1},
			contracts.SeverityDegraded, []string{"DISK WARNING - free space: / 100MiB (8% inode=97%); (exit 1 WARNING → degraded)"}},
		{"no table: CRITICAL is critical, the long output after it", "", steps.Recording{Stdout: "DISK CRITICAL - / 1%|/=990MB\n/ 1%\n/boot 50%\n", Exit: 2},
			contracts.SeverityCritical, []string{"DISK CRITICAL - / 1% (exit 2 CRITICAL → critical)", "/ 1%", "/boot 50%"}},
		{"no table: UNKNOWN is unknown", "", steps.Recording{Stdout: "DISK UNKNOWN - no such mount\n", Exit: 3},
			contracts.SeverityUnknown, []string{"DISK UNKNOWN - no such mount (exit 3 UNKNOWN → unknown)"}},
		{"no such plugin", "", steps.Recording{Stderr: "sh: 3: check_dsk: not found\n", Exit: 127},
			contracts.SeverityUnknown, []string{"sh: 3: check_dsk: not found (exit 127: the plugin could not be run: it is in neither the PATH nor /usr/lib/nagios/plugins, /usr/lib64/nagios/plugins, /usr/local/nagios/libexec, or a library it needs is missing → unknown)"}},
		{"a timeout is unknown", "", steps.Recording{Timeout: true},
			contracts.SeverityUnknown, []string{"the plugin printed no status line (timed out after 30s → unknown)"}},
		{"a perf row adds to an OK plugin", perfRows, steps.Recording{Stdout: fmt.Sprintf(diskOut, "OK", 4, 960)},
			contracts.SeverityCritical, []string{`perf["/"].value (960) >= 950 → critical`, "DISK OK - free space: / 100MiB (4% inode=97%);"}},
		{"a healthy perf row never hides the plugin's CRITICAL", perfRows, steps.Recording{Stdout: fmt.Sprintf(diskOut, "CRITICAL", 80, 100), Exit: 2},
			contracts.SeverityCritical, []string{"DISK CRITICAL - free space: / 100MiB (80% inode=97%); (exit 2 CRITICAL → critical)"}},
		{"a row on exit_code judges the status itself", "| Field | Healthy | Critical |\n|---|---|---|\n| `exit_code` | 0–1 | >= 2 |\n",
			steps.Recording{Stdout: fmt.Sprintf(diskOut, "WARNING", 8, 920), Exit: 1}, contracts.SeverityHealthy, nil},
		{"a row on plugin_status judges the status itself", "| Field | Healthy | Critical |\n|---|---|---|\n| `plugin_status` | `OK` or `WARNING` | `CRITICAL` |\n",
			steps.Recording{Stdout: "PROCS UNKNOWN: bad args\n", Exit: 3}, contracts.SeverityUnknown,
			[]string{"plugin_status (UNKNOWN): no column matched → unknown", "PROCS UNKNOWN: bad args"}},
		{"Expected: judges plugin_status", "Expected: `OK`", steps.Recording{Stdout: fmt.Sprintf(diskOut, "WARNING", 8, 920), Exit: 1},
			contracts.SeverityCritical, []string{"plugin_status (WARNING) expected `OK` → critical", "DISK WARNING - free space: / 100MiB (8% inode=97%);"}},
		{"a label the plugin did not print", "| Field | Healthy | Critical |\n|---|---|---|\n| `perf[\"/home\"].value` | < 900 | >= 900 |\n",
			steps.Recording{Stdout: fmt.Sprintf(diskOut, "OK", 80, 100)}, contracts.SeverityUnknown,
			[]string{`perf["/home"].value (missing): no column matched → unknown`, "DISK OK - free space: / 100MiB (80% inode=97%);",
				`perf["/home"]: the plugin printed no perfdata labelled "/home" (its labels: "/")`}},
		{"a threshold read from the plugin's own perfdata", "| Field | Healthy | Degraded |\n|---|---|---|\n| `perf[\"/\"].value` | `it < perf[\"/\"].warn` | `it >= perf[\"/\"].warn` |\n",
			steps.Recording{Stdout: fmt.Sprintf(diskOut, "OK", 80, 905)}, contracts.SeverityDegraded,
			[]string{`perf["/"].value (905) it >= perf["/"].warn → degraded`, "DISK OK - free space: / 100MiB (80% inode=97%);"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ds := contracts.Parse("plugin.md", []byte(strings.Replace(nagiosContract, "TABLE", tc.table, 1)), contracts.Options{})
			if ds.HasErrors() {
				t.Fatalf("contract does not load:\n%v", ds.Err())
			}
			step := c.Stages[0].Steps[0]
			o := steps.Replay(step, &tc.rec)
			steps.Evaluate(step, o, o.Values)
			if o.Severity != tc.want || !reflect.DeepEqual(o.Findings, tc.findings) && len(o.Findings)+len(tc.findings) > 0 {
				t.Errorf("severity %v findings %q, want %v %q", o.Severity, o.Findings, tc.want, tc.findings)
			}
		})
	}
}

// TestLongOutputFindingsAreCapped: a plugin's long output can run to
// hundreds of lines (one per mount, per process); ten are findings, and
// one more says how many were left out.
func TestLongOutputFindingsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("PROCS CRITICAL: 25 zombies\n")
	for i := range 25 {
		fmt.Fprintf(&b, "zombie %d\n", i)
	}
	step := &contracts.Step{ID: "p", Kind: "nagios", Timeout: time.Second}
	o := steps.Replay(step, &steps.Recording{Stdout: b.String(), Exit: 2})
	steps.Evaluate(step, o, o.Values)
	if len(o.Findings) != 12 || o.Findings[10] != "zombie 9" || o.Findings[11] != "… and 15 more lines of long output" {
		t.Errorf("findings %q", o.Findings)
	}
}

// TestNagiosLint: mistakes an author makes in a nagios step are errors at
// their line and column, with the nearest right name.
func TestNagiosLint(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"a misspelt perf field", "TABLE", "| Field | Healthy | Critical |\n|---|---|---|\n| `perf[\"/\"].valeu` | < 900 | >= 900 |",
			`plugin.md:18:4: error: perf["/"].valeu: perf["/"] of step df (nagios) has the fields crit, crit_range, max, min, uom, value, warn, warn_range, not valeu (did you mean "value"?)`},
		{"a misspelt value", "TABLE", "| Field | Healthy | Critical |\n|---|---|---|\n| `plugin_satus` | `OK` | `CRITICAL` |",
			`plugin.md:18:4: error: field plugin_satus: step df (nagios) produces no value plugin_satus (did you mean "plugin_status"?)`},
		{"a perf value compared with a string", "TABLE", "| Field | Healthy | Critical |\n|---|---|---|\n| `perf[\"/\"].value` | `it < \"900\"` | >= 900 |",
			`plugin.md:18:27: error: expression "it < \"900\"": invalid operation: < (mismatched types float64 and string) (did you mean ` + "`it < 900`" + `?)`},
		{"a field of a threshold that is a number", "TABLE", "| Field | Healthy | Critical |\n|---|---|---|\n| `perf[\"/\"].warn.value` | < 900 | >= 900 |",
			`plugin.md:18:4: error: perf["/"].warn.value: perf["/"].warn of step df is a float, which has no fields`},
		{"a status that is never one, in a condition", "TABLE", "| Condition | Action |\n|---|---|\n| `plugin_status == \"CRITCAL\"` | `systemctl restart web` |",
			`plugin.md:18:21: error: plugin_status compared with "CRITCAL", which it never is (did you mean "CRITICAL"?): plugin_status is OK, WARNING, CRITICAL or UNKNOWN, so this never holds`},
		{"a status that is never one, through the step's id", "TABLE", "| Condition | Action |\n|---|---|\n| `df.plugin_status in [\"OK\", \"unknown\"]` | log |",
			`plugin.md:18:31: error: df.plugin_status compared with "unknown", which it never is (did you mean "UNKNOWN"?)`},
		{"a status that is never one, in a condition that then always holds", "TABLE", "| Condition | Action |\n|---|---|\n| `plugin_status != \"CRITCAL\"` | `systemctl restart web` |",
			`plugin.md:18:21: error: plugin_status compared with "CRITCAL", which it never is (did you mean "CRITICAL"?): plugin_status is OK, WARNING, CRITICAL or UNKNOWN, so this always holds`},
		{"a status that is never one, in a cell", "TABLE", "| Field | Healthy | Critical |\n|---|---|---|\n| `plugin_status` | `OK` | `CRITCAL` |",
			`plugin.md:18:29: error: plugin_status compared with "CRITCAL", which it never is (did you mean "CRITICAL"?)`},
		{"a status that is never one, in Expected:", "TABLE", "Expected: `OK` or `WARN`",
			"plugin.md:16:20: error: Expected: `WARN`: plugin_status is OK, WARNING, CRITICAL or UNKNOWN, never \"WARN\", so this never holds"},
		{"a second line", "check_disk -w 20% -c 10% -p ${mount}\n", "check_disk -w 20% -c 10% -p ${mount}\ncheck_load\n",
			"plugin.md:14:1: error: nagios step: the block is one plugin command line, and this is a second line (end a line with \\ to go on on the next)"},
		{"an empty block", "check_disk -w 20% -c 10% -p ${mount}\n", "\n",
			"plugin.md:12:4: error: nagios step: the block is empty: write the plugin's command line, like check_disk -w 20% -c 10% -p /"},
		{"as=json", "```nagios {id=df}", "```nagios {id=df as=json}",
			`plugin.md:12:18: error: as: a nagios step's output is read as text, got "json"`},
		{"via=", "```nagios {id=df}", "```nagios {id=df via=hop}",
			"plugin.md:12:18: error: via applies only to http and tcp steps (use on= to run a script elsewhere)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(nagiosContract, "TABLE", "", 1)
			if tc.from == "TABLE" {
				src = strings.Replace(nagiosContract, "TABLE", tc.to, 1)
			} else {
				src = strings.Replace(src, tc.from, tc.to, 1)
			}
			_, ds := contracts.Parse("plugin.md", []byte(src), contracts.Options{})
			if err := ds.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("a plugin through sudo is named by its full path", func(t *testing.T) {
		src := "---\nname: plugin\nruntime_contract: 2\ntargets:\n  box: {ssh: nagios@10.0.0.1, sudo: true}\n---\n\n## Execution\n\n### Disk {#disk on=box}\n\n" +
			"```nagios {id=df sudo=true}\ncheck_disk -w 20% -c 10% -p /\n```\n"
		_, ds := contracts.Parse("plugin.md", []byte(src), contracts.Options{})
		want := "plugin.md:13:1: error: nagios step: through sudo, name the plugin by its full path (/usr/lib/nagios/plugins/check_disk): sudo looks commands up in its secure_path only"
		if err := ds.Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v\nwant an error containing %q", err, want)
		}
		c, ds := contracts.Parse("plugin.md", []byte(strings.Replace(src, "\ncheck_disk", "\n/usr/lib/nagios/plugins/check_disk", 1)), contracts.Options{})
		if ds.HasErrors() {
			t.Fatalf("with its full path: %v", ds.Err())
		}
		cmd := steps.ExecCommand(c.Stages[0].Steps[0], nil, nil, time.Second)
		if want := "exec sudo -n -- /usr/lib/nagios/plugins/check_disk -w 20% -c 10% -p /\n"; cmd.Script != want {
			t.Errorf("through sudo the script is %q, want %q", cmd.Script, want)
		}
	})
	t.Run("a step without a table is judged, so --strict accepts it", func(t *testing.T) {
		_, ds := contracts.Parse("plugin.md", []byte(strings.Replace(nagiosContract, "TABLE", "", 1)), contracts.Options{})
		if len(ds) > 0 {
			t.Fatalf("diagnostics: %v", ds)
		}
	})
}

// TestNagiosContractTest: `contractd test` replays a nagios step from its
// recorded output, through the real engine: the plugin's WARNING degrades
// the agent, its CRITICAL repairs it, and a perf row reads the recording's
// perfdata.
func TestNagiosContractTest(t *testing.T) {
	dir := t.TempDir()
	contract := strings.Replace(nagiosContract, "### Disk {#disk}", "### Disk {#disk agent=web}", 1)
	contract = strings.Replace(contract, "TABLE", "| Field | Healthy | Critical |\n|---|---|---|\n| `perf[\"/\"].max` | > 0 | 0 |\n\n"+
		"| Condition | Action |\n|---|---|\n| `plugin_status == \"CRITICAL\"` | `rm -rf /var/tmp/cache` |\n", 1)
	test := "runs:\n" +
		"  - name: ok\n    steps: {disk/df: {stdout: \"DISK OK | /=100MB;900;950;0;1000\"}}\n    expect: {overall: healthy, actions: []}\n" +
		"  - name: warning\n    steps: {disk/df: {stdout: \"DISK WARNING | /=920MB;900;950;0;1000\", exit: 1}}\n    expect: {overall: degraded, agents: {web: degraded}, actions: []}\n" +
		"  - name: critical\n    steps: {disk/df: {stdout: \"DISK CRITICAL | /=990MB;900;950;0;1000\", exit: 2}}\n" +
		"    after_repair: {disk/df: {stdout: \"DISK OK | /=100MB;900;950;0;1000\"}}\n" +
		"    expect: {overall: healthy, actions: [{agent: web, status: ran, action: rm -rf /var/tmp/cache, verify: remediated}]}\n" +
		"  - name: no perfdata\n    steps: {disk/df: {stdout: \"DISK OK\"}}\n    expect: {overall: unknown}\n"
	for name, text := range map[string]string{"plugin.md": contract, "plugin.test.yaml": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := replay.Test(ctx, filepath.Join(dir, "plugin.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if len(r.Diffs) > 0 {
			t.Errorf("run %s: %q", r.Label, r.Diffs)
		}
	}
}

// runContract runs src through the engine, with one-shot sessions.
func runContract(t *testing.T, src string) *engine.Report {
	t.Helper()
	return runContractWith(t, src, transports.PoolOptions{})
}

// runContractWith runs src through the engine with a pool of opts.
func runContractWith(t *testing.T, src string, opts transports.PoolOptions) *engine.Report {
	t.Helper()
	c, ds := contracts.Parse("plugins.md", []byte(src), contracts.Options{})
	if ds.HasErrors() {
		t.Fatalf("contract does not load:\n%v", ds.Err())
	}
	pool := transports.NewPool(opts)
	defer pool.Close()
	e, err := engine.New(engine.Options{StateDir: t.TempDir(), Opener: engine.PoolOpener{Pool: pool}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := e.Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Resident != nil && len(pool.ResidentSessions()) == 0 {
		t.Fatal("the run started no resident session")
	}
	return rep
}

// TestRealPlugins runs Debian's plugins as nagios steps on the local
// target, named without their directory: check_procs counts a process
// this test starts (CRITICAL with none, OK with one: the unit turns
// critical, then healthy), check_load gives its perfdata labels to a
// table, and a plugin that does not exist is unknown, never healthy.
func TestRealPlugins(t *testing.T) {
	need.Plugin(t, "check_procs")
	need.Plugin(t, "check_load")
	marker := fmt.Sprintf("contractd-nagios-%d", time.Now().UnixNano())
	src := "---\nname: plugins\nruntime_contract: 2\nvars:\n  marker: " + marker + "\n---\n\n## Execution\n\n" +
		"### Worker {#worker agent=worker}\n\n```nagios {id=procs}\ncheck_procs -a \"$marker\" -c 1:1\n```\n\n" +
		"### Load {#load agent=box}\n\n```nagios {id=load}\ncheck_load -w 1000,1000,1000 -c 2000,2000,2000\n```\n\n" +
		"| Field | Healthy | Critical |\n|---|---|---|\n| `perf.load1.value` | `it < perf.load1.crit` | `it >= perf.load1.crit` |\n| `perf[\"load15\"].warn` | 1000 | != 1000 |\n\n" +
		"### Missing {#missing agent=none}\n\n```nagios {id=nope}\ncheck_no_such_plugin -w 1\n```\n"

	step := func(rep *engine.Report, stage string) *engine.StepReport {
		for _, st := range rep.Stages {
			if st.ID == stage {
				return st.Steps[0]
			}
		}
		t.Fatalf("no stage %s in the report", stage)
		return nil
	}

	rep := runContract(t, src)
	procs := step(rep, "worker")
	if procs.Severity != contracts.SeverityCritical || procs.ExitCode != 2 || procs.Values["plugin_status"] != "CRITICAL" ||
		!strings.HasPrefix(procs.Findings[0], "PROCS CRITICAL: 0 processes with args '"+marker+"'") {
		t.Errorf("with no process: %s exit %d values %v findings %q, want critical: PROCS CRITICAL", procs.Severity, procs.ExitCode, procs.Values, procs.Findings)
	}
	if p, _ := procs.Values["perf"].(map[string]any)["procs"].(map[string]any); p == nil || p["value"] != 0.0 || p["crit_range"] != "1:1" || p["crit"] != nil {
		t.Errorf("check_procs perf %v, want procs with value 0 and the range 1:1 as printed", procs.Values["perf"])
	}
	load := step(rep, "load")
	if load.Severity != contracts.SeverityHealthy || load.Values["perf.load1.value"] == nil || load.Values[`perf["load15"].warn`] != 1000.0 {
		t.Errorf("check_load: %s values %v findings %q, want healthy with its perf read", load.Severity, load.Values, load.Findings)
	}
	if nope := step(rep, "missing"); nope.Severity != contracts.SeverityUnknown || !strings.Contains(strings.Join(nope.Findings, "\n"), "exit 127") {
		t.Errorf("a missing plugin: %s %q, want unknown with exit 127", nope.Severity, nope.Findings)
	}
	if a := rep.Agents["worker"]; a == nil || a.Severity != contracts.SeverityCritical {
		t.Errorf("agent worker %+v, want critical", a)
	}

	// The process check_procs looks for: a sleep whose command line (its
	// argv[0]) carries the marker.
	sleep := owner.Command("sleep", "300")
	sleep.Args[0] = marker
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	rep = runContract(t, src)
	if procs := step(rep, "worker"); procs.Severity != contracts.SeverityHealthy || procs.Values["plugin_status"] != "OK" {
		t.Errorf("with the process: %s %v %q, want healthy: PROCS OK", procs.Severity, procs.Values, procs.Findings)
	}
	if a := rep.Agents["worker"]; a == nil || a.Severity != contracts.SeverityHealthy {
		t.Errorf("agent worker %+v, want healthy", a)
	}
}

// TestNagiosExplain: explain shows the plugin's command line as written
// (not the script around it) and how the step is judged.
func TestNagiosExplain(t *testing.T) {
	c, ds := contracts.Parse("plugin.md", []byte(strings.Replace(nagiosContract, "TABLE", "", 1)), contracts.Options{})
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	var out strings.Builder
	if err := contracts.WriteExplainText(&out, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"step df (nagios, timeout 30s) on local:\n       check_disk -w 20% -c 10% -p ${mount}\n",
		"judged by the plugin's exit status (0 healthy, 1 degraded, 2 critical, 3 unknown)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain does not show %q:\n%s", want, out.String())
		}
	}
	if p := contracts.Explain(c).Stages[0].Steps[0]; p.Command != "check_disk -w 20% -c 10% -p ${mount}" || p.Verdict == "" {
		t.Errorf("explain --json: command %q verdict %q", p.Command, p.Verdict)
	}
}

// TestPluginOverSSH: a nagios step runs on its target through the
// target's transport, like a bash step: here a real loopback sshd, the
// plugin's step batched with a bash step of the same stage in one session,
// and a local stage's nagios step sent there with on=, through one-shot
// sessions and a resident one. check_procs counts the process this test
// started, so its OK is what the plugin saw.
func TestPluginOverSSH(t *testing.T) {
	need.SSHD(t)
	need.Plugin(t, "check_procs")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := sshd.Start(ctx, sshd.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	marker := fmt.Sprintf("contractd-ssh-%d", time.Now().UnixNano())
	sleep := owner.Command("sleep", "300")
	sleep.Args[0] = marker
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	src := fmt.Sprintf("---\nname: over-ssh\nruntime_contract: 2\ntargets:\n  box: {ssh: %s@%s, known_hosts: %s, identity: [%s]}\nvars:\n  marker: %s\n---\n\n## Execution\n\n",
		srv.User, srv.Addr, srv.KnownHostsFile, srv.IdentityFile, marker) +
		"### Box {#box agent=box on=box}\n\n```bash {id=up}\necho up\n```\n\nExpected: `up`\n\n" +
		"```nagios {id=procs}\ncheck_procs -a \"$marker\" \\\n  -c 1:1\n```\n\n" +
		"### Here {#here agent=here}\n\n```nagios {id=remote on=box}\ncheck_procs -a \"$marker\" -w 2:2 -c 1:\n```\n"
	for name, opts := range map[string]transports.PoolOptions{
		"one-shot sessions":                 {},
		"a resident session, as serve runs": {Resident: &transports.ResidentOptions{}},
	} {
		t.Run(name, func(t *testing.T) {
			rep := runContractWith(t, src, opts)
			box, here := rep.Stages[0], rep.Stages[1]
			if !strings.HasPrefix(box.Target, "ssh ") {
				t.Errorf("stage box ran on %s, want its ssh target", box.Target)
			}
			if len(box.Steps) != 2 || box.Steps[1].Severity != contracts.SeverityHealthy || box.Steps[1].Values["plugin_status"] != "OK" ||
				!strings.HasPrefix(box.Steps[1].Values["output"].(string), "PROCS OK: 1 process with args '"+marker+"'") {
				t.Errorf("check_procs over ssh: %+v", box.Steps)
			}
			if s := here.Steps[0]; s.Severity != contracts.SeverityDegraded || s.Values["plugin_status"] != "WARNING" ||
				!strings.HasPrefix(s.Findings[0], "PROCS WARNING: 1 process with args '"+marker+"'") {
				t.Errorf("on=box: %s %v %q, want degraded: PROCS WARNING", s.Severity, s.Values, s.Findings)
			}
		})
	}
}
