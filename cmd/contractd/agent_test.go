package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/fixtures/owner"
)

// watchdogContract runs an agent session as its probe: the stand-in
// harness (fixtures/scripts/standin-agent.sh) in the mode and with the
// report the test sets with --var. Its one repair cannot fix anything,
// and the debounce allows it once an hour.
const watchdogContract = `---
name: watchdog
runtime_contract: 2
guards:
  debounce: 1h
  grace: 100ms
vars:
  standin: /nonexistent
  mode: valid
  report: "{}"
  seen: ""
  dir: /nonexistent
notify:
  - {webhook: {url: "http://{{hook}}/hook", retries: 0, timeout: 5s}}
---

## Execution

### Web {#web agent=web}

The web tier, as an agent sees it.

` + "```agent {id=watch timeout={{timeout}} fields=\"status:string restarts:int\"}\nexec sh \"$standin\" \"$mode\" \"$report\" \"$seen\"\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`status`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |
| ` + "`restarts`" + ` | < 3 | ≥ 3 |

| Condition | Action |
|-----------|--------|
| ` + "`watch.status == \"down\"`" + ` | ` + "`echo repaired >> ${dir}/repairs`" + ` |
`

// TestAgentStepAsAWatchdog drives the real binary with a real webhook
// listener and the stand-in harness: a valid report is judged by the
// tables (one repair, one message); the next run's session is briefed
// with the open incident and nothing is sent again; contractd brief lists
// that incident and the report's fields with their types; a late session
// is killed at its deadline, its process group gone, and is unknown with
// its output's tail; an invalid report is unknown naming the bad field.
func TestAgentStepAsAWatchdog(t *testing.T) {
	bin := binary(t)
	hook := startReceiver(t, "127.0.0.1:0")
	standin, err := filepath.Abs("../../fixtures/scripts/standin-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	write := func(name, timeout string) string {
		path := filepath.Join(dir, name)
		text := strings.NewReplacer("{{hook}}", hook.addr, "{{timeout}}", timeout).Replace(watchdogContract)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	contract := write("watchdog.md", "1m")
	if out, err := exec.Command(bin, "lint", "--strict", contract).CombinedOutput(); err != nil {
		t.Fatalf("lint --strict: %v\n%s", err, out)
	}
	run := func(path, state string, vars ...string) *engine.Report {
		t.Helper()
		args := []string{"run", "--json", "--state-dir", state, "--var", "standin=" + standin, "--var", "dir=" + dir}
		for _, v := range vars {
			args = append(args, "--var", v)
		}
		cmd := exec.Command(bin, append(args, path)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("contractd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var rep engine.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("run --json: %v\n%s", err, out)
		}
		return &rep
	}
	messages := func() []notify.Message {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		return append([]notify.Message(nil), hook.bodies...)
	}
	repairs := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "repairs"))
		return strings.Count(string(b), "repaired\n")
	}
	down := `report={"status": "down", "restarts": 1}`
	seen := filepath.Join(dir, "seen")

	// A valid report: its status is judged critical by the table, the
	// one allowed repair runs (and does not help), and one message says so.
	rep := run(contract, state, "mode=valid", down, "seen="+seen)
	if rep.OverallSeverity != contracts.SeverityCritical || repairs() != 1 || len(messages()) != 1 {
		t.Fatalf("valid report of down: severity %v, %d repairs, messages %+v; want critical, one repair, one message", rep.OverallSeverity, repairs(), messages())
	}
	if m := messages()[0]; m.Agent != "web" || !strings.Contains(m.Text, "status (down) down → critical") {
		t.Fatalf("the message: %+v", m)
	}

	// The next run: the same finding. The session was told it is already
	// alerted, the repair is held by the debounce, and nothing is sent.
	if err := os.WriteFile(seen, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rep = run(contract, state, "mode=valid", down, "seen="+seen)
	if rep.OverallSeverity != contracts.SeverityCritical || repairs() != 1 || len(messages()) != 1 {
		t.Fatalf("second run: severity %v, %d repairs, %d messages; want critical, still one repair and one message", rep.OverallSeverity, repairs(), len(messages()))
	}
	briefed, _ := os.ReadFile(seen)
	alerted, _, _ := strings.Cut(string(briefed), "=== end of briefing ===")
	for _, want := range []string{"## Already alerted", "web: critical (critical) — web is critical: status (down) down → critical",
		"Step `watch` (agent, timeout 1m) is this session", "| `status` | string | `up` | — | `down` |", "| `restarts` | int | `< 3` | — | `≥ 3` |"} {
		if !strings.Contains(alerted, want) {
			t.Fatalf("the second session's briefing lacks %q:\n%s", want, alerted)
		}
	}
	out, err := exec.Command(bin, "brief", "--state-dir", state, "--stage", "web", contract).CombinedOutput()
	if err != nil {
		t.Fatalf("contractd brief: %v\n%s", err, out)
	}
	for _, want := range []string{"- open since ", "web: critical (critical) — web is critical: status (down) down → critical",
		"| web | watch | `status` | string | `up` | — | `down` |", "| web | watch | `restarts` | int | `< 3` | — | `≥ 3` |"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("contractd brief lacks %q:\n%s", want, out)
		}
	}

	// A late session: killed at its deadline with its whole process
	// group, unknown with the end of its output. Nothing is repaired and
	// nothing sent (on state of its own: an unknown unit says nothing
	// until unknown_after runs).
	late, fresh := write("late.md", "2s"), filepath.Join(dir, "fresh")
	pids := filepath.Join(dir, "pids")
	rep = run(late, fresh, "mode=late", `report={"status": "up", "restarts": 0}`, "seen="+pids)
	step := rep.Stages[0].Steps[0]
	finding := strings.Join(step.Findings, "\n")
	if step.Severity != contracts.SeverityUnknown || !step.TimedOut || !strings.Contains(finding, "the session ran past its deadline (timeout=2s) and its process group was killed") ||
		!strings.Contains(finding, `output's tail: "standin: briefed on stage web of watchdog\nstandin: still thinking"`) {
		t.Fatalf("late session: severity %v, timed out %v, findings %q", step.Severity, step.TimedOut, step.Findings)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatalf("the late harness did not say its process group: %v", err)
	}
	pgid, _ := strconv.Atoi(strings.Fields(string(b))[0])
	if alive := owner.InGroup(pgid); len(alive) > 0 {
		t.Fatalf("the late session's process group %d still runs %v", pgid, alive)
	}
	if repairs() != 1 || len(messages()) != 1 {
		t.Fatalf("late session: %d repairs, %d messages; an unknown step repairs and sends nothing", repairs(), len(messages()))
	}

	// An invalid report: unknown, naming the field that is wrong.
	rep = run(contract, fresh, "mode=invalid", `report={"status": 3, "restarts": 1}`)
	step = rep.Stages[0].Steps[0]
	if step.Severity != contracts.SeverityUnknown || !strings.Contains(strings.Join(step.Findings, "\n"), "report not taken: the report is not as declared: field status: want string, got number 3") {
		t.Fatalf("invalid report: severity %v, findings %q", step.Severity, step.Findings)
	}
	if repairs() != 1 || len(messages()) != 1 {
		t.Fatalf("invalid report: %d repairs, %d messages; an unknown step repairs and sends nothing", repairs(), len(messages()))
	}
}
