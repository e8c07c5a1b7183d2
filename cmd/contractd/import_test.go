package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
)

// agentMonitrc is the monitrc of an HTTP agent as an operator writes it
// for Monit: a process with a pidfile, started by a script and stopped by
// its pid, restarted when its /health stops answering, and given up on
// after 3 restarts within 5 cycles. DIR, PORT are filled by the test.
const agentMonitrc = `set daemon 20

check process web-agent with pidfile DIR/agent.pid
  start program = "/bin/sh DIR/start.sh" with timeout 10 seconds
  stop program  = "/bin/sh -c 'kill -KILL $(cat DIR/agent.pid)'"
  if failed host 127.0.0.1 port PORT protocol http
     request "/health"
     with timeout 2 seconds
  then restart
  if 3 restarts within 5 cycles then unmonitor
`

// agentStart starts the agent (busybox httpd serving DIR/www) in a
// session of its own, writes its pid, counts the starts, and ties it to
// the test: a watcher kills it once the test's process is gone.
const agentStart = `echo start >> DIR/starts
setsid BUSYBOX httpd -f -p 127.0.0.1:PORT -h DIR/www </dev/null >/dev/null 2>&1 &
echo $! > DIR/agent.pid
setsid /bin/sh -c 'while kill -0 OWNER 2>/dev/null; do sleep 1; done; kill -KILL $(cat DIR/agent.pid)' </dev/null >/dev/null 2>&1 &
`

