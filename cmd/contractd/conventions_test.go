package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/owner"
)

// heldContract has one agent whose probe is critical and whose repair
// appends to dir/repairs, behind `after: 2` (two failing runs before a
// repair), and one healthy agent; its stage and agent names are long.
func heldContract(t *testing.T, dir string) string {
	t.Helper()
	src := "---\nname: held\nruntime_contract: 2\nguards:\n  after: 2\ntargets:\n  here: {local: true}\nnotify:\n  - {log: {}}\n---\n\n## Execution\n\n" +
		"### Box {#box_with_a_long_stage_id agent=box-with-a-long-agent-name on=here}\n\n```sh {id=p}\necho down\n```\n\nExpected: `up`\n\n" +
		"| Condition | Action |\n|---|---|\n| `p.stdout != \"up\"` | `echo x >> " + filepath.Join(dir, "repairs") + "` |\n\n" +
		"### Other {#o agent=o on=here}\n\n```sh {id=q}\necho up\n```\n\nExpected: `up`\n"
	path := filepath.Join(dir, "held.md")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// --help and -h print the command's help on stdout and exit 0, for the
// tool and for every command; --version and version are the same and are
// listed. On 02630f2 --help went to stderr, `run --help` exited 2 and
// --version was an unknown command.
func TestHelpIsOnStdoutAndExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errs := runMain(t, append([]string{"contractd"}, args...)...)
		if code != 0 || errs != "" || !strings.Contains(out, "usage: contractd COMMAND") {
			t.Errorf("contractd %v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
		for _, want := range []string{"--version", "version", "maintenance", "status"} {
			if !strings.Contains(out, want) {
				t.Errorf("contractd %v does not list %s:\n%s", args, want, out)
			}
		}
	}
	for _, name := range commandNames() {
		for _, flag := range []string{"--help", "-h"} {
			code, out, errs := runMain(t, "contractd", name, flag)
			if code != 0 || errs != "" {
				t.Errorf("contractd %s %s: exit %d, stderr %q", name, flag, code, errs)
			}
			if name != "version" && !strings.HasPrefix(out, "usage: contractd "+name) {
				t.Errorf("contractd %s %s: stdout %q, want its usage", name, flag, out)
			}
			// A flag's value is named in one word (FILE, DURATION): the
			// first backquoted words of its usage, so a quoted command
			// there would become the name.
			for _, line := range strings.Split(out, "\n") {
				left, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
				if strings.HasPrefix(line, "  -") && len(strings.Fields(left)) > 2 {
					t.Errorf("contractd %s %s: the flag %q names its value in more than one word", name, flag, left)
				}
			}
		}
	}
	code, out, _ := runMain(t, "contractd", "run", "--help")
	if code != 0 || !strings.Contains(out, "--nagios") || !strings.Contains(out, "--repair") {
		t.Errorf("run --help: exit %d, no --nagios/--repair:\n%s", code, out)
	}
	code, out, errs := runMain(t, "contractd", "help", "maintenance")
	if code != 0 || !strings.Contains(out, "--for DURATION") {
		t.Errorf("help maintenance: exit %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errs := runMain(t, append([]string{"contractd"}, args...)...)
		b := buildInfo()
		if want := fmt.Sprintf("contractd %s (commit %s, built %s, %s)\n", b.Version, b.Revision, b.Date, runtime.Version()); code != 0 || out != want || errs != "" {
			t.Errorf("contractd %v: exit %d, %q %q", args, code, out, errs)
		}
	}
	// A bad flag is a usage error on stderr, never help on stdout.
	code, out, errs = runMain(t, "contractd", "status", "--no-such-flag")
	if code != 2 || out != "" || !strings.Contains(errs, "no-such-flag") || !strings.Contains(errs, "contractd status --help") {
		t.Errorf("bad flag: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// The program may have any name: a copy named contractd-linux-amd64, or
// any other name followed by one of the tool's commands, dispatches
// normally; only a name a contract declares runs that contract. On
// 02630f2 a renamed binary answered `unknown command "contractd-linux-amd64"`.
func TestAnyBinaryNameWorks(t *testing.T) {
	for _, argv0 := range []string{"/opt/bin/contractd-linux-amd64", "./contractd.new", "/usr/local/bin/cd2"} {
		code, out, errs := runMain(t, argv0, "lint", zulipHealth)
		if code != 0 || strings.Contains(errs, "unknown command") {
			t.Errorf("%s lint: exit %d\n%s%s", argv0, code, out, errs)
		}
		if code, out, _ := runMain(t, argv0, "--version"); code != 0 || !strings.HasPrefix(out, "contractd ") {
			t.Errorf("%s --version: exit %d %q", argv0, code, out)
		}
	}
	dir := t.TempDir()
	src, _ := os.ReadFile(zulipHealth)
	os.WriteFile(filepath.Join(dir, "zulip-health.md"), src, 0o644)
	// zulip-status is declared: its help is the declared command's.
	code, out, errs := runMain(t, "/usr/local/bin/zulip-status", "--dir", dir, "--help")
	if code != 0 || !strings.Contains(out, "usage: contractd zulip-status") {
		t.Errorf("declared command --help: exit %d\n%s%s", code, out, errs)
	}
}

// A contract or agent name that nothing knows is an error with the nearest
// known name; a duration without a unit says so; why with no run says the
// contract has not run. On 02630f2 `maintenance --for 2h locabox` and
// `reset nosuch` succeeded silently, `--for 90` said "parse error" and why
// printed "(<nil>)".
func TestUnknownNamesAndBadDurationsAreErrorsThatHelp(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	contract := heldContract(t, dir)
	if code, _, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", state, contract); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"maintenance", "--state-dir", state, "--for", "2h", "hled"}, `unknown contract "hled"`},
		{[]string{"maintenance", "--state-dir", state, "--for", "2h", "hled"}, `did you mean "held"?`},
		{[]string{"reset", "--state-dir", state, "nosuch"}, `unknown contract "nosuch"`},
		{[]string{"reset", "--state-dir", state, "--unit", "ohh", "held"}, `has no agent "ohh"`},
		{[]string{"maintenance", "--state-dir", state, "--agent", "box-with-a-long-agent-nme", "--for", "1h", "held"}, `did you mean "box-with-a-long-agent-name"?`},
		{[]string{"why", "--state-dir", state, "helt"}, `did you mean "held"?`},
		{[]string{"status", "--state-dir", state, "helt"}, `did you mean "held"?`},
		{[]string{"maintenance", "--state-dir", state, "--for", "90", "held"}, `"90" has no unit: write 90s, 90m or 90h`},
		{[]string{"maintenance", "--state-dir", state, "--for", "soon", "held"}, `"soon" is not a duration`},
		{[]string{"run", "--timeout", "5", contract}, `"5" has no unit`},
	} {
		code, out, errs := runMain(t, append([]string{"contractd"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("contractd %v: exit %d, stderr %q; want 2 and %q (stdout %q)", tc.args, code, errs, tc.want, out)
		}
	}
	if ledger, _ := os.ReadFile(filepath.Join(state, "hled.ledger.json")); ledger != nil {
		t.Errorf("a window was recorded for the mistyped contract")
	}
	// The right names work, and a day is a unit.
	code, out, errs := runMain(t, "contractd", "maintenance", "--state-dir", state, "--agent", "o", "--for", "1d", "held")
	if code != 0 || !strings.Contains(out, "agent o: maintenance until") {
		t.Errorf("maintenance of a known agent: exit %d\n%s%s", code, out, errs)
	}
	// A contract that has a file but never ran: why says so.
	code, _, errs = runMain(t, "contractd", "why", "--state-dir", t.TempDir(), "--dir", dir, "held")
	if code != 1 || !strings.Contains(errs, "held has not run yet") || strings.Contains(errs, "nil") {
		t.Errorf("why before any run: exit %d, %q", code, errs)
	}
	code, _, errs = runMain(t, "contractd", "lnit", zulipHealth)
	if code != 2 || !strings.Contains(errs, `did you mean "lint"?`) {
		t.Errorf("a mistyped command: exit %d, %q", code, errs)
	}
}

// The summary line never contradicts the rows: an agent that hysteresis
// holds at healthy while its step is critical is named in it, and the
// columns hold long names. On 02630f2 the line said HEALTHY beside a ✖ row
// and a long stage name pushed its row's columns out of line.
func TestTextReportSummaryAgreesWithTheRows(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", t.TempDir(), heldContract(t, dir))
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	first, _, _ := strings.Cut(out, "\n")
	if !strings.Contains(first, "HEALTHY") || !strings.Contains(first, "box-with-a-long-agent-name seen critical") {
		t.Errorf("summary line %q: want HEALTHY naming the agent seen critical", first)
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "✖") || strings.HasPrefix(line, "✔") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("stage rows %q", rows)
	}
	col := func(row, word string) int { return len([]rune(row[:strings.Index(row, word)])) }
	if a, b := col(rows[0], "critical"), col(rows[1], "healthy"); a != b {
		t.Errorf("severity columns at %d and %d:\n%s\n%s", a, b, rows[0], rows[1])
	}
}

// A contract that does not load is one UNKNOWN status line and exit 3; the
// status line's state is the worst step's (an agent hysteresis holds is
// still seen critical); a check repairs nothing unless --repair; perfdata
// follows the plugin guidelines. On 02630f2 the broken contract exited 2
// with no stdout, `after: 2` printed "OK - all agents healthy" beside a
// critical step, and a check run could repair.
func TestNagiosPluginConventions(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.md")
	os.WriteFile(broken, []byte("---\nname: broken\nruntime_contract: 2\n---\n## Execution\n### X {#x agent=x}\n```sh {id=p}\necho\n```\n| Field | Healthy |\n|---|---|\n| `stdout` | < 18OO |\n"), 0o644)
	code, out, _ := runMain(t, "contractd", "run", "--nagios", "--state-dir", t.TempDir(), broken)
	if code != 3 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "BROKEN UNKNOWN - contract does not load: "+broken+":12:") {
		t.Errorf("broken contract: exit %d, stdout %q; want 3 and one UNKNOWN line naming file:line:col", code, out)
	}
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--state-dir", t.TempDir(), filepath.Join(dir, "missing.md"))
	if code != 3 || !strings.Contains(out, " UNKNOWN - ") {
		t.Errorf("missing contract: exit %d, %q", code, out)
	}

	held := heldContract(t, dir)
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--state-dir", t.TempDir(), held)
	first, _, _ := strings.Cut(out, "\n")
	if code != 2 || !strings.HasPrefix(first, "HELD CRITICAL - box-with-a-long-agent-name critical") {
		t.Errorf("a critical step held by hysteresis: exit %d, %q; want CRITICAL naming it", code, first)
	}
	perf := regexp.MustCompile(`^[^|]+ \| (('[^']+'|[A-Za-z0-9_.]+)=[0-9.]+[a-zA-Z%]*;[0-9.:@~]*;[0-9.:@~]*;[0-9.]*;[0-9.]* ?)+$`)
	if !perf.MatchString(first) || !strings.Contains(first, "critical=1;;;0;2") {
		t.Errorf("perfdata not in the guidelines' syntax: %q", first)
	}

	state := t.TempDir()
	repairDir := t.TempDir()
	fix := repairContract(t, repairDir)
	os.WriteFile(filepath.Join(repairDir, "state"), []byte("bad\n"), 0o644)
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--state-dir", state, fix)
	if n := repairs(t, repairDir); n != 0 || code != 2 {
		t.Errorf("--nagios: %d repairs, exit %d (%q); want none and CRITICAL", n, code, out)
	}
	code, out, _ = runMain(t, "contractd", "run", "--json", "--quiet", "--nagios=false", "--verify-grace", "10ms", "--state-dir", t.TempDir(), fix)
	if n := repairs(t, repairDir); n != 1 || code != 0 {
		t.Fatalf("plain run: %d repairs, exit %d", n, code)
	}
	os.WriteFile(filepath.Join(repairDir, "state"), []byte("bad\n"), 0o644)
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--repair", "--verify-grace", "10ms", "--state-dir", t.TempDir(), fix)
	if n := repairs(t, repairDir); n != 2 || code != 0 {
		t.Errorf("--nagios --repair: %d repairs in all, exit %d (%q); want the repair to run and OK after it", n, code, out)
	}
}

// Every alert reaches the journal once: a contract's log route writes it,
// and the engine does not write its own line about it as well. On 02630f2
// each alert was logged twice.
func TestEveryAlertIsLoggedOnce(t *testing.T) {
	code, _, errs := runMain(t, "contractd", "run", "--state-dir", t.TempDir(), heldContract(t, t.TempDir()))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// held opens no incident yet (hysteresis); the repair-less second
	// contract below does.
	dir := t.TempDir()
	fix := repairContract(t, dir)
	src, _ := os.ReadFile(fix)
	src = bytes.Replace(src, []byte("targets:"), []byte("notify:\n  - {log: {}}\ntargets:"), 1)
	src = bytes.Replace(src, []byte("| `echo x"), []byte("| `exit 1; echo x"), 1)
	os.WriteFile(fix, src, 0o644)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	code, _, errs = runMain(t, "contractd", "run", "--verify-grace", "10ms", "--state-dir", t.TempDir(), fix)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	opens := 0
	for _, l := range strings.Split(errs, "\n") {
		if strings.Contains(l, `level=WARN msg="box is critical`) && strings.Contains(l, " kind=open ") {
			opens++
		}
	}
	if opens != 1 {
		t.Errorf("the open alert is in the log %d times, want once:\n%s", opens, errs)
	}
}

// No message says its prefix twice: a serve that cannot listen says
// "serve: listen …" once, in its last record. On 02630f2 it said "serve:
// serve: listen".
func TestServeErrorHasOnePrefix(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errs := runMain(t, "contractd", "serve", "--dir", t.TempDir(), "--state-dir", t.TempDir(), "--listen", ln.Addr().String(), "--socket", "none")
	if code != 1 || !strings.Contains(errs, `level=ERROR msg="daemon failed" error="serve: listen `) || strings.Contains(errs, "serve: serve:") {
		t.Errorf("exit %d, %q", code, errs)
	}
}

// `new` writes a template whose repairs are not armed: running it as
// written never runs its repair command. On 02630f2 `contractd new
// my-monitor && contractd run my-monitor.md` ran `systemctl restart
// my-agent`.
func TestNewTemplateRepairsNothingUntilArmed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.md")
	if code, out, errs := runMain(t, "contractd", "new", "-o", path, "web"); code != 0 || !strings.Contains(out, "not armed") {
		t.Fatalf("new: exit %d %s%s", code, out, errs)
	}
	// It lints with no error and no warning, --strict included; the one
	// note is the reminder that the agent is report-only.
	code, out, _ := runMain(t, "contractd", "lint", "--strict", path)
	if code != 0 || strings.Contains(out, "warning") || strings.Count(out, "note:") != 1 || !strings.Contains(out, "report-only agent my-agent") {
		t.Fatalf("lint: exit %d\n%s", code, out)
	}
	calls := filepath.Join(dir, "systemctl.calls")
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\n"), 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", t.TempDir(), path)
	if code != 0 || !strings.Contains(out, "report-only") {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("the template ran systemctl %s", b)
	}
	// Armed, it repairs.
	src, _ := os.ReadFile(path)
	os.WriteFile(path, regexp.MustCompile(`(?m)^report_only_agents: .*\n`).ReplaceAll(src, nil), 0o644)
	runMain(t, "contractd", "run", "--quiet", "--verify-grace", "10ms", "--state-dir", t.TempDir(), path)
	if b, _ := os.ReadFile(calls); string(b) != "restart my-agent\n" {
		t.Fatalf("armed: systemctl calls %q", b)
	}
}

// During a verify wait a terminal shows a line saying what is waited for.
// On 02630f2 nothing showed for the whole grace period.
func TestVerifyWaitShowsALiveLine(t *testing.T) {
	dir := t.TempDir()
	fix := repairContract(t, dir)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: os.Getenv, Environ: os.Environ, IsTerminal: func(io.Writer) bool { return true }}
	if code := m.Run(context.Background(), []string{"contractd", "run", "--verify-grace", "1500ms", "--state-dir", t.TempDir(), fix}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "⧗ box: repaired; probing it again in 2s to verify") || !strings.Contains(errb.String(), "⧗ verifying box in") {
		t.Errorf("no live line for the verify wait:\n%q", errb.String())
	}
}

// The demo runs from the installed binary alone: no go toolchain on PATH,
// no source tree in the working directory. On 02630f2 it ran `go build`.
func TestDemoRunsFromTheBinaryAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds contractd and runs the demo (about 30 s)")
	}
	bin := filepath.Join(t.TempDir(), "contractd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := owner.CommandContext(ctx, bin, "demo")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	if p, err := exec.LookPath("go"); err == nil && (strings.HasPrefix(p, "/usr/bin/") || strings.HasPrefix(p, "/bin/")) {
		t.Skipf("go is at %s: a PATH without it cannot be made here", p)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "koby (report-only) was restarted 0 times") {
		t.Fatalf("demo: %v\n%s", err, out)
	}
}

