package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repairContract writes a contract whose only agent is critical while
// dir/state holds "bad", and whose one repair appends a line to
// dir/repairs and writes "ok" to dir/state.
func repairContract(t *testing.T, dir string) string {
	t.Helper()
	src := "---\nkind: responsibility\nname: fixme\nruntime_contract: 2\nagent: box\ntargets:\n  here: {local: true}\n---\n\n## Execution\n\n" +
		"### Box {#box agent=box on=here}\n\n```bash {id=probe}\ncat " + filepath.Join(dir, "state") + "\n```\n\n" +
		"Expected: `ok`\n\n| Condition | Action |\n|---|---|\n| `probe.stdout == \"bad\"` | `echo x >> " + filepath.Join(dir, "repairs") + "; echo ok > " + filepath.Join(dir, "state") + "` |\n"
	path := filepath.Join(dir, "fixme.md")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func repairs(t *testing.T, dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "repairs"))
	return strings.Count(string(b), "x\n")
}

// A null in the ledger (what a hand edit or a bad tool leaves) is a corrupt
// ledger: the run says so, moves it aside and repairs nothing, instead of
// panicking and repairing again on every later run.
func TestRunWithANullInTheLedgerSaysSoAndRepairsNothing(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	contract := repairContract(t, dir)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	if code, out, errs := runMain(t, "contractd", "run", "--quiet", "--verify-grace", "1ms", "--state-dir", state, contract); code != 0 || repairs(t, dir) != 1 {
		t.Fatalf("first run: exit %d, %d repairs\n%s%s", code, repairs(t, dir), out, errs)
	}
	ledger := filepath.Join(state, "fixme.ledger.json")
	os.WriteFile(ledger, []byte(`{"version":1,"contract":"fixme","incidents":{"fixme/box/critical":null}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	code, out, errs := runMain(t, "contractd", "run", "--quiet", "--verify-grace", "1ms", "--state-dir", state, contract)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if n := repairs(t, dir); n != 1 {
		t.Errorf("%d repairs, want still 1: a run after a corrupt ledger repairs nothing", n)
	}
	want := `fixme.ledger.json: incidents["fixme/box/critical"]: is null: moved aside to fixme.ledger.json.corrupt-`
	if !strings.Contains(out, "ledger was corrupt and moved aside") || !strings.Contains(out, want) {
		t.Errorf("report does not say the ledger was moved aside (want %q):\n%s", want, out)
	}
	if aside, _ := filepath.Glob(ledger + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("ledger not moved aside: %v", aside)
	}
}

// A history line that is JSON but not a run record is skipped and named;
// the good runs still show, and `why` still explains the last good run.
func TestHistorySkipsALineOfTheWrongShape(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	contract := repairContract(t, dir)
	os.WriteFile(filepath.Join(dir, "state"), []byte("ok\n"), 0o644)
	for range 2 {
		if code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", state, contract); code != 0 {
			t.Fatalf("run: exit %d\n%s%s", code, out, errs)
		}
	}
	path := filepath.Join(state, "fixme.history.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"run_id":"r9","started_at":"2026-11-29T12:00:00Z","agents":["box"]}` + "\n")
	f.Close()
	for range 2 { // and again: reading never breaks for good
		code, out, errs := runMain(t, "contractd", "history", "--state-dir", state, "fixme")
		if code != 0 || strings.Count(out, "box=healthy\n") != 2 {
			t.Fatalf("history: exit %d, want both good runs:\n%s%s", code, out, errs)
		}
		if !strings.Contains(errs, "fixme.history.jsonl: skipped 1 bad line; line 3: not a run record: json: cannot unmarshal array") {
			t.Errorf("stderr does not name the bad line:\n%s", errs)
		}
	}
	code, out, errs := runMain(t, "contractd", "why", "--state-dir", state, "fixme")
	if code != 0 || !strings.Contains(out, "fixme run ") || !strings.Contains(errs, "line 3") {
		t.Errorf("why: exit %d\n%s%s", code, out, errs)
	}
}

func TestStatusSaysACorruptSnapshotWasMovedAside(t *testing.T) {
	state := t.TempDir()
	path := filepath.Join(state, "fixme.snapshot.json")
	os.WriteFile(path, []byte(`{"version":1,"contract":"fixme","written_at":"2026-11-29T12:00:00Z","data":null}`), 0o600)
	code, _, errs := runMain(t, "contractd", "status", "--state-dir", state, "fixme")
	if code != 1 || !strings.Contains(errs, "fixme.snapshot.json: data: missing or null: moved aside to fixme.snapshot.json.corrupt-") {
		t.Errorf("status: exit %d\n%s", code, errs)
	}
}

// `contractd status` with no name is one line per contract in the state
// dir, like `monit summary`: its state, agents healthy of all, the last
// run's age and the open incidents; --json gives the same as a list. On
// 02630f2 status needed a name and showed one nested snapshot.
func TestStatusSummaryListsEveryContract(t *testing.T) {
	state := t.TempDir()
	held := heldContract(t, t.TempDir())
	dir := t.TempDir()
	fix := repairContract(t, dir)
	src, _ := os.ReadFile(fix)
	os.WriteFile(fix, []byte(strings.Replace(string(src), "| `echo x", "| `exit 1; echo x", 1)), 0o644)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	for _, c := range []string{held, fix} {
		if code, _, errs := runMain(t, "contractd", "run", "--quiet", "--verify-grace", "10ms", "--state-dir", state, c); code != 0 {
			t.Fatalf("run %s: exit %d: %s", c, code, errs)
		}
	}
	code, out, errs := runMain(t, "contractd", "status", "--state-dir", state)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CONTRACT") {
		t.Fatalf("want a header and one line per contract:\n%s", out)
	}
	fixme := regexp.MustCompile(`^fixme +✖ critical +0/1 +\d+s ago +1 +box: `)
	heldRow := regexp.MustCompile(`^held +✔ healthy +2/2 +\d+s ago +0`)
	if !fixme.MatchString(lines[1]) || !heldRow.MatchString(lines[2]) {
		t.Fatalf("rows:\n%s", out)
	}
	code, out, _ = runMain(t, "contractd", "status", "--json", "--state-dir", state)
	var sums []struct {
		Contract  string `json:"contract"`
		Severity  string `json:"severity"`
		AgentsOK  int    `json:"agents_ok"`
		Total     int    `json:"agents_total"`
		Incidents []struct {
			Agent string `json:"agent"`
		} `json:"open_incidents"`
	}
	if err := json.Unmarshal([]byte(out), &sums); err != nil || code != 0 {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if len(sums) != 2 || sums[0].Contract != "fixme" || sums[0].Severity != "critical" || len(sums[0].Incidents) != 1 || sums[1].AgentsOK != 2 || sums[1].Total != 2 {
		t.Fatalf("status --json: %+v", sums)
	}
	if code, out, _ := runMain(t, "contractd", "status", "--state-dir", t.TempDir()); code != 0 || !strings.Contains(out, "no contract has state") {
		t.Fatalf("empty state dir: exit %d %q", code, out)
	}
}
