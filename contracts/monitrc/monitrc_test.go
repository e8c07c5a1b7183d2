package monitrc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/lintrun"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the import")

// strictClean fails t for every error or warning lint --strict would
// refuse c for.
func strictClean(t *testing.T, c Contract) {
	t.Helper()
	_, ds := contracts.Parse(c.Name+".md", []byte(c.Text), contracts.Options{})
	for _, d := range ds {
		if d.Severity == contracts.DiagError || d.Severity == contracts.DiagWarning {
			t.Errorf("%s does not lint clean under --strict: %s\n%s", c.Name, d, numbered(c.Text))
		}
	}
}

// fleetClean fails t for every diagnostic lint gives the contracts of
// res read together, as `contractd lint --strict DIR` reads the
// directory the import wrote: each depends_on names a contract beside it,
// and no dependency goes round in a loop.
func fleetClean(t *testing.T, res *Result) {
	t.Helper()
	var cs []*contracts.Contract
	for _, rc := range res.Contracts {
		c, ds := contracts.Parse(rc.Name+".md", []byte(rc.Text), contracts.Options{})
		if ds.HasErrors() {
			t.Fatalf("%s: %v", rc.Name, ds)
		}
		cs = append(cs, c)
	}
	for _, d := range contracts.CheckFleet(cs) {
		t.Errorf("the contracts of one import do not lint clean together: %s", d)
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}

// render is an import as the golden file holds it: every contract, then
// every note.
func render(res *Result) string {
	var b strings.Builder
	for _, c := range res.Contracts {
		fmt.Fprintf(&b, "===== %s.md (check %s at %s)\n%s\n", c.Name, c.Service, c.Pos, c.Text)
	}
	b.WriteString("===== notes\n")
	for _, n := range res.Notes {
		b.WriteString(n.String() + "\n")
	}
	for _, d := range res.Dropped {
		b.WriteString("not needed: " + d + "\n")
	}
	return b.String()
}

// TestEveryKindOfCheckMatchesItsGolden imports a monitrc with a check of
// every kind Monit has, in the forms its manual shows (multi-line tests,
// noise words, includes of nothing, every N cycles, mode passive, exec
// with repeat, mail-format), holds each contract to lint --strict and the
// whole import to its golden text.
func TestEveryKindOfCheckMatchesItsGolden(t *testing.T) {
	for _, name := range []string{"many", "agent"} {
		t.Run(name, func(t *testing.T) {
			res, err := Import([]string{"testdata/" + name + ".monitrc"}, Options{Hostname: "web1"})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Contracts {
				strictClean(t, c)
			}
			fleetClean(t, res)
			got := render(res)
			golden := "testdata/" + name + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./contracts/monitrc -run TestEveryKindOfCheck -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("the import of %s.monitrc differs from %s (-update rewrites it; read the diff):\n%s", name, golden, firstDiff(string(want), got))
			}
		})
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, w, g)
		}
	}
	return ""
}

// debianInputs are Debian's monit package files: its monitrc, and each
// snippet in conf-available read after it (as conf-enabled would include
// it).
func debianInputs(t *testing.T) []string {
	t.Helper()
	snippets, _ := filepath.Glob("/etc/monit/conf-available/*")
	if _, err := os.Stat("/etc/monit/monitrc"); err != nil || len(snippets) == 0 {
		need.Missing(t, "monit", errors.New("no /etc/monit/monitrc and conf-available (apt-get install monit)"))
	}
	return snippets
}

// listedNotes are the constructs the import lists as not translated (or
// only in part); a note of any other kind on Debian's files is a gap.
var listedNotes = []string{
	"in the files imported, so this dependency is not translated", // depends on a check of another file
	"is translated as",                      // N times within M cycles
	"is checked as a TCP connection only",   // protocols without a greeting
	"unix socket tests are not translated",  // unixsocket
	"UDP tests are not translated",          // type udp
	"alerted after",                         // for N cycles on alerted tests of differing N
	"file content tests are not translated", // content, ignore content
}

// reDepend finds the names of Monit's `depend [on] A, B` statements.
var reDepend = regexp.MustCompile(`(?m)^\s*depends?\s+(?:on\s+)?(.+?)\s*$`)

