package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/fixtures/need"
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
