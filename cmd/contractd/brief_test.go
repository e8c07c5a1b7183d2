package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// briefContract is always down, with one allowed repair that cannot fix
// it (a report-only agent never runs it) and a message for every incident.
const briefContract = `---
name: briefed
runtime_contract: 2
report_only_agents: [web]
vars:
  dir: /nonexistent
notify:
  - {log: {path: "${dir}/pages.txt"}}
---

The web front end. Reports go to #ops.

## Execution

### Web {#web agent=web}

` + "```sh {id=probe as=json fields=\"status:string queue:int load:float\"}\necho '{\"status\": \"down\", \"queue\": 7, \"load\": 0.5}'\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`status`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |
| ` + "`queue`" + ` | < 5 | ≥ 5 |

| Condition | Action |
|-----------|--------|
| ` + "`probe.status == \"down\"`" + ` | ` + "`systemctl restart web`" + ` |

### Db {#db agent=db}

` + "```sh {id=ping}\necho ok\n```" + `
Expected: ` + "`ok`" + `
`

// contractd brief lists the open incident a watchdog must not report
// again, the only repair allowed, and the report's fields with their
// declared types; --stage keeps one stage, and an unknown one is named
// with the nearest.
func TestBriefListsTheOpenIncident(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "briefed.md")
	if err := os.WriteFile(path, []byte(briefContract), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	code, out, errs := runMain(t, "contractd", "brief", "--state-dir", state, path)
	if code != 0 || !strings.Contains(out, "No open incident.") {
		t.Fatalf("brief before any run: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", state, "--var", "dir="+dir, path); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runMain(t, "contractd", "brief", "--state-dir", state, "--stage", "web", path)
	if code != 0 {
		t.Fatalf("brief: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"# Briefing: stage web of contract briefed",
		"- open since ", // the incident the run opened
		"- when `probe.status == \"down\"`: `systemctl restart web` (report-only agent: logged, never run)",
		"| web | probe | `queue` | int | `< 5` | — | `≥ 5` |",
		"| web | probe | `load` | float | — | — | — |", // declared, judged by no cell
		"Recent messages",
		"### Web {#web agent=web}", // the stage as written
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("brief lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Stage db") || strings.Contains(out, "The web front end.") {
		t.Fatalf("--stage web briefs more than web:\n%s", out)
	}
	code, out, errs = runMain(t, "contractd", "brief", "--state-dir", state, "--json", path)
	if code != 0 || !strings.Contains(out, `"open_incidents": [`) || !strings.Contains(out, "The web front end.") {
		t.Fatalf("brief --json of the whole contract: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runMain(t, "contractd", "brief", "--state-dir", state, "--stage", "wbe", path)
	if code != exitUsage || !strings.Contains(errs, `no such stage "wbe"`) || !strings.Contains(errs, "web") {
		t.Fatalf("unknown stage: exit %d: %s", code, errs)
	}
}
