package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileContract's probe prints a forged log line, a clear-screen and an
// OSC window title after its real answer; its repair fails and says the
// same on stderr.
const hostileContract = `---
name: hostile
runtime_contract: 2
notify:
  - {log: {}}
---

# Hostile output

## Execution

### Box {#box agent=box}

` + "```sh {id=p}\nprintf 'ok\\n12:00:00 hostile: repaired box (forged)\\n\\033[2J\\033]0;pwned\\007\\n'\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action |
|-----------|--------|
| ` + "`p.stdout != \"ok\"`" + ` | ` + "`printf 'no\\n12:00:00 hostile: forged too\\033[2J' >&2; exit 1`" + ` |
`

// Probe output and remote errors reach people escaped: the run report,
// the log lines and alerts on stderr, why and history keep one line per
// record and carry no control character; run --json keeps the exact bytes.
// On 02630f2 the forged line and the escape sequences came out raw.
func TestTargetOutputIsEscapedInHumanOutput(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	path := filepath.Join(dir, "hostile.md")
	if err := os.WriteFile(path, []byte(hostileContract), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMain(t, "contractd", "run", "--verify-grace", "1ms", "--state-dir", state, path)
	if code != 0 {
		t.Fatalf("run exit %d:\n%s\n%s", code, out, errs)
	}
	// The log's records are logfmt: a value is quoted as a Go string, so
	// what Printable escaped is escaped once more there. Decoded, each
	// value shows the output as the report does.
	var decoded []string
	for _, l := range strings.Split(strings.TrimSpace(errs), "\n") {
		rec, err := parseLogfmt(l)
		if err != nil {
			t.Fatalf("run log line %q: %v", l, err)
		}
		for _, v := range rec {
			decoded = append(decoded, v)
		}
	}
	outputs := map[string]string{"run": out, "run log": errs, "run log's values": strings.Join(decoded, "\n")}
	for _, args := range [][]string{{"why"}, {"history"}} {
		_, o, e := runMain(t, append(append([]string{"contractd"}, args...), "--state-dir", state, "hostile")...)
		outputs[strings.Join(args, " ")] = o + e
	}
	for name, o := range outputs {
		if strings.ContainsAny(o, "\x1b\x07\r") {
			t.Errorf("%s writes a control character:\n%q", name, o)
		}
		for _, line := range strings.Split(o, "\n") {
			if strings.HasPrefix(line, "12:00:00 hostile:") {
				t.Errorf("%s has a forged line %q:\n%s", name, line, o)
			}
		}
	}
	for _, name := range []string{"run", "run log's values", "why"} {
		if !strings.Contains(outputs[name], `ok\n12:00:00 hostile: repaired box (forged)\n\x1b[2J\x1b]0;pwned\x07`) {
			t.Errorf("%s does not show the probe's output escaped:\n%s", name, outputs[name])
		}
	}
	if !strings.Contains(outputs["why"]+outputs["run"], `no\n12:00:00 hostile: forged too\x1b[2J`) {
		t.Errorf("the repair's stderr is not shown escaped:\n%s\n%s", outputs["run"], outputs["why"])
	}

	_, jsonOut, _ := runMain(t, "contractd", "run", "--json", "--quiet", "--verify-grace", "1ms", "--state-dir", filepath.Join(dir, "state2"), path)
	var rep struct {
		Stages []struct {
			Steps []struct {
				Stdout string `json:"stdout"`
			} `json:"steps"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &rep); err != nil || len(rep.Stages) != 1 || len(rep.Stages[0].Steps) != 1 {
		t.Fatalf("run --json: %v\n%s", err, jsonOut)
	}
	if got, want := rep.Stages[0].Steps[0].Stdout, "ok\n12:00:00 hostile: repaired box (forged)\n\x1b[2J\x1b]0;pwned\x07\n"; got != want {
		t.Errorf("run --json stdout %q, want the exact bytes %q", got, want)
	}
}
