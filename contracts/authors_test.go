package contracts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What new authors tripped on writing contracts (#23), each as they met it.

// TestBudgetInDaysIsADuration: `budget: "2 per 1d"` was refused ("must be
// a duration like 10m") while `--timeout 1d` worked. Every duration the
// contract format takes reads one grammar, ParseDuration: Go's units and
// d and w.
func TestBudgetInDaysIsADuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"1d", 24 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1w2d3h4m5s", (9*24+3)*time.Hour + 4*time.Minute + 5*time.Second},
		{"1.5d", 36 * time.Hour},
		{"90s", 90 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"500ms", 500 * time.Millisecond},
		{"0s", 0},
		{"-1d", -24 * time.Hour},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty duration: give a number with a unit, e.g. 90s, 15m, 2h or 1d"},
		{"90", `"90" has no unit: write 90s, 90m or 90h (units: s, m, h, d for days, w for weeks)`},
		{"1x", `"1x" is not a duration: give a number with a unit, e.g. 90s, 15m, 2h, 1d or 1w`},
		{"d", `"d" is not a duration`},
		{"1d2", `"1d2" is not a duration`},
		{"1..2d", `"1..2d" is not a duration`},
		{"99999999999w", `"99999999999w" is too long a duration`},
	} {
		t.Run("refuses "+tc.in, func(t *testing.T) {
			if _, err := ParseDuration(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseDuration(%q) error %v; want %q", tc.in, err, tc.want)
			}
		})
	}

	// Every place of a contract that takes a duration takes days.
	src := `---
name: days
runtime_contract: 2
schedule: {every: 1d, start_delay: 1h}
guards:
  budget: "2 per 1d"
  debounce: 1d
  grace: 1m
  repeat: 1w
  crash_loop: {max_restarts: 3, per: 2d, then: alert}
notify:
  - {webhook: {url: "http://127.0.0.1:1/hook", timeout: 1d}}
---

## Execution

### S {#s agent=a}

` + "```sh {id=p timeout=1d}\necho 1\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`it == \"1\" && restarts(\"a\", \"1w\") < 3`" + ` | ` + "`restarts(\"a\", \"1w\") >= 3 && it != \"\"`" + ` |

| Condition | Action | Guards |
|-----------|--------|--------|
| ` + "`severity == \"critical\"`" + ` | ` + "`true`" + ` | budget="1 per 2d" grace=1d |
`
	c, ds := Parse("days.md", []byte(src), Options{})
	if c == nil || len(ds) != 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	day := 24 * time.Hour
	if c.Guards.Budget.Window != day || c.Schedule.Every != day || c.Guards.Debounce != day || c.Guards.Repeat != 7*day ||
		c.Guards.CrashLoop.Per != 2*day || c.Stages[0].Steps[0].Timeout != day ||
		c.Stages[0].Actions[0].Guard.Budget.Window != 2*day || c.Stages[0].Actions[0].Guard.Grace != day ||
		c.Notify[0].Options.(*WebhookOptions).Timeout != day {
		t.Fatalf("a duration in days read wrong: %+v", c.Guards)
	}
	if p := Explain(c); p.Guards.Budget != "2 per 1d" {
		t.Errorf("explain shows the budget as %q, want 2 per 1d", p.Guards.Budget)
	}
}

// TestOneDurationParser: the contract format and the command line have
// one duration parser, ParseDuration; a second one (time.ParseDuration
// called directly) is how `budget: "2 per 1d"` came to be refused while
// `--timeout 1d` worked.
func TestOneDurationParser(t *testing.T) {
	direct := regexp.MustCompile(`time\.ParseDuration\(`)
	for _, dir := range []string{".", "../cmd/contractd", "../engine", "../engine/replay"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == "duration.go" {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if loc := direct.FindIndex(src); loc != nil {
				line := 1 + strings.Count(string(src[:loc[0]]), "\n")
				t.Errorf("%s:%d: time.ParseDuration: use contracts.ParseDuration, the one duration grammar", f, line)
			}
		}
	}
}