// TestImportedMonitContractRestartsAWedgedAgentWithinItsLimit imports a
// Monit HTTP-agent monitrc with the real binary, lints it, and runs it
// against the real agent (busybox httpd with a pidfile): wedged with
// SIGSTOP, it is restarted once and answers again; wedged each time again,
// it is restarted until the imported `3 restarts within 5 cycles`, and the
// fourth time the crash-loop guard refuses the restart and pages instead.
func TestImportedMonitContractRestartsAWedgedAgentWithinItsLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("four runs with a 20s verify grace each")
	}
	busybox := need.Busybox(t)
	bin := binary(t)
	dir := t.TempDir()
	port := freePort(t)
	fill := func(s string) string {
		return strings.NewReplacer("DIR", dir, "PORT", strconv.Itoa(port), "BUSYBOX", busybox, "OWNER", strconv.Itoa(os.Getpid())).Replace(s)
	}
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"www/health": "ok\n", "start.sh": fill(agentStart), "agent.monitrc": fill(agentMonitrc)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, pid := range owner.Marked(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	rc := filepath.Join(dir, "agent.monitrc")
	monit := need.Command(t, "monit", "monit")
	cmd := exec.Command(monit, "-t", "-c", rc)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Control file syntax OK") {
		t.Fatalf("monit -t refuses the test's monitrc: %v\n%s", err, out)
	}

	out := filepath.Join(dir, "contracts")
	res := runBin(t, bin, "import", "monitrc", "--out", out, rc)
	if res.code != 0 || !strings.Contains(res.stdout, "wrote "+filepath.Join(out, "web-agent.md")) || strings.Contains(res.stdout, "note:") {
		t.Fatalf("import: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	contract := filepath.Join(out, "web-agent.md")
	if res := runBin(t, bin, "lint", "--strict", contract); res.code != 0 {
		t.Fatalf("lint --strict: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{"crash_loop: {max_restarts: 3, per: 1m40s, then: escalate}", "grace: 20s", "debounce: 0s", "timeout=10s"} {
		text, _ := os.ReadFile(contract)
		if !strings.Contains(string(text), want) {
			t.Fatalf("the imported contract lacks %q:\n%s", want, text)
		}
	}

	// The agent runs, started as Monit would start it.
	if err := exec.Command("/bin/sh", filepath.Join(dir, "start.sh")).Run(); err != nil {
		t.Fatal(err)
	}
	health := fmt.Sprintf("http://127.0.0.1:%d/health", port)
	wait.For(t, "the agent answers /health", func() bool { return answers(health) })
	state := filepath.Join(dir, "state")
	run := func() importRunReport {
		t.Helper()
		r := runBin(t, bin, "run", "--json", "--state-dir", state, contract)
		var rep importRunReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("run --json: exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return rep
	}
	if rep := run(); rep.Overall != "healthy" || len(rep.repairs()) > 0 {
		t.Fatalf("a healthy agent: %s, repairs %v", rep.Overall, rep.repairs())
	}

	for i := 1; i <= 4; i++ {
		pid := agentPID(t, dir)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if answersWithin(health, time.Second) {
			t.Fatalf("wedge %d: the stopped agent still answers", i)
		}
		rep := run()
		acts := rep.repairs()
		if i <= 3 {
			if len(acts) != 1 || acts[0].Status != "ran" || acts[0].Verify != "remediated" {
				t.Fatalf("wedge %d: want one restart, verified; got %+v", i, acts)
			}
			if !strings.Contains(acts[0].Action, "kill -KILL") || !strings.Contains(acts[0].Action, "start.sh") {
				t.Fatalf("wedge %d: the restart is not Monit's stop then start: %q", i, acts[0].Action)
			}
			if n := starts(t, dir); n != i+1 {
				t.Fatalf("wedge %d: the agent was started %d times, want %d (once at first, once per restart)", i, n, i+1)
			}
			if !answers(health) || agentPID(t, dir) == pid {
				t.Fatalf("wedge %d: after the restart the agent does not answer as a new process", i)
			}
			continue
		}
		// The fourth wedge within 5 cycles: Monit would unmonitor; the
		// crash-loop guard refuses the restart and pages a person.
		if len(acts) != 1 || acts[0].Guard != "crash-loop" || (acts[0].Status != "escalate" && acts[0].Status != "alert") {
			t.Fatalf("wedge 4: want the restart refused by the crash-loop guard; got %+v", acts)
		}
		if n := starts(t, dir); n != 4 {
			t.Fatalf("wedge 4: the agent was started %d times, want 4: no restart past the limit", n)
		}
		if answers(health) {
			t.Fatal("wedge 4: the agent answers, so something restarted it")
		}
		if rep.Overall != "critical" {
			t.Fatalf("wedge 4: the run is %s, want critical", rep.Overall)
		}
	}
}

type importRunReport struct {
	Overall string `json:"overall_severity"`
	Actions []struct {
		Kind   string `json:"kind"`
		Action string `json:"action"`
		Status string `json:"status"`
		Guard  string `json:"guard"`
		Verify string `json:"verify"`
		Reason string `json:"reason"`
	} `json:"actions"`
}

// repairs are the report's repair actions (the rows with a command).
func (r importRunReport) repairs() []struct {
	Kind   string `json:"kind"`
	Action string `json:"action"`
	Status string `json:"status"`
	Guard  string `json:"guard"`
	Verify string `json:"verify"`
	Reason string `json:"reason"`
} {
	var out = r.Actions[:0:0]
	for _, a := range r.Actions {
		if a.Kind == "repair" {
			out = append(out, a)
		}
	}
	return out
}

type importBinResult struct {
	code           int
	stdout, stderr string
}

func runBin(t *testing.T, bin string, args ...string) importBinResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := owner.CommandContext(ctx, bin, args...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return importBinResult{code: code, stdout: so.String(), stderr: se.String()}
}

func answers(url string) bool { return answersWithin(url, 2*time.Second) }

func answersWithin(url string, d time.Duration) bool {
	c := http.Client{Timeout: d}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func agentPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "agent.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func starts(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "starts"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "start\n")
}

// TestImportPrintsNotesAndNeverOverwrites: the command prints each note
// with its FILE:LINE, writes contracts that lint --strict, one by one and
// as the directory (`depends on disk` is db's depends_on: [disk]), and
// refuses to overwrite a contract (nothing is written then) unless
// --force.
func TestImportPrintsNotesAndNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "monitrc")
	src := "set daemon 60\ncheck process db with pidfile /run/db.pid\n  start program = \"/usr/bin/systemctl start db\"\n" +
		"  depends on disk\ncheck filesystem disk with path /\n  if space usage > 90% then alert\n  if inode usage > 90% for 2 times within 3 cycles then alert\n"
	if err := os.WriteFile(rc, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runMain(t, "contractd", "import", "monitrc", "--out", out, rc)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"wrote " + filepath.Join(out, "db.md"), "wrote " + filepath.Join(out, "disk.md"),
		rc + ":7: note: if inode usage > 90% for 2 times within 3 cycles then alert: 2 failures within 3 cycles is translated as",
		"2 contracts written to " + out + "; 2 notes say"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "depends on disk") {
		t.Errorf("depends on disk is a note:\n%s", stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "db.md")); !strings.Contains(string(b), "\ndepends_on: [disk]") {
		t.Errorf("db.md does not depend on disk:\n%s", b)
	}
	if code, stdout, _ := runMain(t, "contractd", "lint", "--strict", out); code != 0 {
		t.Fatalf("lint --strict %s: exit %d\n%s", out, code, stdout)
	}
	if err := os.WriteFile(filepath.Join(out, "disk.md"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, "db.md")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain(t, "contractd", "import", "monitrc", "--out", out, rc)
	if code == 0 || !strings.Contains(stderr, filepath.Join(out, "disk.md")+" exists; nothing was written") {
		t.Fatalf("a second import over an edited contract: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "db.md")); err == nil {
		t.Fatal("a refused import wrote db.md")
	}
	if code, _, stderr := runMain(t, "contractd", "import", "monitrc", "--force", "--out", out, rc); code != 0 {
		t.Fatalf("--force: exit %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "disk.md")); strings.HasPrefix(string(b), "mine") {
		t.Fatal("--force did not overwrite disk.md")
	}
}

// TestImportRefusesAPortThatIsNoPortAndWritesNothing: a monitrc whose
// port is not 1–65535 (Monit's own syntax check lets 184810 through) is
// an error of the monitrc at the port's FILE:LINE:COL: the import exits
// 2, as for a file it cannot read, and writes no contract, not even for
// the checks that are right. Before, the port went into the contract and
// the import blamed itself ("please report it").
func TestImportRefusesAPortThatIsNoPortAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "monitrc")
	src := "set daemon 60\ncheck process db with pidfile /run/db.pid\n  start program = \"/usr/bin/systemctl start db\"\n" +
		"  if failed port 184810 protocol http then restart\ncheck filesystem disk with path /\n  if space usage > 90% then alert\n"
	if err := os.WriteFile(rc, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runMain(t, "contractd", "import", "monitrc", "--out", out, rc)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{rc + ":4:18: port 184810 is not a port: a port is a number from 1 to 65535", "1 error in the monitrc; nothing was written"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "please report") || strings.Contains(stdout, "wrote ") {
		t.Errorf("the import blames itself or wrote something:\n%s%s", stdout, stderr)
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		t.Fatalf("a refused import wrote %d files into %s", len(entries), out)
	}
}
