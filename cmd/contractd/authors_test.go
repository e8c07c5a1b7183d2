package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What new authors tripped on at the command line, each as they met it.

// TestNagiosBadFlagIsUnknown: under --nagios a bad flag is UNKNOWN (3)
// with a status line on stdout, as the plugin guidelines ask; Nagios reads
// stdout only, and 2 would be CRITICAL.
func TestNagiosBadFlagIsUnknown(t *testing.T) {
	code, out, _ := runMain(t, "contractd", "run", "--nagios", "--bogus", zulipHealth)
	if code != 3 || !strings.HasPrefix(out, "CONTRACTD UNKNOWN - bad usage: ") {
		t.Fatalf("exit %d, stdout %q; want 3 and an UNKNOWN status line", code, out)
	}
	if code, _, _ := runMain(t, "contractd", "run", "--bogus", zulipHealth); code != 2 {
		t.Fatalf("without --nagios a bad flag exits %d, want 2", code)
	}
}

// TestRunSuggestsTheNearestContractName: `run` with a mistyped contract
// name names the nearest one, as `status` does.
func TestRunSuggestsTheNearestContractName(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(zulipHealth)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "zulip-health.md"), src, 0o644)
	code, _, errs := runMain(t, "contractd", "run", "--dir", dir, "zulip-helth")
	if code != 2 || !strings.Contains(errs, `did you mean "zulip-health"?`) {
		t.Fatalf("exit %d, stderr %q; want a suggestion", code, errs)
	}
}

// TestTestCommandPrintsDiagnosticsAsLines: a test file whose contract does
// not load prints the contract's diagnostics one per line, never a literal
// \n.
func TestTestCommandPrintsDiagnosticsAsLines(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "broken.md"), []byte("---\nname: broken\nbogus: 1\n---\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.test.yaml"), []byte("runs:\n  - name: x\n    expect: {overall: healthy}\n"), 0o644)
	code, _, errs := runMain(t, "contractd", "test", filepath.Join(dir, "broken.test.yaml"))
	if code != 2 || strings.Contains(errs, `\n`) || !strings.Contains(errs, "\n  "+filepath.Join(dir, "broken.md")+":3:1: error: unknown key") {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
}

// TestRepairFlagTakesNoValue: `run --help` shows --repair as a switch.
func TestRepairFlagTakesNoValue(t *testing.T) {
	_, out, _ := runMain(t, "contractd", "run", "--help")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "--repair" && f[1] == "run" {
			t.Fatalf("run --help: %q reads as if --repair takes a value", line)
		}
	}
}

// TestDurationFlagsReadTheContractGrammar: a flag's duration reads as the
// contract format's (contracts.ParseDuration), weeks included, and a bare
// number says to add a unit.
func TestDurationFlagsReadTheContractGrammar(t *testing.T) {
	var d time.Duration
	v := durationValue{&d}
	if err := v.Set("1w"); err != nil || d != 7*24*time.Hour {
		t.Fatalf("--timeout 1w: %v, %v", d, err)
	}
	if err := v.Set("90"); err == nil || !strings.Contains(err.Error(), `"90" has no unit`) {
		t.Fatalf("--timeout 90: %v", err)
	}
}