// TestDebianFilesImportWithOnlyListedNotes imports /etc/monit/monitrc with
// every snippet of conf-available: each check entry is a contract that
// lints clean under --strict, the contracts of one snippet lint clean
// together, every `depend on` of the snippet is an entry of depends_on
// (38 of these were notes before the import wrote depends_on, of 45 notes
// in all), and every note is of a kind the import lists as not
// translated.
func TestDebianFilesImportWithOnlyListedNotes(t *testing.T) {
	snippets := debianInputs(t)
	notes := 0
	t.Cleanup(func() { t.Logf("%d snippets, %d notes in all", len(snippets), notes) })
	for _, snippet := range snippets {
		t.Run(filepath.Base(snippet), func(t *testing.T) {
			res, err := Import([]string{"/etc/monit/monitrc", snippet}, Options{Hostname: "web1"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Contracts) == 0 {
				t.Fatalf("no contract from %s", snippet)
			}
			written := 0
			for _, c := range res.Contracts {
				strictClean(t, c)
				if !strings.Contains(c.Text, "schedule: {every: 2m, on_start: true}") {
					t.Errorf("%s: set daemon 120 of /etc/monit/monitrc is not its schedule", c.Name)
				}
				if m := regexp.MustCompile(`(?m)^depends_on: \[(.*)\]`).FindStringSubmatch(c.Text); m != nil {
					written += len(strings.Split(m[1], ","))
				}
			}
			fleetClean(t, res)
			src, err := os.ReadFile(snippet)
			if err != nil {
				t.Fatal(err)
			}
			depends := 0
			for _, m := range reDepend.FindAllStringSubmatch(string(src), -1) {
				depends += len(strings.Split(m[1], ","))
			}
			if written != depends {
				t.Errorf("%s names %d dependencies; the contracts' depends_on %d", snippet, depends, written)
			}
			notes += len(res.Notes)
			for _, n := range res.Notes {
				listed := false
				for _, l := range listedNotes {
					listed = listed || strings.Contains(n.Todo, l)
				}
				if !listed {
					t.Errorf("a note of a kind the import does not list as unsupported: %s", n)
				}
			}
		})
	}
}

// monitAccepts runs the real Monit's syntax check on a copy of file with
// the mode Monit requires (0600), with HOME in a temporary directory (it
// stores its id there). Monit also checks the machine: a program, user or
// group its file names must exist here. Those complaints are returned
// apart; any other is a failure.
func monitAccepts(t *testing.T, file string) (machine []string) {
	t.Helper()
	out, err := monitCheck(t, file)
	if err == nil && strings.Contains(string(out), "Control file syntax OK") {
		return nil
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.Contains(line, "Requested group not found on the system"), strings.Contains(line, "Requested user not found"),
			strings.Contains(line, "is not regular file"), strings.Contains(line, "Cannot compute a checksum"),
			strings.Contains(line, "Program does not exist"):
			machine = append(machine, line)
		case strings.Contains(line, "New Monit id"), strings.Contains(line, "Stored in"):
		default:
			t.Errorf("monit -t refuses %s: %s", file, line)
		}
	}
	if len(machine) == 0 {
		t.Errorf("monit -t on %s: %v\n%s", file, err, out)
	}
	return machine
}

