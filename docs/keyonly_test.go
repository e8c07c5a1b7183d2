package docs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/users"
	"github.com/contractd/contractd/transports"
)

// TestKeyOnlyLoginUserAsDocumented: the commands transports.md gives for a
// key-only login user, run as written (a throwaway user name, the test
// sshd's key) against a real sshd that reads ~/.ssh/authorized_keys: the
// account useradd makes is refused while it is locked, and logs in with
// its key once `usermod -p '*'` has run.
var keyOnlyRuns atomic.Int32

func TestKeyOnlyLoginUserAsDocumented(t *testing.T) {
	need.Root(t, "creating a login user")
	need.SSHD(t)
	need.Command(t, "useradd", "passwd")
	page, err := os.ReadFile("transports.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(useradd .*?)```").FindSubmatch(page)
	if block == nil {
		t.Fatal("transports.md shows no commands that create a login user (a sh block starting with useradd)")
	}
	// One name per test, never reused: a user this process made before
	// may not be gone yet.
	name := fmt.Sprintf("cdk%d%d", os.Getpid()%100000, keyOnlyRuns.Add(1))
	// Registered first, so it runs last: once sshd and the user's sessions
	// are gone (userdel refuses a user with processes).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := users.Run(ctx, "userdel", "-r", name); err != nil && !strings.Contains(string(out), "does not exist") {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sshd.Start(ctx, sshd.Options{Dir: t.TempDir(), QuietLogin: true, ExtraConfig: "AuthorizedKeysFile .ssh/authorized_keys\nStrictModes yes"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	pub := filepath.Join(s.Dir, "authorized_keys")
	run := func(lines []string) {
		t.Helper()
		script := strings.NewReplacer("contractd", name, "id_ed25519.pub", pub).Replace(strings.Join(lines, "\n"))
		// Whole again while another test holds the account files' lock:
		// useradd is the script's first command, and a run it refused did
		// nothing else.
		if out, err := users.WhileLocked(ctx, func() ([]byte, error) { return exec.CommandContext(ctx, "sh", "-ec", script).CombinedOutput() }); err != nil {
			t.Fatalf("%s\n%v: %s", script, err, out)
		}
	}
	login := func() (string, error) {
		pool := transports.NewPool(transports.PoolOptions{})
		defer pool.Close()
		tr, err := pool.Open(&transports.Spec{Kind: "ssh", User: name, Host: s.Host, Port: s.Port, Identity: []string{s.IdentityFile}, KnownHosts: s.KnownHostsFile})
		if err != nil {
			return "", err
		}
		res, err := tr.Exec(ctx, transports.Command{Script: "id -un", Shell: "sh", Timeout: 20 * time.Second})
		return strings.TrimSpace(res.Stdout), err
	}
	var unlock, rest []string
	for _, l := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		if strings.HasPrefix(l, "usermod ") {
			unlock = append(unlock, l)
		} else {
			rest = append(rest, l)
		}
	}
	if len(unlock) != 1 {
		t.Fatalf("the commands hold %d usermod lines, want the one that unlocks the account:\n%s", len(unlock), block[1])
	}
	run(rest)
	if who, err := login(); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("a locked account logged in (%q, %v): the usermod line would not be needed", who, err)
	}
	run(unlock)
	if who, err := login(); err != nil || who != name {
		t.Fatalf("after the documented commands: login as %s = %q, %v", name, who, err)
	}
}
