package steps_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/replay"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/steps"
)

// standin is the stand-in harness: a script that reads the briefing and
// writes the report it is told to (fixtures/scripts/standin-agent.sh).
func standin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../fixtures/scripts/standin-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// agentStep is an agent step that runs the stand-in in mode with report,
// its fields declared as fields= does.
func agentStep(t *testing.T, timeout time.Duration) *contracts.Step {
	t.Helper()
	return &contracts.Step{ID: "watch", Kind: "agent", Timeout: timeout,
		Script: `exec sh "$standin" "$mode" "$report" "$seen"` + "\n",
		Fields: map[string]contracts.Type{"status": contracts.TypeString, "restarts": contracts.TypeInt, "queue": contracts.TypeMap, "queue.depth": contracts.TypeInt}}
}

// session runs step's probe as the engine does: under the step's
// deadline, with a briefing that names where the report goes.
func session(t *testing.T, step *contracts.Step, vars map[string]string) *steps.Observation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), step.Timeout)
	defer cancel()
	ctx = steps.WithSession(ctx, steps.Session{Contract: "watched", Stage: "web", Agent: "web",
		Brief: func(report string) ([]byte, error) {
			return []byte("# Briefing\n\nWrite your report to `" + report + "`.\n"), nil
		}})
	return steps.Kinds["agent"].Probe(ctx, step, vars, nil)
}

// judge evaluates o with a table that a report the agent did not write
// would pass on its null fields: only Invalid keeps the step unknown.
func judge(step *contracts.Step, o *steps.Observation) {
	steps.Evaluate(step, o, o.Values)
}

