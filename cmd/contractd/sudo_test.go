package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/users"
	"github.com/contractd/contractd/transports"
)

// serviceCtl is the service the sudo test keeps up: its state is a file
// only root may write, `status` prints it for anyone, `restart` brings it
// up and writes who restarted it to a call log. Installed root-owned.
const serviceCtl = `#!/bin/sh
d=$(dirname "$0")
case "$1" in
status) cat "$d/state" ;;
restart) echo "restart $2 uid=$(id -u)" >> "$d/calls" && echo up > "$d/state" ;;
*) echo "svcctl: unexpected $*" >> "$d/calls"; exit 2 ;;
esac
`

// sudoContract is flagship-shaped: a target reached over ssh as a login
// that is not root, with sudo: true; probes as that login; one repair.
const sudoContract = `---
kind: responsibility
name: websudo
runtime_contract: 2
agent: web
guards:
  debounce: 0s
targets:
  web: {ssh: %s, sudo: true, known_hosts: %s, identity: [%s]}
vars:
  svcctl: %s
  unit: web
---

## Execution

### Web {#web agent=web on=web}

` + "```bash {id=svc timeout=10s}\n\"${svcctl}\" status \"${unit}\"\n```" + `

| Field | Healthy | Critical |
|---|---|---|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`it != \"up\"`" + ` |

` + "```bash {id=who timeout=10s}\nid -un\n```" + `

` + "```bash {id=rootid timeout=10s sudo=true}\nid -u\n```" + `

| Condition | Action |
|---|---|
| ` + "`svc.stdout != \"up\"`" + ` | ` + "`${svcctl} restart \"${unit}\"`" + ` |
`

