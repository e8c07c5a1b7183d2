package serve

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnits checks the shipped units say what the daemon relies on,
// and that systemd itself accepts them where systemd-analyze exists.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "packaging", "systemd")
	cases := []struct {
		file string
		as   string // name to verify under (templates need an instance)
		want []string
	}{
		{"contractd.service", "contractd.service", []string{
			"Type=notify", "WatchdogSec=", "Restart=on-failure", "StartLimitIntervalSec=", "StartLimitBurst=",
			"ExecReload=/bin/kill -HUP $MAINPID", "contractd serve", "--token-file",
		}},
		{"contractd-run@.service", "contractd-run@demo.service", []string{
			"Type=oneshot", "contractd run", "/etc/contractd/%i.md",
		}},
		{"contractd-run@.timer", "contractd-run@demo.timer", []string{
			"OnBootSec=", "OnUnitActiveSec=15min", "Unit=contractd-run@%i.service", "WantedBy=timers.target",
		}},
	}
	dir := t.TempDir()
	fakeBin := filepath.Join(dir, "contractd")
	if err := os.WriteFile(fakeBin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tc := range cases {
		b, err := os.ReadFile(filepath.Join(src, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", tc.file, w)
			}
		}
		unit := strings.ReplaceAll(string(b), "/usr/local/bin/contractd", fakeBin)
		if err := os.WriteFile(filepath.Join(dir, tc.as), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, "./"+tc.as)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed; unit syntax not verified")
	}
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, names...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
