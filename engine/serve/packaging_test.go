package serve

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/steps"
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
			"\nUser=contractd\n", "\nStateDirectory=contractd\n", "\nEnvironment=HOME=/var/lib/contractd\n", "\nNoNewPrivileges=yes\n",
			"\nProtectSystem=strict\n", "\nCapabilityBoundingSet=\n", "\nSystemCallFilter=@system-service\n", "Conflicts=contractd-root.service",
		}},
		{"contractd-root.service", "contractd-root.service", []string{
			"Type=notify", "WatchdogSec=", "Restart=on-failure", "contractd serve", "--token-file",
			"\nEnvironment=HOME=/root\n", "Conflicts=contractd.service",
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
	analyze := need.Command(t, "systemd-analyze", "systemd")
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, names...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdUnitSecurity holds the packaged unit to the bar of
// least privilege: systemd's own offline review rates it at most 3.0, it
// runs as the user the shipped sysusers.d file creates, whose home is the
// state directory (its ssh keys), and the root variant runs as root.
func TestSystemdUnitSecurity(t *testing.T) {
	t.Parallel()
	analyze := need.Command(t, "systemd-analyze", "systemd")
	src := filepath.Join("..", "..", "packaging", "systemd")
	score := func(unit string) float64 {
		t.Helper()
		out, err := exec.Command(analyze, "security", "--offline=true", "--no-pager", filepath.Join(src, unit)).CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", unit, err, out)
		}
		f, _ := strconv.ParseFloat(string(m[1]), 64)
		return f
	}
	if got := score("contractd.service"); got > 3.0 {
		t.Errorf("contractd.service: exposure %.1f, want at most 3.0", got)
	}
	if got := score("contractd-root.service"); got < 3.0 {
		t.Errorf("contractd-root.service: exposure %.1f; the root variant is said to keep today's (7.5): update its comment and docs/operations.md", got)
	}
	unit, _ := os.ReadFile(filepath.Join(src, "contractd-root.service"))
	if strings.Contains(string(unit), "\nUser=") {
		t.Errorf("contractd-root.service sets a User: it is the variant that runs as root")
	}

	sysusers := need.Command(t, "systemd-sysusers", "systemd")
	conf, err := filepath.Abs(filepath.Join("..", "..", "packaging", "sysusers.d", "contractd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// --root keeps the dry run off this machine's own user database.
	out, err := exec.Command(sysusers, "--dry-run", "--root", t.TempDir(), conf).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Creating user 'contractd'") {
		t.Errorf("systemd-sysusers --dry-run %s: %v\n%s", conf, err, out)
	}
	b, _ := os.ReadFile(conf)
	if f := strings.Fields(string(b[strings.LastIndex(string(b), "\nu ")+1:])); len(f) < 6 || f[1] != "contractd" || f[len(f)-2] != "/var/lib/contractd" {
		t.Errorf("sysusers.d: want user contractd with home /var/lib/contractd (the unit's StateDirectory and HOME), got %q", f)
	}
}

// TestSiblingSupervisorFixture lints the shipped sibling-supervisor contract
// and checks it says what its prose promises: every minute plus on start,
// `systemctl start` as its only command, and after three failed starts one
// start per five minutes, never escalated into giving up.
func TestSiblingSupervisorFixture(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "fixtures", "contracts", "sibling-supervisor.md")
	c, diags := contracts.LoadFile(path, contracts.Options{})
	for _, d := range diags {
		t.Errorf("lint: %s", d)
	}
	if c == nil {
		t.Fatal("the fixture did not load")
	}
	if c.Schedule.Every != time.Minute || !c.Schedule.OnStart {
		t.Errorf("schedule = %+v, want every 1m and on start", c.Schedule)
	}
	repairs := 0
	for _, st := range c.Stages {
		for _, a := range st.Actions {
			if a.Builtin != "" {
				continue
			}
			repairs++
			// The command keeps ${sibling}; the var fills it at run time.
			if got := steps.ShowCommand(a.Action, c.Vars); got != `systemctl start "breeze-watchdog"` {
				t.Errorf("command %q (%q): the supervisor may only start its sibling", got, a.Action)
			}
			if a.Guard.SlowRetry != nil || a.Guard.EscalateAfter != 0 {
				t.Errorf("the start row overrides the contract's guards: %+v", a.Guard)
			}
		}
	}
	if repairs != 1 {
		t.Errorf("%d repair rows, want the one start", repairs)
	}
	if sr := c.Guards.SlowRetry; !sr.On() || sr.After != 3 || sr.Factor != 5 {
		t.Errorf("slow_retry = %v, want after 3 failed starts every 5x the interval", sr)
	}
	if c.Guards.EscalateAfter != 0 || c.Guards.CrashLoop.MaxRestarts != 0 || c.Guards.Budget != nil {
		t.Errorf("escalate_after %d, crash_loop %+v, budget %v: the supervisor must keep trying", c.Guards.EscalateAfter, c.Guards.CrashLoop, c.Guards.Budget)
	}
}

// TestSystemdHADropIn checks the HA drop-in replaces the unit's ExecStart
// (an empty ExecStart= first, or systemd refuses a second one) with a
// serve that joins a group on etcd, with every flag its comment names.
func TestSystemdHADropIn(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "systemd", "contractd-ha.conf"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	clear := strings.Index(src, "\nExecStart=\n")
	set := strings.Index(src, "\nExecStart=/usr/local/bin/contractd serve")
	if clear < 0 || set < clear {
		t.Fatalf("the drop-in must clear ExecStart= before it sets its own:\n%s", src)
	}
	for _, want := range []string{"[Service]", "--etcd https://", "--node %H", "--lease-ttl", "--etcd-cacert", "--etcd-cert", "--etcd-key", "--token-file", "contractd.service.d/ha.conf"} {
		if !strings.Contains(src, want) {
			t.Errorf("contractd-ha.conf lacks %q", want)
		}
	}
}