// TestLogPathFillsVars: `log: ${out}/run.log` passed lint --strict and
// every run then failed to open "${out}/run.log". log: fills vars as every
// other attribute does, after the inventory and --var; a var it cannot
// fill is an error at its column, with a suggestion for a near miss.
func TestLogPathFillsVars(t *testing.T) {
	head := "---\nname: l\nruntime_contract: 2\nvars: {out: /srv/x, token_file: t}\nsecrets: [API_TOKEN]\n"
	for _, tc := range []struct {
		name, log string
		vars      map[string]string
		want      string // the path, or the diagnostic
	}{
		{"plain", "log: ${out}/run.log", nil, "/srv/x/run.log"},
		{"quoted", `log: "${out}/${out}.log"`, nil, "/srv/x//srv/x.log"},
		{"after --var", "log: ${out}/run.log", map[string]string{"out": "/var/log/c"}, "/var/log/c/run.log"},
		{"no var", "log: /var/log/l.log", nil, "/var/log/l.log"},
		{"a typo", "log: ${otu}/run.log", nil, `l.md:6:6: error: undefined var "otu" (did you mean "out"?)`},
		{"a typo, quoted", `log: "/a/${otu}.log"`, nil, `l.md:6:10: error: undefined var "otu" (did you mean "out"?)`},
		{"unknown", "log: ${nosuch}/run.log", nil, `l.md:6:6: error: undefined var "nosuch" (define it under vars, or pass --var nosuch=VALUE)`},
		{"a secret", "log: /a/${API_TOKEN}.log", nil, `l.md:6:9: error: log: secret API_TOKEN is not filled into the log file's path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ds := Parse("l.md", []byte(head+tc.log+"\n---\n"), Options{Vars: tc.vars})
			if strings.HasPrefix(tc.want, "/") {
				if c == nil || len(ds) != 0 || c.Log != tc.want {
					t.Fatalf("log %q; diagnostics:\n%s\nwant %s", c.Log, ds, tc.want)
				}
				return
			}
			if !strings.Contains(ds.String(), tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant %s", ds, tc.want)
			}
		})
	}
}

// TestUnclosedFenceIsAnError: a code fence never closed linted clean and
// silently turned the tables below it into script text (the run then
// reported unknown). It is an error at the opening fence.
func TestUnclosedFenceIsAnError(t *testing.T) {
	head := "---\nname: f\nruntime_contract: 2\n---\n\n## Execution\n\n### S {#s}\n\n"
	table := "\n| Field | Healthy | Critical |\n|-------|---------|----------|\n| `stdout` | ok | != ok |\n"
	for _, tc := range []struct{ name, body, want string }{
		{"a step", "```sh {id=p}\necho ok\n" + table,
			"f.md:10:1: error: code fence ``` is never closed: everything to the end of the file, tables and steps included, is read as its text (close it with a ``` line)"},
		{"a longer fence closed by a shorter one", "````sh {id=p}\necho ok\n```\n" + table,
			"f.md:10:1: error: code fence ```` is never closed"},
		{"tildes", "~~~sh {id=p}\necho ok\n" + table, "f.md:10:1: error: code fence ~~~ is never closed"},
		{"a documentation block", "```sh {id=p}\necho ok\n```\n" + table + "\n  ```text\nan example\n", "f.md:18:3: error: code fence ``` is never closed"},
		{"in a list item", "- a note:\n  ```text\n  an example\n- next\n\n```sh {id=p}\necho ok\n```\n" + table,
			"f.md:11:3: error: code fence ``` is never closed: everything to the end of its list item or quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ds := Parse("f.md", []byte(head+tc.body), Options{})
			if c != nil || !strings.Contains(ds.String(), tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant %s", ds, tc.want)
			}
		})
	}
	if c, ds := Parse("f.md", []byte(head+"```sh {id=p}\necho ok\n```"+table+"\n```text\nclosed at the end of the file\n```"), Options{}); c == nil || len(ds) != 0 {
		t.Fatalf("closed fences: %s", ds)
	}
}

