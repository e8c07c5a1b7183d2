package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A check with --repair reports the state after the repair and says that
// a repair ran: the status line "FIXME OK - box repaired (was critical)",
// the perfdata counts after verification and the repairs made, the long
// output the command, its outcome and the findings from before it, marked
// so. A repair that fails leaves the check CRITICAL and says why. Before,
// the status line said "OK - all agents healthy", the long output still
// said critical and the repair was on stderr only, which Nagios drops.
func TestNagiosRepairReportsTheStateAfterTheRepair(t *testing.T) {
	dir := t.TempDir()
	fix := repairContract(t, dir)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	code, out, errs := runMain(t, "contractd", "run", "--nagios", "--repair", "--verify-grace", "10ms", "--state-dir", t.TempDir(), fix)
	if n := repairs(t, dir); n != 1 || code != 0 {
		t.Fatalf("exit %d, %d repairs; want 0 and one repair:\n%s%s", code, n, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	status, perf, _ := strings.Cut(lines[0], " | ")
	if status != "FIXME OK - box repaired (was critical)" {
		t.Errorf("status line %q, want %q", status, "FIXME OK - box repaired (was critical)")
	}
	for _, want := range []string{"healthy=1;;;0;1", "critical=0;;;0;1", "repairs=1;;;0;"} {
		if !strings.Contains(" "+perf+" ", " "+want+" ") {
			t.Errorf("perfdata %q lacks %s", perf, want)
		}
	}
	cmd := "echo x >> " + filepath.Join(dir, "repairs") + "; echo ok > " + filepath.Join(dir, "state")
	want := []string{
		"box: repair ran: `" + cmd + "` → remediated, now healthy (was critical)",
		"box/probe (before the repair): stdout (bad) expected `ok` → critical",
	}
	if strings.Join(lines[1:], "\n") != strings.Join(want, "\n") {
		t.Errorf("long output:\n%s\nwant:\n%s", strings.Join(lines[1:], "\n"), strings.Join(want, "\n"))
	}

	// A repair that fails: CRITICAL, and the status line says the repair failed.
	broken := filepath.Join(t.TempDir(), "fixme.md")
	src, _ := os.ReadFile(fix)
	os.WriteFile(broken, []byte(strings.Replace(string(src), "| `echo x", "| `echo no >&2; exit 4; echo x", 1)), 0o644)
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--repair", "--verify-grace", "10ms", "--state-dir", t.TempDir(), broken)
	first, long, _ := strings.Cut(out, "\n")
	if code != 2 || !strings.HasPrefix(first, "FIXME CRITICAL - box critical (repair failed) | ") || !strings.Contains(first, " repairs=1;;;0;") ||
		!regexp.MustCompile("(?m)^box: repair failed: `echo no >&2; exit 4; echo x[^`]*`: exit code 4: no$").MatchString(long) {
		t.Errorf("failed repair: exit %d\n%s", code, out)
	}

	// Without --repair nothing runs, and the perfdata says so.
	os.WriteFile(filepath.Join(dir, "state"), []byte("bad\n"), 0o644)
	code, out, _ = runMain(t, "contractd", "run", "--nagios", "--state-dir", t.TempDir(), fix)
	if first, _, _ := strings.Cut(out, "\n"); code != 2 || !strings.HasPrefix(first, "FIXME CRITICAL - box critical | ") || !strings.Contains(first, " repairs=0;;;0;") {
		t.Errorf("check without --repair: exit %d\n%s", code, out)
	}
}