// An agent step's session with the stand-in harness: a valid report's
// fields become the step's values; a late session is killed at the
// deadline, process group and all, and is unknown with the output's tail;
// an invalid report is unknown naming the bad field; a harness that
// writes none is unknown saying so.
func TestAgentSession(t *testing.T) {
	harness := standin(t)
	vars := func(mode, report, seen string) map[string]string {
		return map[string]string{"standin": harness, "mode": mode, "report": report, "seen": seen}
	}

	t.Run("valid", func(t *testing.T) {
		seen := filepath.Join(t.TempDir(), "seen")
		step := agentStep(t, time.Minute)
		o := session(t, step, vars("valid", `{"status": "down", "restarts": 3, "queue": {"depth": 7}}`, seen))
		if o.Invalid != "" || o.Values["reported"] != true || o.Values["status"] != "down" || o.Values["restarts"] != 3 {
			t.Fatalf("valid report: invalid %q, values %v", o.Invalid, o.Values)
		}
		if q, _ := o.Values["queue"].(map[string]any); q["depth"] != 7 {
			t.Fatalf("queue.depth: %v", o.Values["queue"])
		}
		if out, _ := o.Values["output"].(string); !strings.Contains(out, "standin: briefed on stage web of watched") {
			t.Fatalf("output %q: the harness's environment did not name the stage and contract", out)
		}
		b, err := os.ReadFile(seen)
		if err != nil || !strings.Contains(string(b), "Write your report to `") {
			t.Fatalf("the harness was not given the briefing on stdin: %v\n%s", err, b)
		}
		_, rest, _ := strings.Cut(string(b), "`")
		report, _, _ := strings.Cut(rest, "`")
		dir := filepath.Dir(report)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the session's directory %s outlives the step: %v", dir, err)
		}
	})

	t.Run("late", func(t *testing.T) {
		pids := filepath.Join(t.TempDir(), "pids")
		step := agentStep(t, 2*time.Second)
		start := time.Now()
		o := session(t, step, vars("late", `{"status": "up", "restarts": 0, "queue": {"depth": 0}}`, pids))
		took := time.Since(start)
		judge(step, o)
		if o.Severity != contracts.SeverityUnknown || o.Values["timed_out"] != true || o.Values["exit_code"] != 124 || o.Values["reported"] != false {
			t.Fatalf("late report: severity %v, values %v, findings %q", o.Severity, o.Values, o.Findings)
		}
		if took > 30*time.Second {
			t.Fatalf("the session was stopped after %s, not at its 2s deadline", took)
		}
		finding := strings.Join(o.Findings, "\n")
		for _, want := range []string{"the session ran past its deadline (timeout=2s) and its process group was killed", `output's tail: "`, "standin: still thinking", "→ unknown"} {
			if !strings.Contains(finding, want) {
				t.Fatalf("finding %q lacks %q", finding, want)
			}
		}
		b, err := os.ReadFile(pids)
		if err != nil {
			t.Fatalf("the late harness did not say its process group: %v", err)
		}
		f := strings.Fields(string(b))
		pgid, _ := strconv.Atoi(f[0])
		if alive := owner.InGroup(pgid); len(alive) > 0 {
			t.Fatalf("process group %d still has %v after the step returned (pids %s)", pgid, alive, b)
		}
	})

	for _, tc := range []struct{ name, report, want string }{
		{"a field of another type", `{"status": "down", "restarts": "three", "queue": {"depth": 1}}`, `field restarts: want int, got string "three"`},
		{"a field missing", `{"status": "down", "queue": {"depth": 1}}`, "field restarts: missing"},
		{"a field not declared", `{"status": "down", "restarts": 1, "restart": 2, "queue": {"depth": 1}}`, `field restart: not declared (the fields are queue, restarts, status); did you mean "restarts"?`},
		{"a nested field", `{"status": "down", "restarts": 1, "queue": {"depht": 1}}`, "field queue.depht: not declared"},
		{"null for a typed field", `{"status": null, "restarts": 1, "queue": {"depth": 1}}`, "field status: want string, got null"},
		{"not JSON", `status: down`, "not JSON"},
		{"not an object", `["down"]`, "a report is one JSON object, got a list"},
		{"two objects", `{"status": "down", "restarts": 1, "queue": {"depth": 1}} {}`, "more than one JSON value"},
	} {
		t.Run("invalid: "+tc.name, func(t *testing.T) {
			step := agentStep(t, time.Minute)
			o := session(t, step, vars("invalid", tc.report, ""))
			judge(step, o)
			errText, _ := o.Values["report_error"].(string)
			if o.Severity != contracts.SeverityUnknown || o.Values["reported"] != false || !strings.Contains(errText, tc.want) {
				t.Fatalf("report %s: severity %v, report_error %q; want unknown naming %q", tc.report, o.Severity, errText, tc.want)
			}
			if _, leaked := o.Values["status"]; leaked {
				t.Fatalf("a report not taken still gave values: %v", o.Values)
			}
			if !strings.Contains(strings.Join(o.Findings, "\n"), "standin: reported") {
				t.Fatalf("findings %q lack the output's tail", o.Findings)
			}
		})
	}

	t.Run("never", func(t *testing.T) {
		step := agentStep(t, time.Minute)
		o := session(t, step, vars("never", "", ""))
		judge(step, o)
		if o.Severity != contracts.SeverityUnknown || o.Values["report_error"] != "no report was written (the harness exited 0)" {
			t.Fatalf("no report: severity %v, report_error %q", o.Severity, o.Values["report_error"])
		}
		if !strings.Contains(strings.Join(o.Findings, "\n"), "standin: nothing to report") {
			t.Fatalf("findings %q lack the output's tail", o.Findings)
		}
	})

	t.Run("secrets", func(t *testing.T) {
		// A contract's secret reaches the harness exported, never in a
		// file of the session's, and is redacted from its output.
		step := agentStep(t, time.Minute)
		step.Script = `echo "key=$API_KEY files=$(grep -c "$API_KEY" harness.sh briefing.md | tr '\n' ' ')"` + "\n" +
			`echo '{"status": "up", "restarts": 0, "queue": {"depth": 0}}' >"$CONTRACTD_REPORT"` + "\n"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		secret := "s3cr3t-value"
		ctx = steps.WithSession(ctx, steps.Session{Secrets: map[string]string{"API_KEY": secret},
			Brief: func(string) ([]byte, error) { return []byte("the briefing\n"), nil }})
		o := steps.Kinds["agent"].Probe(ctx, step, steps.WithSecrets(map[string]string{"unit": "web"}, map[string]string{"API_KEY": secret}), nil)
		out, _ := o.Values["output"].(string)
		if o.Values["reported"] != true || strings.Contains(out, secret) || !strings.Contains(out, "key=") || !strings.Contains(out, "files=harness.sh:0 briefing.md:0") {
			t.Fatalf("secret in the session: reported %v, output %q", o.Values["reported"], out)
		}
		if strings.Contains(out, "key= ") {
			t.Fatalf("the secret was not exported to the harness: %q", out)
		}
	})

	t.Run("a link for a report", func(t *testing.T) {
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte(`{"status": "up", "restarts": 0, "queue": {"depth": 0}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		step := agentStep(t, time.Minute)
		step.Script = `ln -s "$target" "$CONTRACTD_REPORT"` + "\n"
		o := session(t, step, map[string]string{"target": secret})
		if o.Values["reported"] != false || !strings.Contains(o.Values["report_error"].(string), "not a regular file") {
			t.Fatalf("a symlinked report was taken: %v", o.Values)
		}
	})
}

// A recorded report is checked as the file is: `contractd test` replays
// an agent step from its report, taken or not.
func TestAgentReplay(t *testing.T) {
	step := agentStep(t, time.Minute)
	for _, tc := range []struct {
		name  string
		rec   *steps.Recording
		taken bool
		want  string
	}{
		{"a map", &steps.Recording{Report: map[string]any{"status": "down", "restarts": 2, "queue": map[string]any{"depth": 1}}}, true, ""},
		{"the text", &steps.Recording{Report: `{"status": "down", "restarts": 2, "queue": {"depth": 1}}`}, true, ""},
		{"a bad field", &steps.Recording{Report: map[string]any{"status": "down", "restarts": 2.5, "queue": map[string]any{"depth": 1}}}, false, "field restarts: want int, got number 2.5"},
		{"none", &steps.Recording{Stdout: "gave up"}, false, "no report was written (the harness exited 0)"},
		{"a timeout", &steps.Recording{Timeout: true, Report: map[string]any{"status": "up"}}, false, "ran past its deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := steps.Replay(step, tc.rec)
			if o.Values["reported"] != tc.taken || !strings.Contains(o.Values["report_error"].(string), tc.want) {
				t.Fatalf("replayed: reported %v, report_error %q; want %v and %q", o.Values["reported"], o.Values["report_error"], tc.taken, tc.want)
			}
			if tc.taken {
				if got, want := produced(o), declared(steps.Kinds["agent"], "json"); !containsAll(got, want) || o.Values["restarts"] != 2 {
					t.Fatalf("a taken report produces %v, want the kind's and the form's values %v and its fields", got, want)
				}
			}
		})
	}
}

func containsAll(got, want []string) bool {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// contractd test replays an agent step from a recorded report: a map is
// the JSON object, judged by the table; one that is not as declared is
// unknown, and nothing is repaired.
func TestAgentContractTest(t *testing.T) {
	dir := t.TempDir()
	contract := "---\nname: watched\nruntime_contract: 2\n---\n\n## Execution\n\n### Web {#web agent=web}\n\n" +
		"```agent {id=watch timeout=2m fields=\"status:string restarts:int\"}\nexec /usr/local/bin/watchdog-harness\n```\n\n" +
		"| Field | Healthy | Critical |\n|---|---|---|\n| `status` | `up` | `down` |\n| `restarts` | < 3 | ≥ 3 |\n\n" +
		"| Condition | Action |\n|---|---|\n| `watch.status == \"down\"` | `systemctl restart web` |\n"
	test := "runs:\n" +
		"  - name: down\n    steps: {web/watch: {report: {status: down, restarts: 1}}}\n" +
		"    after_repair: {web/watch: {report: {status: up, restarts: 1}}}\n" +
		"    expect: {overall: healthy, actions: [{action: systemctl restart web, status: ran, verify: remediated}]}\n" +
		"  - name: a report not as declared\n    steps: {web/watch: {report: '{\"status\": \"up\", \"restarts\": \"1\"}', stdout: looked}}\n" +
		"    expect: {overall: unknown, actions: []}\n" +
		"  - name: late\n    steps: {web/watch: {timeout: true}}\n    expect: {overall: unknown, actions: []}\n"
	for name, text := range map[string]string{"watched.md": contract, "watched.test.yaml": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := replay.Test(context.Background(), filepath.Join(dir, "watched.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || len(res.Runs) != 3 {
		for _, r := range res.Runs {
			t.Errorf("%s: %v %v", r.Label, r.Severity, r.Diffs)
		}
		t.Fatal("contractd test of an agent step failed")
	}
	finding := strings.Join(res.Runs[1].Report.Stages[0].Steps[0].Findings, "\n")
	if !strings.Contains(finding, `field restarts: want int, got string "1"`) || !strings.Contains(finding, `output's tail: "looked"`) {
		t.Fatalf("the replayed invalid report's finding: %q", finding)
	}
}

// What lint says of the mistakes an author makes with an agent step: each
// at its place, once, with the way out.
func TestAgentLint(t *testing.T) {
	const good = "---\nname: watched\nruntime_contract: 2\ntargets:\n  box: {ssh: root@192.0.2.1}\n---\n\n## Execution\n\n### Web {#web agent=web}\n\n" +
		"```agent {id=watch timeout=2m fields=\"status:string restarts:int\"}\nexec /usr/local/bin/watchdog-harness\n```\n\n" +
		"| Field | Healthy | Critical |\n|---|---|---|\n| `status` | `up` | `down` |\n| `restarts` | < 3 | ≥ 3 |\n"
	if _, ds := contracts.Parse("w.md", []byte(good), contracts.Options{}); len(ds) > 0 {
		t.Fatalf("the good contract: %s", ds)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"no declaration", ` fields="status:string restarts:int"`, "",
			"w.md:12:4: error: step watch: an agent step's output must be declared, each field with its type"},
		{"on=", "timeout=2m", "timeout=2m on=box",
			"w.md:12:31: error: on applies only to " + kindsWhere(func(k steps.Kind) bool { return k.Exec() }, "and") + " steps (an "},
		{"via=", "timeout=2m", "timeout=2m via=box", "w.md:12:31: error: via applies only to " + kindsWhere(func(k steps.Kind) bool { return k.Dials }, "and") + " steps"},
		{"as=text", "timeout=2m", "timeout=2m as=text", `w.md:12:31: error: as: an agent step's output is read as json, got "text"`},
		{"a field not declared", "| `restarts` |", "| `restart` |", `w.md:19:4: error: field restart: step watch (agent) produces no value restart (did you mean "restarts"?)`},
		{"a cell of another type", "| `restarts` | < 3 |", "| `restarts` | `low` |", "w.md:19:16: error: expression \"it == \\\"low\\\"\": invalid operation: == (mismatched types int and string)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := contracts.Parse("w.md", []byte(strings.Replace(good, tc.from, tc.to, 1)), contracts.Options{})
			if !strings.Contains(ds.String(), tc.want) {
				t.Fatalf("lint said:\n%s\nwant %q", ds, tc.want)
			}
			if n := len(ds); n != 1 {
				t.Fatalf("lint said %d things, want the one:\n%s", n, ds)
			}
		})
	}
}

// kindsWhere names the registered kinds for which want holds, in the order
// they were registered, as lint's messages list them.
func kindsWhere(want func(steps.Kind) bool, conj string) string {
	var names []string
	for _, n := range contracts.StepKindNames() {
		if want(steps.Kinds[n]) {
			names = append(names, n)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}
