package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/mesh"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/wait"
)

const zulipHealth = "../../fixtures/contracts/zulip-health.md"

// runMain drives Main like the binary, returning its exit code and output.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: os.Getenv, Environ: os.Environ, IsTerminal: func(io.Writer) bool { return false }}
	code := m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestLintCleanContractExitsZero(t *testing.T) {
	code, out, _ := runMain(t, "contractd", "lint", zulipHealth)
	if code != 0 {
		t.Fatalf("lint exit %d:\n%s", code, out)
	}
}

func TestLintBadCellNamesFileLineAndColumn(t *testing.T) {
	src, err := os.ReadFile(zulipHealth)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte("| < 1800 |")) {
		t.Fatal("zulip-health no longer has the `< 1800` cell this test edits")
	}
	bad := bytes.Replace(src, []byte("| < 1800 |"), []byte("| < 18OO |"), 1)
	path := filepath.Join(t.TempDir(), "zulip-health.md")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	// Where the edited cell is: its line, and the column of "<".
	line := bytes.Count(bad[:bytes.Index(bad, []byte("< 18OO"))], []byte("\n")) + 1
	lineStart := bytes.LastIndex(bad[:bytes.Index(bad, []byte("< 18OO"))], []byte("\n")) + 1
	col := len([]rune(string(bad[lineStart:bytes.Index(bad, []byte("< 18OO"))]))) + 1

	code, out, _ := runMain(t, "contractd", "lint", path)
	if code != 1 {
		t.Fatalf("lint exit %d, want 1:\n%s", code, out)
	}
	want := regexp.MustCompile(regexp.QuoteMeta(path) + `:` + strconv.Itoa(line) + `:(\d+): error: `)
	m := want.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no error at %s:%d:\n%s", path, line, out)
	}
	if got, _ := strconv.Atoi(m[1]); got < col || got > col+6 {
		t.Fatalf("error column %s, want the cell's column %d (or the bad token's within it):\n%s", m[1], col, out)
	}
}