// backupMonitor is the contract an author wrote: a for_each over backups
// with a `file` item key, a step reporting JSON, and per-agent snapshot
// keys named like the item key (file) and like a JSON field (age_h, size).
const backupMonitor = `---
name: backups
runtime_contract: 2
vars: {dir: /srv/backups}
for_each:
  backups: [{name: db, file: db.tar}, {name: www, file: www.tar}]
---

## Maintains

- agents: map of per-backup snapshots

### Per-Agent Snapshot Schema

` + "```json" + `
{"db": {"file": "db.tar", "age_h": 3, "size": 1024}}
` + "```" + `
BINDINGS
## Execution

### Backup {#backup agent=$name for_each=backups}

` + "```sh {id=stat as=json}" + `
f="${dir}/${file}"
echo "{\"age_h\": $(( ($(date +%s) - $(stat -c %Y "$f")) / 3600 )), \"size\": $(stat -c %s "$f")}"
` + "```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`age_h`" + ` | < 26 | >= 26 |
`

// TestPerAgentKeyFilledByNothingIsTrue: lint warned "per-agent key file …
// is filled by nothing" while the run filled it, and its advice (`| file |
// file |`) gave "undefined variable file". Lint and the run read one rule:
// a key named like a for_each item key is filled by it (beneath a step
// field of that name) and a binding may read it by name; a key only a
// JSON field lint cannot see may fill is a note, not a warning; the
// warning's and the note's advice both lint clean when followed.
func TestPerAgentKeyFilledByNothingIsTrue(t *testing.T) {
	bind := func(rows ...string) string {
		return "\n| Key | Value |\n|-----|-------|\n" + strings.Join(rows, "\n") + "\n\n"
	}
	declared := "```sh {id=stat as=json fields=\"age_h:int size:int\"}"
	for _, tc := range []struct {
		name, step, bindings string
		want                 []string // every diagnostic, in order
	}{
		{"as written", "", "\n", []string{
			"b.md:16:27: note: per-agent key age_h (agent db) is filled only if step stat's JSON output has a field age_h, which lint cannot see: " +
				"its fields are not declared; to make it checked, declare them (`fields=\"age_h:TYPE …\"` on the step, or an example output block)",
			"b.md:16:39: note: per-agent key size (agent db) is filled only if step stat's JSON output has a field size, which lint cannot see: " +
				"its fields are not declared; to make it checked, declare them (`fields=\"size:TYPE …\"` on the step, or an example output block)",
			"b.md:23:4: warning: step stat reads JSON whose fields are not declared, so lint could not check age_h: " +
				"declare them with an example output (a ```json {example=stat} block) or fields=\"age_h:TYPE …\""}},
		{"the note's advice", declared, "\n", nil},
		{"an item key read by name", declared, bind("| `file` | `file` |"), nil},
		{"an item key read as item.file", declared, bind("| `file` | `item.file` |"), nil},
		{"a binding to a declared field", declared, bind("| `size` | `stat.size` |"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(backupMonitor, "BINDINGS\n", tc.bindings, 1)
			if tc.step != "" {
				src = strings.Replace(src, "```sh {id=stat as=json}", tc.step, 1)
			}
			c, ds := Parse("b.md", []byte(src), Options{})
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if c == nil || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s", ds, strings.Join(tc.want, "\n"))
			}
		})
	}

	// Where lint can know (no step reports JSON), nothing filling a key is
	// a warning, and its advice lints clean.
	plain := strings.Replace(strings.Replace(backupMonitor, "```sh {id=stat as=json}", "```sh {id=stat}", 1), "`age_h`", "`stdout`", 1)
	plain = strings.Replace(plain, "BINDINGS\n", "\n", 1)
	_, ds := Parse("b.md", []byte(plain), Options{})
	for _, want := range []string{
		"b.md:16:27: warning: per-agent key age_h (agent db) is filled by nothing: no health-row field, step value, <step>_<field> or for_each item key is named so; bind it in a `Key | Value` table under ## Maintains (`| age_h | stat.stdout |`)",
		"b.md:16:39: warning: per-agent key size (agent db) is filled by nothing",
	} {
		if !strings.Contains(ds.String(), want) {
			t.Errorf("diagnostics:\n%s\nwant %s", ds, want)
		}
	}
	if strings.Contains(ds.String(), "key file") {
		t.Errorf("file is the item's key, which fills it:\n%s", ds)
	}
	fixed := strings.Replace(plain, "## Execution", "| Key | Value |\n|-----|-------|\n| `age_h` | `stat.stdout` |\n| `size` | `stat.stdout` |\n\n## Execution", 1)
	if _, ds := Parse("b.md", []byte(fixed), Options{}); len(ds) != 0 {
		t.Errorf("the warning's advice, followed:\n%s", ds)
	}
}

