package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
)

// scratchContract watches a filesystem with Debian's check_disk: a nagios
// step with no table of its own for the plugin's verdict, and one row
// that exports the filesystem's size from its perfdata.
const scratchContract = "---\nname: scratch-disk\nruntime_contract: 2\nvars:\n  mount: {{mnt}}\n---\n\n# Scratch disk\n\n## Execution\n\n" +
	"### Scratch {#scratch agent=scratch}\n\n```nagios {id=free}\ncheck_disk -w 50% -c 25% -p ${mount}\n```\n\n" +
	"| Field | Healthy | Critical |\n|---|---|---|\n| `perf[\"{{mnt}}\"].max` {export=true} | > 0 | 0 |\n"

// TestCheckDiskOnATmpfs, with the real binary and Debian's check_disk: a
// 4 MiB tmpfs this test mounts is filled past the plugin's -w and then
// its -c level, and `contractd run --json` reports the unit healthy, then
// degraded, then critical, the plugin's status line among its findings
// and its perfdata as perf fields: the used bytes growing, the
// thresholds and the size.
func TestCheckDiskOnATmpfs(t *testing.T) {
	need.Root(t, "mounting a tmpfs")
	need.Plugin(t, "check_disk")
	bin := binary(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		need.Missing(t, "tmpfs", fmt.Errorf("mount -t tmpfs: %v: %s", err, out))
	}
	// Registered after TempDir's own cleanup, so it runs first.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	contract := filepath.Join(dir, "scratch-disk.md")
	if err := os.WriteFile(contract, []byte(strings.ReplaceAll(scratchContract, "{{mnt}}", mnt)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "lint", "--strict", contract).CombinedOutput(); err != nil {
		t.Fatalf("lint --strict: %v\n%s", err, out)
	}

	type step struct {
		Severity string         `json:"severity"`
		ExitCode int            `json:"exit_code"`
		Findings []string       `json:"findings"`
		Values   map[string]any `json:"values"`
		Metrics  map[string]any `json:"metrics"`
	}
	var report struct {
		Overall string `json:"overall_severity"`
		Agents  map[string]struct {
			Severity string `json:"severity"`
		} `json:"agents"`
		Stages []struct {
			Steps []step `json:"steps"`
		} `json:"stages"`
	}
	var used []float64
	for _, tc := range []struct {
		fill            int // KiB written to the tmpfs before the run
		severity        string
		exit            int
		status, finding string
	}{
		{0, "healthy", 0, "OK", ""},
		{2500, "degraded", 1, "WARNING", "DISK WARNING - free space: " + mnt},
		{3400, "critical", 2, "CRITICAL", "DISK CRITICAL - free space: " + mnt},
	} {
		if tc.fill > 0 {
			if err := os.WriteFile(filepath.Join(mnt, "fill"), make([]byte, tc.fill<<10), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(bin, "run", "--json", "--state-dir", filepath.Join(dir, "state"), contract).Output()
		if err != nil {
			t.Fatalf("run with %d KiB: %v\n%s", tc.fill, err, out)
		}
		if err := json.Unmarshal(out, &report); err != nil {
			t.Fatalf("run --json: %v\n%s", err, out)
		}
		if len(report.Stages) != 1 || len(report.Stages[0].Steps) != 1 {
			t.Fatalf("run --json: %s", out)
		}
		s := report.Stages[0].Steps[0]
		if report.Overall != tc.severity || report.Agents["scratch"].Severity != tc.severity || s.ExitCode != tc.exit || s.Values["plugin_status"] != tc.status {
			t.Fatalf("with %d KiB: overall %s, agent %s, exit %d, plugin_status %v; want %s, exit %d, %s\n%s",
				tc.fill, report.Overall, report.Agents["scratch"].Severity, s.ExitCode, s.Values["plugin_status"], tc.severity, tc.exit, tc.status, out)
		}
		if tc.finding != "" && (len(s.Findings) == 0 || !strings.HasPrefix(s.Findings[0], tc.finding) ||
			!strings.HasSuffix(s.Findings[0], fmt.Sprintf("(exit %d %s → %s)", tc.exit, tc.status, tc.severity))) {
			t.Errorf("with %d KiB: findings %q, want the status line %q… and its verdict", tc.fill, s.Findings, tc.finding)
		}
		perf, _ := s.Values["perf"].(map[string]any)[mnt].(map[string]any)
		if perf == nil {
			t.Fatalf("with %d KiB: no perf[%q] in the report's values: %v", tc.fill, mnt, s.Values)
		}
		value, _ := perf["value"].(float64)
		warn, _ := perf["warn"].(float64)
		crit, _ := perf["crit"].(float64)
		if perf["max"] != float64(4<<20) || perf["min"] != 0.0 || perf["uom"] == "" || !(0 < warn && warn < crit && crit < 4<<20) {
			t.Errorf("with %d KiB: perf %v, want the size 4 MiB as max, 0 as min, a unit and the thresholds between", tc.fill, perf)
		}
		if s.Values[`perf["`+mnt+`"].max`] != float64(4<<20) || s.Metrics[`perf["`+mnt+`"].max`] != float64(4<<20) {
			t.Errorf("with %d KiB: the exported row: values %v metrics %v", tc.fill, s.Values, s.Metrics)
		}
		used = append(used, value)
	}
	if !(used[0] < used[1] && used[1] < used[2]) {
		t.Errorf("the used bytes read %v, want them growing as the tmpfs fills", used)
	}
}

// privateContract checks a file only root may see, with check_file_age
// run as the login (the plugin cannot see it) and through sudo.
const privateContract = `---
name: private-file
runtime_contract: 2
targets:
  box: {ssh: %s, sudo: true, known_hosts: %s, identity: [%s]}
vars:
  file: %s
---

## Execution

### Box {#box agent=box on=box}

` + "```nagios {id=asroot sudo=true}\n/usr/lib/nagios/plugins/check_file_age -f ${file} -w 3600 -c 7200\n```" + `

` + "```nagios {id=aslogin}\ncheck_file_age -f ${file} -w 3600 -c 7200\n```" + `

| Field | Healthy | Critical |
|---|---|---|
| ` + "`plugin_status`" + ` | ` + "`CRITICAL`" + ` | ` + "`OK`" + ` |
`

// TestPluginThroughSudoOverSSH logs in to a real sshd as a real
// unprivileged user, whose check_file_age cannot see a file in a
// directory only root may read (CRITICAL: not found), and runs the same
// plugin through Debian's sudo with the line `contractd sudoers` printed:
// OK, with its perfdata. Without the line, sudo's refusal is the finding
// (degraded: sudo exits 1, as a plugin's WARNING does).
func TestPluginThroughSudoOverSSH(t *testing.T) {
	need.Root(t, "creating a user and writing /etc/sudoers.d")
	useradd := need.Command(t, "useradd", "passwd")
	need.Command(t, "sudo", "sudo")
	need.SSHD(t)
	need.Plugin(t, "check_file_age")

	var rnd [4]byte
	rand.Read(rnd[:])
	login := "ctd" + hex.EncodeToString(rnd[:])
	base, err := os.MkdirTemp("", "contractd-plugin-sudo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	for _, args := range [][]string{{useradd, "-m", "-d", filepath.Join(base, "home"), "-s", "/bin/sh", login}, {"usermod", "-p", "*", login}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { exec.Command("userdel", login).Run() })
	private := filepath.Join(base, "private")
	os.Mkdir(private, 0o700)
	file := filepath.Join(private, "backup.tar")
	os.WriteFile(file, []byte("x"), 0o600)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := sshd.Start(ctx, sshd.Options{User: login, QuietLogin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	dir := t.TempDir()
	contract := filepath.Join(dir, "private-file.md")
	if err := os.WriteFile(contract, []byte(fmt.Sprintf(privateContract, login+"@"+srv.Addr, srv.KnownHostsFile, srv.IdentityFile, file)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, lines, errs := runMain(t, "contractd", "sudoers", contract)
	want := login + " ALL=(root) NOPASSWD: /usr/lib/nagios/plugins/check_file_age -f " + file + " -w 3600 -c 7200\n"
	if code != 0 || !strings.Contains(lines, want) {
		t.Fatalf("contractd sudoers: exit %d, want %q:\n%s%s", code, want, lines, errs)
	}
	installed := "/etc/sudoers.d/contractd-test-" + login
	if err := os.WriteFile(installed, []byte(lines), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(installed) })

	run := func() (asroot, aslogin *engine.StepReport) {
		t.Helper()
		code, out, errs := runMain(t, "contractd", "run", "--json", "--quiet", "--state-dir", filepath.Join(dir, "state"), contract)
		var rep engine.Report
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.Stages) != 1 || len(rep.Stages[0].Steps) != 2 {
			t.Fatalf("run: exit %d %v\n%s%s", code, err, out, errs)
		}
		return rep.Stages[0].Steps[0], rep.Stages[0].Steps[1]
	}
	asroot, aslogin := run()
	if asroot.Severity != contracts.SeverityHealthy || asroot.Values["plugin_status"] != "OK" || !strings.HasPrefix(asroot.Values["output"].(string), "FILE_AGE OK: "+file) {
		t.Errorf("through sudo: %s %v %q, want healthy: FILE_AGE OK", asroot.Severity, asroot.Values, asroot.Findings)
	}
	if size, _ := asroot.Values["perf"].(map[string]any)["size"].(map[string]any); size == nil || size["value"] != 1.0 || size["uom"] != "B" {
		t.Errorf("through sudo: perf %v, want the file's size 1 B", asroot.Values["perf"])
	}
	if aslogin.Severity != contracts.SeverityHealthy || aslogin.Values["plugin_status"] != "CRITICAL" || !strings.Contains(aslogin.Values["output"].(string), "File not found") {
		t.Errorf("as the login: %s %v, want CRITICAL: File not found (judged healthy by its table)", aslogin.Severity, aslogin.Values)
	}

	os.Remove(installed)
	asroot, _ = run()
	if asroot.Severity != contracts.SeverityDegraded || len(asroot.Findings) == 0 || asroot.Findings[0] != "sudo: a password is required (exit 1 WARNING → degraded)" {
		t.Errorf("without the sudoers line: %s %q, want degraded, sudo's refusal as the finding", asroot.Severity, asroot.Findings)
	}
}