// TestRunLogFillsVars: with `log: ${out}/run.log` every run failed to open
// "${out}/run.log" and wrote nothing; the run appends to the file the var
// names, the one --var gives included.
func TestRunLogFillsVars(t *testing.T) {
	dir := t.TempDir()
	src := "---\nname: logvar\nruntime_contract: 2\nvars: {out: " + filepath.Join(dir, "a") + "}\nlog: ${out}/run.log\n---\n\n## Execution\n\n### S {#s}\n\n```sh {id=p}\necho ok\n```\n\nExpected: `ok`\n"
	path := filepath.Join(dir, "logvar.md")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "a"), 0o755)
	os.Mkdir(filepath.Join(dir, "b"), 0o755)
	if code, out, errs := runMain(t, "contractd", "lint", "--strict", path); code != 0 {
		t.Fatalf("lint --strict: exit %d\n%s%s", code, out, errs)
	}
	for _, sub := range []string{"a", "b"} {
		args := []string{"contractd", "run", "--quiet", "--state-dir", filepath.Join(dir, "state"), path}
		if sub == "b" {
			args = append(args[:2], append([]string{"--var", "out=" + filepath.Join(dir, "b")}, args[2:]...)...)
		}
		code, out, errs := runMain(t, args...)
		if code != 0 || strings.Contains(out+errs, "log: open") {
			t.Fatalf("run: exit %d\n%s%s", code, out, errs)
		}
		b, err := os.ReadFile(filepath.Join(dir, sub, "run.log"))
		if err != nil || !strings.Contains(string(b), " logvar run ") {
			t.Fatalf("%s/run.log: %q, %v; want the run's line", sub, b, err)
		}
	}
}

// TestLintStrictPassesWithAReportOnlyAgent: the report-only warning printed
// on every command, --quiet included, and lint --strict could never pass on
// a contract with a report-only agent. A report-only agent is a deliberate
// choice: lint says it once, as a note that --strict passes; run, explain
// and the rest do not print it.
func TestLintStrictPassesWithAReportOnlyAgent(t *testing.T) {
	dir := t.TempDir()
	src := "---\nname: ro\nruntime_contract: 2\nreport_only_agents: [b, c]\nfor_each:\n  units: [{name: a}, {name: b}]\n---\n\n## Execution\n\n" +
		"### Unit {#unit agent=$name for_each=units}\n\n```sh {id=p}\necho down\n```\n\nExpected: `ok`\n\n" +
		"| Condition | Action |\n|-----------|--------|\n| `p.stdout == \"down\"` | `true` |\n\n" +
		"### C {#c agent=c}\n\n```sh {id=q}\necho down\n```\n\nExpected: `ok`\n\n" +
		"| Condition | Action |\n|-----------|--------|\n| `q.stdout == \"down\"` | `true` |\n"
	path := filepath.Join(dir, "ro.md")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMain(t, "contractd", "lint", "--strict", path)
	if code != 0 || !strings.Contains(out, path+":19:3: note: actions for report-only agent b are logged, never executed (report_only_agents)") ||
		!strings.Contains(out, path+":31:3: note: actions for report-only agent c are logged, never executed (report_only_agents)") {
		t.Fatalf("lint --strict: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, args := range [][]string{
		{"contractd", "run", "--quiet", "--state-dir", filepath.Join(dir, "state"), path},
		{"contractd", "run", "--state-dir", filepath.Join(dir, "state"), path},
		{"contractd", "explain", path},
	} {
		code, out, errs := runMain(t, args...)
		if code != 0 || strings.Contains(out+errs, "note:") || strings.Contains(errs, "never executed") {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
		}
	}
}

// TestStateCommandsTakeTheContractFile: `status`, `history` and `why`
// given the file `run` was given read that contract's state, by the name
// in its front matter, as they do given the name.
func TestStateCommandsTakeTheContractFile(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "disk-check.md")
	os.WriteFile(file, []byte("---\nname: spool\nruntime_contract: 2\n---\n\n## Execution\n\n### Spool {#spool agent=spool}\n\n"+
		"```sh {id=n}\necho 3\n```\n\n| Field | Healthy | Degraded |\n|---|---|---|\n| `stdout` | < 5 | >= 5 |\n"), 0o644)
	if code, out, errs := runMain(t, "contractd", "run", "--state-dir", state, file); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}
	for _, cmd := range []string{"status", "history", "why"} {
		code, out, errs := runMain(t, "contractd", cmd, "--state-dir", state, file)
		if code != 0 || !strings.Contains(out, "spool") || errs != "" {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want the state of spool", cmd, file, code, out, errs)
		}
	}
}