// TestComparisonOnNullIsNoValue: lint was silent about `< 26` on a field
// that may be null, which the run then judged "unknown (invalid
// operation: <nil> < int)". Null is no value (steps.EvaluateRow): where
// lint can know a field may be null (the per-agent example shows it
// null) and no cell of its row holds on null, a note says the row is
// unknown then and how to judge null; a row with a cell for null is
// clean.
func TestComparisonOnNullIsNoValue(t *testing.T) {
	src := strings.Replace(backupMonitor, `"age_h": 3`, `"age_h": null`, 1)
	src = strings.Replace(src, "BINDINGS\n", "\n| Key | Value |\n|-----|-------|\n| `size` | `stat.size` |\n\n", 1)
	src = strings.Replace(src, "```sh {id=stat as=json}", "```sh {id=stat as=json fields=\"age_h:int size:int\"}", 1)
	c, ds := Parse("b.md", []byte(src), Options{})
	want := "b.md:34:3: note: age_h can be null (agent db's example shows it null) and no cell of this row holds on null, so a null age_h leaves the row unknown (age_h is null); " +
		"to judge null, put `null` in its column (or write `null or < N`)\n"
	if c == nil || ds.String() != want {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s", ds, want)
	}
	for _, cells := range []string{"| null or < 26 | >= 26 |", "| < 26 | `it == nil \\|\\| it >= 26` |", "| < 26 | >= 26 or null |",
		// null is tried first: the expression alone fails on null.
		"| `it < 26` | `it >= 26` or null |"} {
		fixed := strings.Replace(src, "| < 26 | >= 26 |", cells, 1)
		if _, ds := Parse("b.md", []byte(fixed), Options{}); len(ds) != 0 {
			t.Errorf("%s: a row with a cell for null:\n%s", cells, ds)
		}
	}
}