// monitCheck runs `monit -t -c` on a copy of file with the mode Monit
// requires (0600), with HOME in a temporary directory (it stores its id
// there), and returns what it says.
func monitCheck(t *testing.T, file string) ([]byte, error) {
	t.Helper()
	monit := need.Command(t, "monit", "monit")
	dir := t.TempDir()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(cp, src, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := owner.CommandContext(ctx, monit, "-t", "-c", cp)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	return cmd.CombinedOutput()
}

// TestMonitAcceptsTheInputs: the real Monit (`monit -t -c FILE`, mode
// 0600) accepts every monitrc the import is held to, so they are Monit's
// grammar and not the import's idea of it. Debian's snippets name
// programs, files and a group this machine may lack (cron's crontab group,
// /etc/init.d scripts); those complaints are about the machine and are
// logged, never a syntax error.
func TestMonitAcceptsTheInputs(t *testing.T) {
	files := []string{"testdata/many.monitrc", "testdata/agent.monitrc", "/etc/monit/monitrc"}
	files = append(files, debianInputs(t)...)
	for _, f := range files {
		if machine := monitAccepts(t, f); len(machine) > 0 {
			t.Logf("%s: monit -t names what this machine lacks, not a syntax error: %s", f, strings.Join(machine, "; "))
		}
	}
	// The check is not a rubber stamp: Monit refuses a file with an
	// unknown statement.
	bad := filepath.Join(t.TempDir(), "bad.monitrc")
	if err := os.WriteFile(bad, []byte("check process x with pidfile /run/x.pid\n  if cpu usage > 95% hen alert\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(need.Command(t, "monit", "monit"), "-t", "-c", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "syntax error") {
		t.Fatalf("monit -t accepted a syntax error: %v\n%s", err, out)
	}
}

// TestWhatIsNotUnderstoodIsANoteAtItsLine: a statement the import does not
// know is a note with its FILE:LINE and the rest of the file still
// translates; a quote never closed is an error with its line and column.
func TestWhatIsNotUnderstoodIsANoteAtItsLine(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "monitrc")
	src := "set daemon 30\n" +
		"set frobnicate all the things\n" +
		"check process web with pidfile /run/web.pid\n" +
		"  start program = \"/usr/bin/systemctl start web\"\n" +
		"  if failed port 8080 then restart\n" +
		"  if 2 restarts within 3 cycles then exec \"/usr/local/bin/page-me\"\n" +
		"  depends on db\n" +
		"  if failed port 8081 retry 3 then alert\n"
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Import([]string{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contracts) != 1 {
		t.Fatalf("want the web contract, got %d", len(res.Contracts))
	}
	strictClean(t, res.Contracts[0])
	want := map[string]string{
		f + ":2": "set frobnicate all the things",
		f + ":6": "if 2 restarts within 3 cycles then exec",
		f + ":7": "depends on db",
		f + ":8": "if failed port 8081 retry 3", // tries within a cycle: not translated
	}
	for _, n := range res.Notes {
		if w, ok := want[n.Pos]; ok && strings.HasPrefix(n.Construct, w) {
			delete(want, n.Pos)
		}
	}
	if len(want) > 0 {
		t.Errorf("no note for %v; notes: %v", want, res.Notes)
	}
	for pos := range map[string]bool{f + ":6": true, f + ":7": true} {
		if !strings.Contains(res.Contracts[0].Text, "`"+pos+"`") {
			t.Errorf("the contract's own notes do not name %s:\n%s", pos, res.Contracts[0].Text)
		}
	}

	if err := os.WriteFile(f, []byte("set daemon 30\ncheck process web with pidfile \"/run/web.pid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Import([]string{f}, Options{})
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 2 || se.Col != 32 {
		t.Fatalf("an unclosed quote: want a SyntaxError at 2:32, got %v", err)
	}
	if !strings.Contains(err.Error(), f+":2:32: string opened with \" is never closed") {
		t.Fatalf("error text: %v", err)
	}
}

// TestProgramsRunAsMonitRunsThem: Monit splits a program on white space
// and quotes and runs it with no shell; the repair runs the same words,
// each quoted where sh would read it otherwise, behind runuser for `as
// uid`.
func TestProgramsRunAsMonitRunsThem(t *testing.T) {
	cases := []struct {
		name string
		m    method
		want string
	}{
		{"plain", method{raw: "/etc/init.d/nginx start"}, "/etc/init.d/nginx start"},
		{"sh -c keeps its script one word", method{raw: `/bin/sh -c 'kill -s TERM $(cat /run/x.pid)'`},
			`/bin/sh -c 'kill -s TERM $(cat /run/x.pid)'`},
		{"a word sh would expand is quoted", method{raw: `/usr/bin/logger "a;b" *`}, `/usr/bin/logger 'a;b' '*'`},
		{"as uid and gid", method{raw: "/opt/app/start", uid: "app", gid: "staff"}, "runuser -u app -g staff -- /opt/app/start"},
		{"numeric ids", method{raw: "/opt/app/start", uid: "99"}, "setpriv --reuid=99 --regid=99 --clear-groups -- /opt/app/start"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{s: &service{name: "x"}}
			c.m.argv = splitProgram(c.m.raw)
			if got := b.command(&c.m); got != c.want {
				t.Fatalf("command(%q) = %q, want %q", c.m.raw, got, c.want)
			}
			if len(b.notes) > 0 {
				t.Fatalf("notes: %v", b.notes)
			}
		})
	}
	out, err := exec.Command("sh", "-c", "printf '[%s]' "+(&builder{s: &service{}}).command(&method{argv: splitProgram(`a "b c" 'd;e' f`)})[2:]).Output()
	if err != nil || string(out) != "[b c][d;e][f]" {
		t.Fatalf("sh reads the rendered words as %q (%v), want [b c][d;e][f]", out, err)
	}
}

// TestChangedChecksumIsToldOnce runs an imported `if changed checksum then
// alert` for real on a file this test writes: healthy while it stays as
// it is, critical on the run that sees it changed, healthy again on the
// next (the new checksum is the one to compare with), as Monit alerts once
// per change.
func TestChangedChecksumIsToldOnce(t *testing.T) {
	dir := t.TempDir()
	watched := filepath.Join(dir, "app.conf")
	if err := os.WriteFile(watched, []byte("a=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(dir, "monitrc")
	src := fmt.Sprintf("set daemon 60\ncheck file app_conf with path %s\n  if changed checksum then alert\n  if failed permission 644 then alert\n", watched)
	if err := os.WriteFile(rc, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Import([]string{rc}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	strictClean(t, res.Contracts[0])
	c, ds := contracts.Parse("app_conf.md", []byte(res.Contracts[0].Text), contracts.Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	state := filepath.Join(dir, "state")
	run := func(step string) contracts.Severity {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := lintrun.Run(ctx, c, lintrun.Options{StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.ConfigErrors) > 0 {
			t.Fatalf("%s: %v", step, r.ConfigErrors)
		}
		return r.Report.OverallSeverity
	}
	for i, want := range []contracts.Severity{contracts.SeverityHealthy, contracts.SeverityHealthy} {
		if got := run("unchanged"); got != want {
			t.Fatalf("run %d on an unchanged file: %s, want %s", i+1, got, want)
		}
	}
	if err := os.WriteFile(watched, []byte("a=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("changed"); got != contracts.SeverityCritical {
		t.Fatalf("the run that sees the change: %s, want critical", got)
	}
	if got := run("after"); got != contracts.SeverityHealthy {
		t.Fatalf("the run after the change: %s, want healthy (told once)", got)
	}
	if err := os.Chmod(watched, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := run("chmod"); got != contracts.SeverityCritical {
		t.Fatalf("mode 600 where Monit wants 644: %s, want critical", got)
	}
}

// TestProbeScriptsReadThisMachine runs the translated system, filesystem
// and process-resource steps on this machine: each prints JSON with every
// declared field, so no stage is unknown, and the process the test starts
// is judged by its pidfile.
func TestProbeScriptsReadThisMachine(t *testing.T) {
	dir := t.TempDir()
	sleeper := owner.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(dir, "sleep.pid")
	if err := os.WriteFile(pidfile, []byte(fmt.Sprintf("%d\n", sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(dir, "monitrc")
	src := fmt.Sprintf(`set daemon 30
check system $HOST
  if loadavg (1min) > 10000 then alert
  if cpu usage > 101%% then alert
  if memory usage > 101%% then alert
  if swap usage > 101%% then alert
check filesystem tmp with path %s
  if space usage > 101%% then alert
  if inode usage > 101%% then alert
check process sleeper with pidfile %s
  if cpu > 95%% for 3 cycles then alert
  if total memory > 100 GB then alert
  if children > 100 then alert
  if uptime < 1 seconds then alert
check process gone with pidfile %s
check program truth with path "/bin/true"
  if status != 0 then alert
`, dir, pidfile, filepath.Join(dir, "none.pid"))
	if err := os.WriteFile(rc, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Import([]string{rc}, Options{Hostname: "here"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]contracts.Severity{"here": contracts.SeverityHealthy, "tmp": contracts.SeverityHealthy,
		"sleeper": contracts.SeverityHealthy, "gone": contracts.SeverityCritical, "truth": contracts.SeverityHealthy}
	for _, rc := range res.Contracts {
		strictClean(t, rc)
		c, ds := contracts.Parse(rc.Name+".md", []byte(rc.Text), contracts.Options{})
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r, err := lintrun.Run(ctx, c, lintrun.Options{StateDir: filepath.Join(dir, "state")})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.ConfigErrors) > 0 {
			t.Fatalf("%s: %v", rc.Name, r.ConfigErrors)
		}
		if got := r.Report.OverallSeverity; got != want[rc.Name] {
			t.Errorf("%s: %s, want %s:\n%s", rc.Name, got, want[rc.Name], strings.Join(lintrun.Unhealthy(r.Report), "\n"))
		}
		delete(want, rc.Name)
	}
	if len(want) > 0 {
		t.Errorf("no contract for %v", want)
	}
}

// badValue is a monitrc with one value the import must refuse, where it
// is (LINE:COL of the value's token), what the error says, and whether
// the real Monit's syntax check lets it through.
type badValue struct {
	name, src, at, msg string
	monitAccepts       bool
}

// refused imports c.src and wants exactly one error, at c.at, saying
// c.msg, and no contract; the real Monit (`monit -t`) says what c says
// of the same file.
func refused(t *testing.T, c badValue) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "monitrc")
	if err := os.WriteFile(f, []byte(c.src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, merr := monitCheck(t, f)
	if accepted := merr == nil && strings.Contains(string(out), "Control file syntax OK"); accepted != c.monitAccepts {
		t.Errorf("monit -t accepts the file: %v, the case says %v:\n%s", accepted, c.monitAccepts, out)
	}
	res, err := Import([]string{f}, Options{})
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("the import took it (err %v); it wrote:\n%s", err, render(res))
	}
	if res != nil {
		t.Fatalf("an import with an error returned contracts: %v", res.Contracts)
	}
	want := f + ":" + c.at + ": " + c.msg
	if err.Error() != want {
		t.Fatalf("error:\n got %s\nwant %s", err, want)
	}
}

// TestAPortThatIsNoPortIsAnErrorAtItsToken: a port that is not a number
// from 1 to 65535 is an error at the port's FILE:LINE:COL and nothing is
// translated. Before, `port abc` and `port 0` became port 80 (the
// default of protocol http) and `port 184810` was written into the
// contract, which lint then refused. Monit's own syntax check lets the
// numbers out of range through, so only the import can say it.
func TestAPortThatIsNoPortIsAnErrorAtItsToken(t *testing.T) {
	web := "set daemon 30\ncheck process web with pidfile /run/web.pid\n  start program = \"/bin/true\"\n" +
		"  if failed port %s protocol http then restart\ncheck process db with pidfile /run/db.pid\n"
	for _, c := range []badValue{
		{"out of range", fmt.Sprintf(web, "184810"), "4:18", "port 184810 is not a port: a port is a number from 1 to 65535", true},
		{"zero", fmt.Sprintf(web, "0"), "4:18", "port 0 is not a port: a port is a number from 1 to 65535", true},
		{"one past the last", fmt.Sprintf(web, "65536"), "4:18", "port 65536 is not a port: a port is a number from 1 to 65535", true},
		{"a word", fmt.Sprintf(web, "http"), "4:18", `port "http" is not a port: a port is a number from 1 to 65535`, false},
		{"negative", fmt.Sprintf(web, "-1"), "4:18", `port "-1" is not a port: a port is a number from 1 to 65535`, false},
		{"the mail server's", "set mailserver localhost port 99999\ncheck process db with pidfile /run/db.pid\n", "1:31",
			"port 99999 is not a port: a port is a number from 1 to 65535", true},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c) })
	}
	// The last port there is, and a port on the host of a host check, are
	// ports.
	f := filepath.Join(t.TempDir(), "monitrc")
	src := fmt.Sprintf(web, "65535") + "check host gw with address 192.0.2.1\n  if failed port 1 then alert\n"
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Import([]string{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Contracts {
		strictClean(t, c)
	}
	if !strings.Contains(res.Contracts[0].Text, "GET http://localhost:65535/") || !strings.Contains(res.Contracts[2].Text, "192.0.2.1:1") {
		t.Fatalf("ports 65535 and 1 are not the ones probed:\n%s", render(res))
	}
}

// TestEveryNumberTheImportReadsIsChecked: each number the import reads
// (counts, timeouts, status codes, reminders, cycles) is a number or an
// error at its token, never a default put silently in its place; a zero
// where zero would have meant the default (or a contract lint refuses,
// blamed on the import) is refused too. Monit refuses the words and the
// zero cycles; the zero timeouts and counts it takes.
func TestEveryNumberTheImportReadsIsChecked(t *testing.T) {
	const proc = "check process web with pidfile /run/web.pid\n"
	const host = "check host gw with address 192.0.2.1\n"
	for _, c := range []badValue{
		{"set daemon", "set daemon ten\n" + proc, "1:12", `set daemon needs a number, not "ten"`, false},
		{"start delay", "set daemon 30 with start delay soon\n" + proc, "1:32", `start delay needs a number, not "soon"`, false},
		{"program timeout", proc + "  start program = \"/bin/true\" with timeout abc seconds\n", "2:44", `timeout needs a number, not "abc"`, false},
		{"program timeout zero", proc + "  start program = \"/bin/true\" with timeout 0 seconds\n", "2:44", "timeout 0: it must be 1 or more", true},
		{"check program timeout", "check program p with path /bin/true with timeout long\n", "1:50", `timeout needs a number, not "long"`, false},
		{"exec repeat", proc + "  if failed port 80 then exec \"/bin/true\" repeat every x cycles\n", "2:56", `repeat every needs a number, not "x"`, false},
		{"connection timeout", host + "  if failed port 22 with timeout soon then alert\n", "2:34", `timeout needs a number, not "soon"`, false},
		{"connection timeout zero", host + "  if failed port 22 with timeout 0 seconds then alert\n", "2:34", "timeout 0: it must be 1 or more", true},
		{"http status", host + "  if failed port 80 protocol http status = ok then alert\n", "2:44", `status needs a number (an HTTP status such as 200), not "ok"`, false},
		{"response time", host + "  if failed port 80 protocol http responsetime > fast then alert\n", "2:50", `responsetime needs a number (of milliseconds, or with its unit), not "fast"`, false},
		{"ping count", host + "  if failed ping count many then alert\n", "2:24", `ping count needs a number, not "many"`, false},
		{"ping count zero", host + "  if failed ping count 0 then alert\n", "2:24", "ping count 0: it must be 1 or more", true},
		{"ping timeout", host + "  if failed ping timeout x then alert\n", "2:26", `timeout needs a number, not "x"`, false},
		{"mail server timeout", "set mailserver localhost with timeout t seconds\n" + proc, "1:39", `timeout needs a number, not "t"`, false},
		{"reminder", "set alert ops@example.com with reminder on often cycles\n" + proc, "1:44", `reminder needs a number, not "often"`, false},
		{"limits", "set limits { programTimeout: ever }\n" + proc, "1:30", `programTimeout needs a number of 1 or more, not "ever"`, false},
		{"for 0 cycles", proc + "  if failed port 80 for 0 cycles then alert\n", "2:25", "for 0 cycles: the count must be 1 or more", false},
		{"0 restarts", proc + "  if 0 restarts within 5 cycles then unmonitor\n", "2:6", "0 restarts: the count must be 1 or more", false},
		{"restarts within 0 cycles", proc + "  if 2 restarts within 0 cycles then alert\n", "2:24", "within 0 cycles: the count must be 1 or more", false},
		{"more times than cycles", proc + "  if failed port 80 for 3 times within 2 cycles then alert\n", "2:25",
			"3 times within 2 cycles: a test cannot fail more times than there are cycles", false},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c) })
	}

	// Every error of a file is named in one run, in file order.
	f := filepath.Join(t.TempDir(), "monitrc")
	src := "set daemon 30\n" + host + "  if failed port 70000 then alert\n  if failed ping count x then alert\n" +
		"set mailserver localhost port 0\n"
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Import([]string{f}, Options{})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 3 || errs[0].Line != 3 || errs[1].Line != 4 || errs[2].Line != 5 {
		t.Fatalf("want the three errors of lines 3, 4 and 5 in order, got %v", err)
	}
}

// TestDependsOnNamesTheContractsOfTheSameImport: Monit's `depends on A, B`
// becomes depends_on naming the contracts the same import writes for A
// and B (a quoted name with a space is the contract db-server; Monit's
// names are case-insensitive; a check written later is found; a name
// listed twice is listed once), the contracts lint clean together, and
// the contract says so in its prose. A check of a file not imported is a
// note at its line; imported with that file, it is translated.
func TestDependsOnNamesTheContractsOfTheSameImport(t *testing.T) {
	dir := t.TempDir()
	main := "set daemon 30\n" +
		"check process web with pidfile /run/web.pid\n" +
		"  start program = \"/bin/true\"\n" +
		"  depends on \"db server\", cache\n" +
		"  depends on Cache\n" +
		"  depends on later\n" +
		"check process \"db server\" with pidfile /run/db.pid\n" +
		"  depends on disk\n" +
		"check process cache matching \"memcached\"\n" +
		"check filesystem disk with path /\n" +
		"check file later with path /etc/hostname\n"
	api := "check process api with pidfile /run/api.pid\n  depends on web\n"
	for name, text := range map[string]string{"main.monitrc": main, "api.monitrc": api, "both.monitrc": main + api} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if machine := monitAccepts(t, filepath.Join(dir, "both.monitrc")); len(machine) > 0 {
		t.Logf("monit -t names what this machine lacks: %v", machine)
	}

	res, err := Import([]string{"main.monitrc", "api.monitrc"}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Contracts {
		strictClean(t, c)
	}
	fleetClean(t, res)
	want := map[string]string{
		"web":       "depends_on: [db-server, cache, later]   # depends on db server, cache, later\n",
		"db-server": "depends_on: [disk]   # depends on disk\n",
		"api":       "depends_on: [web]   # depends on web\n",
	}
	for _, c := range res.Contracts {
		line, ok := want[c.Name]
		if !ok {
			if strings.Contains(c.Text, "depends_on:") {
				t.Errorf("%s depends on nothing, yet:\n%s", c.Name, c.Text)
			}
			continue
		}
		if !strings.Contains(c.Text, "\n"+line) {
			t.Errorf("%s lacks %q:\n%s", c.Name, line, c.Text)
		}
		delete(want, c.Name)
	}
	if len(want) > 0 {
		t.Errorf("no contract for %v", want)
	}
	if !strings.Contains(res.Contracts[0].Text, "It depends on `db server`, `cache`, `later` (`depends on` at main.monitrc:4–6): "+
		"while one of them fails, a failure of this one is suppressed") {
		t.Errorf("the prose does not say what the dependencies do:\n%s", res.Contracts[0].Text)
	}
	for _, n := range res.Notes {
		if strings.Contains(n.Construct, "depend") {
			t.Errorf("a dependency of the files imported is a note: %s", n)
		}
	}

	// The snippet alone: web is in a file not imported.
	res, err = Import([]string{"api.monitrc"}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	strictClean(t, res.Contracts[0])
	fleetClean(t, res)
	if len(res.Notes) != 1 || res.Notes[0].Pos != "api.monitrc:2" ||
		!strings.Contains(res.Notes[0].Todo, "no check web in the files imported, so this dependency is not translated") {
		t.Fatalf("want one note at api.monitrc:2 that web is not among the files, got %v", res.Notes)
	}
	if strings.Contains(res.Contracts[0].Text, "depends_on:") || !strings.Contains(res.Contracts[0].Text, "`api.monitrc:2`") {
		t.Fatalf("the contract names a contract not written, or not its note:\n%s", res.Contracts[0].Text)
	}
}

// TestADependencyLoopIsAnErrorOfTheImport: checks that depend on each
// other in a loop (or one on itself) would each wait for the other, so
// neither would be judged on its own. Monit refuses the file ("Found a
// depend loop") and lint would refuse the contracts; the import says
// where the loop closes, at the `depends on` of the first check on it,
// and writes nothing.
func TestADependencyLoopIsAnErrorOfTheImport(t *testing.T) {
	const checks = "set daemon 30\n" +
		"check file a with path /etc/hostname\n  depends on b\n" +
		"check file b with path /etc/hostname\n  depends on c\n" +
		"check file c with path /etc/hostname\n  depends on %s\n" +
		"check file d with path /etc/hostname\n"
	for _, c := range []badValue{
		{"a loop of three", fmt.Sprintf(checks, "A"), "3:14", "depends on b: a dependency loop, a → b → c → a: each check would wait for the other, " +
			"so neither would be judged on its own (Monit refuses it too: \"Found a depend loop\"); remove one of these depends", false},
		{"a check on itself", fmt.Sprintf(checks, "c"), "7:14", "depends on c: c depends on itself, so it would wait for itself and never be judged " +
			"(Monit refuses it too: \"Found a depend loop\"); remove this depends", false},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c) })
	}
}

// TestAMisspeltKeywordGetsADidYouMean: a statement word Monit does not
// know (and `monit -t` refuses) is a note at its line that names the word
// it is likely a typo of, as a misspelt test word's note does; the rest
// of the file still translates. A word near none gets no guess.
func TestAMisspeltKeywordGetsADidYouMean(t *testing.T) {
	// (Monit's own check lets words after a start program through, so
	// the misspellings stand before it.)
	const web = "set daemon 30\ncheck process web with pidfile /run/web.pid\n"
	const start = "  start program = \"/bin/true\"\n"
	for _, c := range []struct{ name, src, pos, hint string }{
		{"a statement of a check", web + "  strat program = \"/bin/true\"\n", ":3", `did you mean "start"?`},
		{"group", web + "  grup www\n" + start, ":3", `did you mean "group"?`},
		{"if", web + "  iff failed port 80 then restart\n" + start, ":3", `did you mean "if"?`},
		{"a setting", "set deamon 30\n" + web[len("set daemon 30\n"):] + start, ":1", `did you mean "daemon"?`},
		{"a kind of check", web + start + "check proces db with pidfile /run/db.pid\n", ":4", `did you mean "process"?`},
		{"a test word", web + "  if faild port 80 then restart\n" + start, ":3", `did you mean "failed"?`},
		{"near nothing", web + "  frobnicate the widgets\n" + start, ":3", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "monitrc")
			if err := os.WriteFile(f, []byte(c.src), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := monitCheck(t, f); err == nil || !strings.Contains(string(out), "syntax error") {
				t.Fatalf("monit -t takes the misspelling: %v\n%s", err, out)
			}
			res, err := Import([]string{f}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Contracts) == 0 || res.Contracts[0].Name != "web" {
				t.Fatalf("web is not translated: %v", res.Contracts)
			}
			var at []Note
			for _, n := range res.Notes {
				if n.Pos == f+c.pos {
					at = append(at, n)
				}
			}
			if len(at) != 1 {
				t.Fatalf("want one note at %s, got %v", c.pos, res.Notes)
			}
			if c.hint == "" {
				if strings.Contains(at[0].Todo, "did you mean") {
					t.Fatalf("a guess for a word near none: %s", at[0])
				}
				return
			}
			if !strings.HasPrefix(at[0].Todo, c.hint+" (monit -t refuses what Monit does not read); ") {
				t.Fatalf("the note does not begin with %q: %s", c.hint, at[0])
			}
		})
	}
	// A word spelt right that the import does not translate where it
	// stands (loadavg is a test of check system, Monit takes it here) is
	// not told to mean itself.
	f := filepath.Join(t.TempDir(), "monitrc")
	if err := os.WriteFile(f, []byte(web+"  if loadavg > 5 then alert\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Import([]string{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) != 1 || strings.Contains(res.Notes[0].Todo, "did you mean") {
		t.Fatalf("want one note with no guess, got %v", res.Notes)
	}
}

// TestAnAddressOrRequestNoProbeTakesIsAnError: a host that is not a host
// name or an IP address, or a request path with a space, is an error of
// the import at its token, where before it went into the contract, lint
// refused it and the import blamed itself. Monit's syntax check takes
// them.
func TestAnAddressOrRequestNoProbeTakesIsAnError(t *testing.T) {
	for _, c := range []badValue{
		{"a host check's address", "set daemon 30\ncheck host h with address \"bad host\"\n  if failed port 80 then alert\n", "2:27",
			`address "bad host" is not a host name or an IP address`, true},
		{"a test's host", "set daemon 30\ncheck process p with pidfile /run/p.pid\n  if failed host \"a b\" port 80 then alert\n", "3:18",
			`host "a b" is not a host name or an IP address`, true},
		{"a request", "set daemon 30\ncheck host h with address 10.0.0.1\n  if failed port 80 protocol http request \"/a b\" then alert\n", "3:43",
			`request "/a b" is not a request path: it holds a space or a control character (write a space as %20)`, true},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, c) })
	}
}