// diskContract's one step prints JSON whose used_pct its table exports.
const diskContract = "---\nname: disk\nruntime_contract: 2\ntargets:\n  here: {local: true}\n---\n\n## Execution\n\n" +
	"### Disk {#box agent=box on=here}\n\n```sh {id=df as=json fields=\"used_pct:float mount:string\"}\nprintf '{\"used_pct\": 91.5, \"mount\": \"/\"}'\n```\n\n" +
	"| Field | Healthy | Critical |\n|---|---|---|\n| `used_pct` {export=true} | < 90 | ≥ 90 |\n| `mount` | `it == \"/\"` | |\n"

// A field the author marks {export=true} is in the report's metrics and
// in the Nagios perfdata. On 02630f2 probe values such as used_pct were
// exported nowhere.
func TestExportedFieldReachesReportAndPerfdata(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.md")
	os.WriteFile(path, []byte(diskContract), 0o644)
	code, out, errs := runMain(t, "contractd", "run", "--json", "--quiet", "--state-dir", t.TempDir(), path)
	if code != 0 || !regexp.MustCompile(`"metrics": \{\s*"used_pct": 91.5\s*\}`).MatchString(out) {
		t.Fatalf("run --json: exit %d, no metrics.used_pct = 91.5:\n%s%s", code, out, errs)
	}
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--state-dir", t.TempDir(), path)
	first, _, _ := strings.Cut(out, "\n")
	if code != 2 || !strings.Contains(first, " 'box/df.used_pct'=91.5;;;;") {
		t.Fatalf("nagios: exit %d, %q", code, first)
	}
	bad := filepath.Join(t.TempDir(), "disk.md")
	os.WriteFile(bad, []byte(strings.Replace(diskContract, "{export=true}", "{exprot=true}", 1)), 0o644)
	code, out, _ = runMain(t, "contractd", "lint", bad)
	if code != 1 || !strings.Contains(out, `unknown attribute "exprot"`) || !strings.Contains(out, bad+":18:15:") {
		t.Fatalf("lint of a mistyped attribute: exit %d\n%s", code, out)
	}
}