// TestExplainShowsAlertRoutes: explain's text did not show the alert
// routes, alert_on, the message templates or the log: file, so an author
// could not see where a contract's messages go. The text and --json show
// each route with its options in force, alert_on and what it sends, every
// template, and the log file as the run fills it.
func TestExplainShowsAlertRoutes(t *testing.T) {
	src := `---
name: routes
runtime_contract: 2
vars: {out: /var/log/c, hook: "https://hooks.example/T000/B000/XXXX"}
alert_on: critical
log: ${out}/routes.log
messages:
  open: "{{.Unit}} is {{.Severity}}: {{.Findings}}"
notify:
  - {log: {}}
  - {command: {run: "cat >> /tmp/pages.txt", format: json, name: pages}}
  - {webhook: {url: "${hook}", retries: 3}}
---

## Execution

### S {#s agent=a}

` + "```sh {id=p}\necho ok\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action | Message |
|-----------|--------|---------|
| ` + "`p.stdout != \"ok\"`" + ` | ` + "`systemctl restart a`" + ` | restarted {{.Unit}} ({{.Seen}}): {{.Verify}} |
`
	c, ds := Parse("routes.md", []byte(src), Options{})
	if c == nil || len(ds) != 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	explainSays(t, c,
		"       message: restarted {{.Unit}} ({{.Seen}}): {{.Verify}}\n",
		"\nalerts: alert_on critical: repair messages, escalations, and incidents raised at critical, with their resolves\n",
		"  route log: contractd's own log (stderr, or the journal), format text\n",
		"  route pages (command): run cat >> /tmp/pages.txt, format json, timeout 10s\n",
		"  route webhook: url https://hooks.example/…, format json, timeout 10s, retries 3, backoff 1s\n",
		"  open message: {{.Unit}} is {{.Severity}}: {{.Findings}}\n",
		"log: /var/log/c/routes.log (one line per run, action, alert and error)\n",
	)
	p := Explain(c)
	if p.AlertOn != "critical" || p.Log != "/var/log/c/routes.log" || p.Messages["open"] != "{{.Unit}} is {{.Severity}}: {{.Findings}}" ||
		len(p.Routes) != 3 || p.Routes[1].Name != "pages" || p.Routes[1].Options["format"] != "json" || p.Routes[2].Options["url"] != "https://hooks.example/…" ||
		p.Stages[0].Actions[0].Template != "restarted {{.Unit}} ({{.Seen}}): {{.Verify}}" {
		t.Errorf("explain --json: alert_on %q, log %q, messages %v, routes %+v, template %q", p.AlertOn, p.Log, p.Messages, p.Routes, p.Stages[0].Actions[0].Template)
	}
}

// TestLintNotesRepairTemplateThatIgnoresTheVerdict: a repair's Message
// template shapes the message whether the repair helped or not, so one that
// never reads {{.Verify}} (nor the engine's {{.Text}}) gets a note at its
// cell, or at messages.repair; a row that repairs nothing (alert, log) and
// a template that reads the verdict, anywhere in it, get none.
func TestLintNotesRepairTemplateThatIgnoresTheVerdict(t *testing.T) {
	const note = "note: message template does not read {{.Verify}}: a repair that did not help is sent in these words too (say the outcome with {{.Verify}})"
	for _, tc := range []struct {
		name, messages, action, message, want string
	}{
		{"the seed's line", "", "`systemctl restart a`", "restarted {{.Unit}} (wedged)", "v.md:19:48: " + note + "\n"},
		{"reads the verdict", "", "`systemctl restart a`", "restarted {{.Unit}} ({{.Verify}})", ""},
		{"reads it in a branch", "", "`systemctl restart a`", "{{if eq $.Verify \"remediated\"}}restarted {{.Unit}}{{else}}{{.Unit}} still down{{end}}", ""},
		{"the engine's words", "", "`systemctl restart a`", "a2a: {{.Text}}", ""},
		{"an alert row", "", "alert", "{{.Unit}} is down", ""},
		{"messages.repair", "messages:\n  repair: \"restarted {{.Unit}}\"\n", "`systemctl restart a`", "", "v.md:6:11: note: messages.repair: " + note[len("note: "):] + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "---\nname: v\nruntime_contract: 2\nalert_on: repair\n" + tc.messages + "---\n\n## Execution\n\n### S {#s agent=a}\n\n" +
				"```sh {id=p}\necho ok\n```\n\nExpected: `ok`\n\n| Condition | Action | Message |\n|-----------|--------|---------|\n" +
				"| `p.stdout != \"ok\"` | " + tc.action + " | " + tc.message + " |\n"
			c, ds := Parse("v.md", []byte(src), Options{})
			if c == nil || ds.String() != tc.want {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s", ds, tc.want)
			}
		})
	}
}
