package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
)

const inputsHead = "---\nkind: responsibility\nname: inputs\nruntime_contract: 2\nvars: {port: \"9100\"}\n"
const inputsBody = "---\n\n## Execution\n\n### Box {#box on=local}\n\n```bash {id=probe}\necho \"$port\"\n```\n\nExpected: `9100`\n"

func writeFile(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The 40 KB nesting bomb that took 660 MB in lint is refused with its
// position (`/usr/bin/time -v contractd lint` figures: docs/contract-format.md).
func TestLintRefusesANestingBomb(t *testing.T) {
	bomb := writeFile(t, "bomb.md", inputsHead+"for_each: "+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+"\n"+inputsBody)
	code, out, _ := runMain(t, "contractd", "lint", bomb)
	if want := bomb + ":6:42: error: YAML: nested deeper than 32 levels (a limit of contracts and inventories)\n"; code != 1 || out != want {
		t.Fatalf("lint: exit %d\n%s\nwant exit 1 and %s", code, out, want)
	}
}

func TestMaxFileSizeFlag(t *testing.T) {
	big := writeFile(t, "big.md", inputsHead+inputsBody+"\n"+strings.Repeat("A long line of prose. ", 60000)+"\n")
	code, out, _ := runMain(t, "contractd", "lint", big)
	if code != 1 || !strings.Contains(out, big+":1:1: error: contract is 1.26 MiB, larger than the 1 MiB limit (raise the limit with --max-file-size)") {
		t.Errorf("default limit: exit %d\n%s", code, out)
	}
	if code, out, _ := runMain(t, "contractd", "lint", "--max-file-size", "2MiB", big); code != 0 {
		t.Errorf("--max-file-size 2MiB: exit %d\n%s", code, out)
	}
	if code, _, errs := runMain(t, "contractd", "run", "--max-file-size", "lots", big); code != 2 || !strings.Contains(errs, `invalid value "lots" for flag -max-file-size: size "lots": want a number of bytes or e.g. 4MiB`) {
		t.Errorf("a bad size: exit %d\n%s", code, errs)
	}
}

// A --var must name a var the contract reads; a typo is an error with a
// suggestion, never silently ignored.
func TestVarTheContractDoesNotDeclareIsAnError(t *testing.T) {
	c := writeFile(t, "inputs.md", inputsHead+inputsBody)
	for _, cmd := range []string{"run", "lint", "explain"} {
		code, _, errs := runMain(t, "contractd", cmd, "--var", "nosuch=1", c)
		if code != 2 || !strings.Contains(errs, `contractd: --var nosuch: inputs declares no var "nosuch" (its vars: port)`) {
			t.Errorf("%s --var nosuch=1: exit %d\n%s", cmd, code, errs)
		}
		code, _, errs = runMain(t, "contractd", cmd, "--var", "prot=1", c)
		if code != 2 || !strings.Contains(errs, `(did you mean "port"?)`) {
			t.Errorf("%s --var prot=1: exit %d\n%s", cmd, code, errs)
		}
	}
	if code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", t.TempDir(), "--var", "port=9100", c); code != 0 || !strings.Contains(out, "HEALTHY") {
		t.Errorf("a declared var: exit %d\n%s%s", code, out, errs)
	}
}

// accept-new says which key it recorded, for which host, even from a quiet
// one-shot run.
func TestAcceptNewSaysWhichKeyItRecorded(t *testing.T) {
	need.SSHD(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sshd.Start(ctx, sshd.Options{QuietLogin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	kh := filepath.Join(t.TempDir(), "known_hosts")
	src := strings.Replace(inputsHead, "vars:", fmt.Sprintf("targets:\n  box: {ssh: %q, identity: [%q], known_hosts: %q, host_key: accept-new}\nvars:", s.User+"@"+s.Addr, s.IdentityFile, kh), 1) +
		strings.Replace(inputsBody, "on=local", "on=box", 1)
	c := writeFile(t, "inputs.md", src)
	code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", t.TempDir(), c)
	if code != 0 || !strings.Contains(out, "HEALTHY") {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}
	want := fmt.Sprintf("accepted new host key for %s: ssh-ed25519 %s, recorded in %s", s.Addr, s.HostKeyFingerprint, kh)
	if !strings.Contains(errs, want) {
		t.Errorf("stderr does not name the recorded key (want %q):\n%s", want, errs)
	}
	if b, _ := os.ReadFile(kh); !strings.Contains(string(b), fmt.Sprintf("[%s]:%d ssh-ed25519 ", s.Host, s.Port)) {
		t.Errorf("known_hosts = %q", b)
	}
	// The second run finds the key recorded and says nothing about keys.
	if _, _, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", t.TempDir(), c); strings.Contains(errs, "accepted new host key") {
		t.Errorf("second run accepted again:\n%s", errs)
	}
}