// TestRepairThroughSudoOverSSH logs in to a real OpenSSH sshd as a real
// unprivileged user: the probes run as that user, the restart runs as
// root through Debian's sudo with the lines `contractd sudoers` printed
// installed in /etc/sudoers.d, one-shot and through a resident session.
// With the lines removed the repair fails with sudo's own words in the
// report, and nothing else runs.
func TestRepairThroughSudoOverSSH(t *testing.T) {
	need.Root(t, "creating a user and writing /etc/sudoers.d")
	useradd := need.Command(t, "useradd", "passwd")
	visudo := need.Command(t, "visudo", "sudo")
	need.Command(t, "sudo", "sudo")
	need.SSHD(t)

	var rnd [4]byte
	rand.Read(rnd[:])
	login := "ctd" + hex.EncodeToString(rnd[:])
	// Outside t.TempDir (0700, root's): the login needs its home, and the
	// service's files must be readable by it.
	base, err := os.MkdirTemp("", "contractd-sudo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	run := func(name string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := users.Run(ctx, name, args...); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run(useradd, "-m", "-d", filepath.Join(base, "home"), "-s", "/bin/sh", login)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		users.Run(ctx, "userdel", login)
	})
	// useradd locks the password ("!"), and sshd without PAM refuses any
	// login to a locked account, keys included: "*" is no password, unlocked.
	run("usermod", "-p", "*", login)

	svc := filepath.Join(base, "svc")
	if err := os.Mkdir(svc, 0o755); err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(svc, "svcctl")
	os.WriteFile(ctl, []byte(serviceCtl), 0o755)
	setState := func(s string) { os.WriteFile(filepath.Join(svc, "state"), []byte(s+"\n"), 0o644) }
	readFile := func(name string) string { b, _ := os.ReadFile(filepath.Join(svc, name)); return string(b) }
	setState("down")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := sshd.Start(ctx, sshd.Options{User: login, QuietLogin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })

	dir := t.TempDir()
	contract := filepath.Join(dir, "websudo.md")
	src := fmt.Sprintf(sudoContract, login+"@"+srv.Addr, srv.KnownHostsFile, srv.IdentityFile, ctl)
	if err := os.WriteFile(contract, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	// The lines, as an operator installs them.
	code, lines, errs := runMain(t, "contractd", "sudoers", contract)
	id, _ := lookSudoPath("id")
	for _, want := range []string{login + " ALL=(root) NOPASSWD: " + ctl + " restart web\n", login + " ALL=(root) NOPASSWD: " + id + " -u\n"} {
		if code != 0 || !strings.Contains(lines, want) || strings.Count(lines, "NOPASSWD") != 2 {
			t.Fatalf("contractd sudoers: exit %d, want the restart's and the sudo step's lines, %q among them:\n%s%s", code, want, lines, errs)
		}
	}
	staged := filepath.Join(dir, "sudoers")
	os.WriteFile(staged, []byte(lines), 0o440)
	run(visudo, "-cf", staged)
	installed := "/etc/sudoers.d/contractd-test-" + login
	if err := os.WriteFile(installed, []byte(lines), 0o440); err != nil {
		t.Fatal(err)
	}
	removeLines := func() {
		if err := os.Remove(installed); err != nil && !os.IsNotExist(err) {
			t.Error(err)
		}
	}
	t.Cleanup(removeLines)

	// One-shot: the CLI, a fresh session per run.
	state := filepath.Join(dir, "state")
	code, out, errs := runMain(t, "contractd", "run", "--json", "--quiet", "--verify-grace", "10ms", "--state-dir", state, contract)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if who, root := stepOut(&rep, "who"), stepOut(&rep, "rootid"); who != login || root != "0" {
		t.Errorf("probes ran as %q, the sudo=true step as uid %q; want the login %s (unprivileged), and 0", who, root, login)
	}
	a := onlyRepair(t, &rep)
	if a.Status != engine.ActionRan || !a.Sudo || a.Verify != "remediated" {
		t.Errorf("repair: %+v, want it ran through sudo and was verified", a)
	}
	if got := readFile("calls"); got != "restart web uid=0\n" {
		t.Errorf("calls %q: want one restart, as root", got)
	}

	// The daemon's way: resident sessions, the same lines.
	pool := transports.NewPool(transports.PoolOptions{Resident: &transports.ResidentOptions{}})
	t.Cleanup(func() { pool.Close() })
	eng, err := engine.New(engine.Options{StateDir: state, Opener: engine.PoolOpener{Pool: pool}, GraceOverride: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, ds := contracts.LoadFile(contract, contracts.Options{})
	if c == nil {
		t.Fatal(ds)
	}
	resident := func(what string) *engine.Report {
		t.Helper()
		rep, err := eng.Run(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := pool.ResidentSessions(); len(n) == 0 {
			t.Fatalf("%s: no resident session", what)
		}
		return rep
	}
	resident("warm-up") // healthy: starts the resident session
	setState("down")
	r2 := resident("resident repair")
	if a := onlyRepair(t, r2); a.Status != engine.ActionRan || !a.Sudo || a.Verify != "remediated" || stepOut(r2, "who") != login || stepOut(r2, "rootid") != "0" {
		t.Errorf("resident repair: %+v (probes as %q)", a, stepOut(r2, "who"))
	}
	if got := readFile("calls"); got != "restart web uid=0\nrestart web uid=0\n" {
		t.Errorf("calls %q: want a second restart, as root", got)
	}

	// Without the lines: sudo refuses, the report says so in sudo's
	// words, and nothing else runs (no second try without sudo).
	removeLines()
	setState("down")
	r3 := resident("no sudoers lines")
	a = onlyRepair(t, r3)
	if a.Status != engine.ActionFailed || !a.Sudo || !strings.Contains(a.Stderr, "sudo: a password is required") || !strings.Contains(a.Reason, "sudo: a password is required") {
		t.Errorf("repair without the lines: %+v, want failed with sudo's words", a)
	}
	if got := readFile("calls"); got != "restart web uid=0\nrestart web uid=0\n" {
		t.Errorf("calls %q: something ran without the sudoers lines", got)
	}
	if got := readFile("state"); got != "down\n" {
		t.Errorf("state %q: the service was touched", got)
	}
}

func stepOut(rep *engine.Report, id string) string {
	for _, st := range rep.Stages {
		for _, s := range st.Steps {
			if s.ID == id {
				return strings.TrimSpace(s.Stdout)
			}
		}
	}
	return ""
}

// onlyRepair returns the report's one repair action, failing the test
// when there is not exactly one.
func onlyRepair(t *testing.T, rep *engine.Report) *engine.ActionReport {
	t.Helper()
	var out []*engine.ActionReport
	for _, a := range rep.Actions {
		if a.Kind == engine.KindRepair {
			out = append(out, a)
		}
	}
	if len(out) != 1 {
		b, _ := json.MarshalIndent(rep.Actions, "", "  ")
		t.Fatalf("%d repair actions, want 1:\n%s\nerrors: %v", len(out), b, rep.Errors)
	}
	return out[0]
}