func TestExplainJSONListsEveryStageAndTheA1Table(t *testing.T) {
	code, out, errs := runMain(t, "contractd", "explain", "--json", zulipHealth)
	if code != 0 {
		t.Fatalf("explain exit %d: %s", code, errs)
	}
	var plan struct {
		Stages []struct {
			ID     string `json:"id"`
			Agent  string `json:"agent"`
			Gate   bool   `json:"gate"`
			Target string `json:"target"`
			Steps  []struct {
				ID     string `json:"id"`
				Kind   string `json:"kind"`
				Health []struct {
					Field    string `json:"field"`
					Severity string `json:"severity"`
					Expr     string `json:"expr"`
				} `json:"health"`
			} `json:"steps"`
			Actions []struct {
				Condition string `json:"condition"`
				Action    string `json:"action"`
			} `json:"actions"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("explain --json is not JSON: %v", err)
	}
	ids := map[string]bool{}
	for _, st := range plan.Stages {
		ids[st.ID] = true
		if st.ID != "pi" {
			continue
		}
		fields := map[string]bool{}
		for _, h := range st.Steps[0].Health {
			if h.Expr == "" {
				t.Fatalf("row %s has no compiled expression", h.Field)
			}
			fields[h.Field] = true
		}
		if len(fields) != 10 {
			t.Fatalf("A1 table has %d fields, want 10: %v", len(fields), fields)
		}
		if len(st.Actions) == 0 {
			t.Fatal("pi stage lists no actions")
		}
	}
	for _, id := range []string{"server", "pi", "tanko", "agent0", "koby", "global"} {
		if !ids[id] {
			t.Fatalf("stage %s missing from %v", id, ids)
		}
	}
}

// startMesh starts a local-mode fixture mesh and points this process's
// environment at it (the local transport's scripts inherit it).
func startMesh(t *testing.T) (*mesh.Mesh, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the fixture mesh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := mesh.Start(ctx, mesh.Options{Dir: t.TempDir(), Transport: "local"})
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(func() { m.Stop() })
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := m.WriteInventory(inv, nil); err != nil {
		t.Fatal(err)
	}
	return m, inv
}

func TestRunJSONAgainstTheMeshGivesTheSchemaAndTheSnapshot(t *testing.T) {
	m, inv := startMesh(t)
	state := t.TempDir()
	if err := m.Block(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMain(t, "contractd", "run", "--json", "--quiet", "--verify-grace", "500ms", "--state-dir", state, "--inventory", inv, zulipHealth)
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	for _, k := range []string{"contract", "started_at", "finished_at", "overall_severity", "stages", "actions", "alerts"} {
		if _, ok := rep[k]; !ok {
			t.Fatalf("report lacks %q", k)
		}
	}
	stage := rep["stages"].([]any)[1].(map[string]any)
	for _, k := range []string{"id", "agent", "severity", "status", "steps"} {
		if _, ok := stage[k]; !ok {
			t.Fatalf("stage lacks %q: %v", k, stage)
		}
	}
	step := stage["steps"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "severity", "duration_ms", "findings"} {
		if _, ok := step[k]; !ok {
			t.Fatalf("step lacks %q: %v", k, step)
		}
	}
	action := rep["actions"].([]any)[0].(map[string]any)
	for _, k := range []string{"agent", "action", "status", "reason"} {
		if _, ok := action[k]; !ok {
			t.Fatalf("action lacks %q: %v", k, action)
		}
	}
	// The repair was verified: the report says what abiba is after it.
	abiba := rep["agents"].(map[string]any)["abiba"].(map[string]any)
	if m.PiRestarts() != 1 || abiba["severity"] == "critical" || abiba["before_repair"] != "critical" || rep["overall_severity"] == "critical" {
		t.Fatalf("blocked pipeline: restarts %d, abiba %v, overall %v; want one verified repair, abiba no longer critical after it", m.PiRestarts(), abiba, rep["overall_severity"])
	}

	code, out, _ = runMain(t, "contractd", "status", "--json", "--state-dir", state, "zulip-health")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var st engine.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"zulip_server_status", "agents", "last_check", "overall_severity", "restart_debounce"} {
		if st.Snapshot[k] == nil {
			t.Fatalf("snapshot %s is null or missing: %v", k, st.Snapshot)
		}
	}
	if len(st.Snapshot) != 5 {
		t.Fatalf("snapshot has keys beyond Maintains: %v", st.Snapshot)
	}
	// The snapshot carries the state after the verified repair.
	abiba = st.Snapshot["agents"].(map[string]any)["abiba"].(map[string]any)
	if abiba["response_pipeline"] == "blocked" || abiba["severity"] == "critical" || abiba["pm2_status"] != "online" {
		t.Fatalf("abiba snapshot %v, want the state after the verified repair", abiba)
	}

	code, out, _ = runMain(t, "contractd", "why", "--state-dir", state, "zulip-health")
	if code != 0 || !strings.Contains(out, "pm2 restart abiba-zulip") || !strings.Contains(out, "debounce") {
		t.Fatalf("why exit %d:\n%s", code, out)
	}
	code, out, _ = runMain(t, "contractd", "history", "--state-dir", state, "zulip-health")
	if code != 0 || !strings.Contains(out, "ran: pm2 restart abiba-zulip") {
		t.Fatalf("history exit %d:\n%s", code, out)
	}
}

func TestDeclaredCommandAndSymlinkRunTheContract(t *testing.T) {
	_, inv := startMesh(t)
	dir := t.TempDir()
	src, _ := os.ReadFile(zulipHealth)
	if err := os.WriteFile(filepath.Join(dir, "zulip-health.md"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"contractd", "zulip-status", "--dir", dir, "--inventory", inv, "--quiet", "--state-dir", t.TempDir()},
		{"/usr/local/bin/zulip-status", "--dir", dir, "--inventory", inv, "--quiet", "--state-dir", t.TempDir()},
	} {
		code, out, errs := runMain(t, args...)
		if code != 0 || !strings.Contains(out, "zulip-health 3.3.0 — HEALTHY") {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errs)
		}
	}
}

func TestNagiosMapsSeverityToExitCode(t *testing.T) {
	m, inv := startMesh(t)
	code, out, _ := runMain(t, "contractd", "run", "--nagios", "--quiet", "--state-dir", t.TempDir(), "--inventory", inv, zulipHealth)
	if code != 0 || !strings.HasPrefix(out, "ZULIP-HEALTH OK - ") || !strings.Contains(out, "| healthy=") {
		t.Fatalf("healthy: exit %d\n%s", code, out)
	}
	if err := m.SetKoby(context.Background(), map[string]any{"stuck": true}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--quiet", "--state-dir", t.TempDir(), "--inventory", inv, zulipHealth)
	if code != 2 || !strings.HasPrefix(out, "ZULIP-HEALTH CRITICAL - koby critical") {
		t.Fatalf("critical: exit %d\n%s", code, out)
	}
}

func TestSickAgentStillExitsZero(t *testing.T) {
	m, inv := startMesh(t)
	if err := m.SetKoby(context.Background(), map[string]any{"stuck": true}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runMain(t, "contractd", "run", "--quiet", "--state-dir", t.TempDir(), "--inventory", inv, zulipHealth)
	if code != 0 || !strings.Contains(out, "CRITICAL") {
		t.Fatalf("exit %d for a sick agent; a timer must not fail:\n%s", code, out)
	}
}

func TestNewWritesAContractThatLints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.md")
	if code, _, errs := runMain(t, "contractd", "new", "-o", path, "web"); code != 0 {
		t.Fatalf("new: %s", errs)
	}
	// Clean but for the reminder that its repairs are not armed yet
	// (TestNewTemplateRepairsNothingUntilArmed).
	if code, out, _ := runMain(t, "contractd", "lint", path); code != 0 || strings.Count(out, "warning") > 1 || strings.Contains(out, "error") {
		t.Fatalf("the template does not lint clean:\n%s", out)
	}
	if code, _, _ := runMain(t, "contractd", "new", "-o", path, "web"); code == 0 {
		t.Fatal("new overwrote an existing file")
	}
	// Its commented notify routes, uncommented, are routes that load.
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var routes int
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "# "); ok && (rest == "notify:" || strings.HasPrefix(rest, "  - {")) {
			lines[i] = rest
			routes++
		}
	}
	if routes < 2 {
		t.Fatalf("the template shows no notify route to uncomment:\n%s", src)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runMain(t, "contractd", "explain", "--json", path)
	var plan struct{ Notify []string }
	if err := json.Unmarshal([]byte(out), &plan); code != 0 || err != nil || strings.Join(plan.Notify, " ") != "log webhook" {
		t.Fatalf("the template's routes, uncommented: exit %d, routes %q\n%s", code, plan.Notify, out)
	}
}

func TestMaintenanceCommandStartsListsAndEndsWindows(t *testing.T) {
	state := t.TempDir()
	// zulip-health is a known contract: its file is in CONTRACTD_DIR.
	t.Setenv("CONTRACTD_DIR", filepath.Dir(zulipHealth))
	code, out, errs := runMain(t, "contractd", "maintenance", "--state-dir", state, "--for", "2h", "--reason", "kernel upgrade", "zulip-health")
	if code != 0 || !strings.Contains(out, "whole contract: maintenance until") || !strings.Contains(out, "kernel upgrade") {
		t.Fatalf("start: exit %d: %s%s", code, out, errs)
	}
	if code, out, _ = runMain(t, "contractd", "maintenance", "--state-dir", state, "--agent", "abiba", "--for", "30m", "zulip-health"); code != 0 {
		t.Fatalf("agent window: exit %d: %s", code, out)
	}
	code, out, _ = runMain(t, "contractd", "maintenance", "--state-dir", state, "zulip-health")
	if code != 0 || !strings.Contains(out, "agent abiba: maintenance until") || !strings.Contains(out, "whole contract") {
		t.Fatalf("list: exit %d:\n%s", code, out)
	}
	if code, out, _ = runMain(t, "contractd", "maintenance", "--state-dir", state, "--end", "zulip-health"); code != 0 || strings.Contains(out, "whole contract") {
		t.Fatalf("end the contract-wide window: exit %d:\n%s", code, out)
	}
	runMain(t, "contractd", "maintenance", "--state-dir", state, "--agent", "abiba", "--end", "zulip-health")
	if code, out, _ = runMain(t, "contractd", "maintenance", "--state-dir", state, "zulip-health"); code != 0 || !strings.Contains(out, "no maintenance window") {
		t.Fatalf("after both ended: exit %d:\n%s", code, out)
	}
	if code, _, errs = runMain(t, "contractd", "maintenance", "--state-dir", state, "--for", "1h", "--end", "zulip-health"); code != 2 || !strings.Contains(errs, "usage") {
		t.Fatalf("--for with --end: exit %d: %s", code, errs)
	}
	if code, _, errs = runMain(t, "contractd", "maintenance", "--state-dir", state, "--for", "1h", "../escape"); code != 2 || !strings.Contains(errs, "unknown contract") {
		t.Fatalf("a path as the name: exit %d: %s", code, errs)
	}
}

// startSSHMesh starts an ssh-mode fixture mesh (Tanko through a loopback
// sshd and the pct stand-in, Agent Zero in a container through docker exec
// when Docker answers), or stops the test naming sshd (fixtures/need).
func startSSHMesh(t *testing.T) (*mesh.Mesh, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the fixture mesh")
	}
	need.SSHD(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := mesh.Start(ctx, mesh.Options{Dir: t.TempDir(), Transport: "ssh", QuietLogin: true})
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(func() { m.Stop() })
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := m.WriteInventory(inv, nil); err != nil {
		t.Fatal(err)
	}
	return m, inv
}

// comparable strips what differs between two runs of the same mesh state:
// ids, times, durations, and the id the A2A fake gives each new task.
func comparable(t *testing.T, report string) string {
	t.Helper()
	var rep map[string]any
	if err := json.Unmarshal([]byte(report), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, report)
	}
	for _, k := range []string{"run_id", "started_at", "finished_at", "duration_ms"} {
		delete(rep, k)
	}
	for _, st := range rep["stages"].([]any) {
		for _, sp := range st.(map[string]any)["steps"].([]any) {
			step := sp.(map[string]any)
			delete(step, "duration_ms")
			if v, ok := step["values"].(map[string]any); ok {
				delete(v, "duration")
			}
		}
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return regexp.MustCompile(`task-[0-9a-f]+`).ReplaceAllString(string(b), "task-ID")
}

func TestDeclaredCommandAnsweredByAWarmDaemonMatchesOneShot(t *testing.T) {
	_, inv := startSSHMesh(t)
	dir, state := t.TempDir(), t.TempDir()
	src, _ := os.ReadFile(zulipHealth)
	if err := os.WriteFile(filepath.Join(dir, "zulip-health.md"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan int, 1)
	var serveErr bytes.Buffer
	go func() {
		m := &Main{Stdout: io.Discard, Stderr: &serveErr, Getenv: os.Getenv, Environ: os.Environ, IsTerminal: func(io.Writer) bool { return false }}
		served <- m.Run(ctx, []string{"contractd", "serve", "--dir", dir, "--state-dir", state, "--inventory", inv, "--listen", addr, "--stagger", "0"})
	}()
	t.Cleanup(func() {
		stop()
		if code := <-served; code != 0 {
			t.Errorf("serve exit %d", code)
		}
	})

	// The daemon answers once its socket is up; its first answer warms
	// the resident sessions, the later ones use them.
	var warm string
	wait.Until(t, "an answer of the daemon", func() (bool, string) {
		code, out, errs := runMain(t, "contractd", "zulip-status", "--state-dir", state, "--json")
		warm = out
		return code == 0 && strings.Contains(errs, "answered by the daemon"), fmt.Sprintf("exit %d\n%s\nserve log:\n%s", code, errs, serveErr.String())
	})
	code, out, errs := runMain(t, "contractd", "zulip-status", "--state-dir", state, "--json")
	if code != 0 || !strings.Contains(errs, "answered by the daemon") {
		t.Fatalf("second daemon answer: exit %d\n%s", code, errs)
	}
	warm = out
	code, oneShot, errs := runMain(t, "contractd", "zulip-status", "--one-shot", "--dir", dir, "--inventory", inv, "--state-dir", state, "--json")
	if code != 0 || strings.Contains(errs, "answered by the daemon") {
		t.Fatalf("one-shot: exit %d\n%s", code, errs)
	}
	if a, b := comparable(t, warm), comparable(t, oneShot); a != b {
		t.Fatalf("the daemon's report differs from the one-shot's:\ndaemon: %s\none-shot: %s", a, b)
	}
	if !strings.Contains(warm, `"overall_severity": "healthy"`) {
		t.Fatalf("the mesh is not healthy: %s", warm)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^contractd_resident_sessions (\d+)$`).FindSubmatch(metrics)
	if m == nil {
		t.Fatalf("no contractd_resident_sessions in /metrics")
	}
	// Tanko (pct through ssh) and Agent Zero (docker) at least.
	if n, _ := strconv.Atoi(string(m[1])); n < 2 {
		t.Fatalf("%d resident sessions, want the remote chains' at least", n)
	}
}

func TestRunNameFallsBackToOneShotWithoutADaemon(t *testing.T) {
	_, inv := startMesh(t)
	dir := t.TempDir()
	src, _ := os.ReadFile(zulipHealth)
	os.WriteFile(filepath.Join(dir, "zulip-health.md"), src, 0o644)
	code, out, errs := runMain(t, "contractd", "run", "zulip-health", "--dir", dir, "--inventory", inv, "--state-dir", t.TempDir(), "--json", "--quiet")
	if code != 0 || !strings.Contains(out, `"contract": "zulip-health"`) {
		t.Fatalf("run NAME: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = runMain(t, "contractd", "run", "no-such-contract", "--dir", dir, "--state-dir", t.TempDir())
	if code != 2 || !strings.Contains(errs, "neither a file nor a contract") {
		t.Fatalf("unknown NAME: exit %d: %s", code, errs)
	}
}
