package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Every shipped contract has a test file, and `contractd test` passes on
// each: the real engine, driven by recorded outputs and a fake clock,
// comes to the severities, actions and alerts its author wrote down.
func TestEveryShippedContractPassesItsTestFile(t *testing.T) {
	contracts, _ := filepath.Glob("../../fixtures/contracts/*.md")
	if len(contracts) == 0 {
		t.Fatal("no contracts in fixtures/contracts")
	}
	for _, c := range contracts {
		t.Run(filepath.Base(c), func(t *testing.T) {
			tf := strings.TrimSuffix(c, ".md") + ".test.yaml"
			if _, err := os.Stat(tf); err != nil {
				t.Fatalf("%s has no test file %s (docs/contract-format.md, \"Testing a contract\")", c, filepath.Base(tf))
			}
			code, out, errs := runMain(t, "contractd", "test", tf)
			if code != 0 || !strings.HasPrefix(out, "ok ") {
				t.Fatalf("contractd test %s: exit %d\n%s%s", tf, code, out, errs)
			}
		})
	}
}

// A wrong expectation fails the test with a readable diff: the severity
// expected against the one seen, and "-" for an expected action the run
// did not take, "+" for one it took. A test file that does not parse is
// an error at its line and column.
func TestContractTestShowsADiffOnAWrongExpectation(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../fixtures/contracts/a2a-selfheal.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Replace(string(src), "status: ran, action: systemctl --user restart lab-a2a-sol, verify: remediated", "status: ran, action: systemctl --user restart lab-a2a-ace, verify: remediated", 1)
	wrong = strings.Replace(wrong, "      agents: {sol: critical}", "      agents: {sol: healthy}", 1)
	if wrong == string(src) {
		t.Fatal("the test file no longer has the lines this test changes")
	}
	tf := filepath.Join(dir, "a2a-selfheal.test.yaml")
	os.WriteFile(tf, []byte("contract: "+mustAbs(t, "../../fixtures/contracts/a2a-selfheal.md")+"\n"+wrong), 0o644)
	code, out, errs := runMain(t, "contractd", "test", tf)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"FAIL  " + tf + "  (a2a-selfheal: 2 of 4 runs differ)",
		`run 2 "wedged - restarted and verified": differs`,
		"- action {agent: sol, status: ran, action: systemctl --user restart lab-a2a-ace, verify: remediated}   (expected; the run did not take it)",
		"+ action {agent: sol, stage: sol, status: ran, action: systemctl --user restart lab-a2a-sol, verify: remediated,",
		"agent sol: want healthy, got critical",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	bad := filepath.Join(dir, "bad.test.yaml")
	os.WriteFile(bad, []byte("runs:\n  - name: x\n    stepz: {}\n"), 0o644)
	code, _, errs = runMain(t, "contractd", "test", bad)
	if code != 2 || !strings.Contains(errs, bad+":3:5:") {
		t.Fatalf("a mistyped key: exit %d, %q; want 2 and the key's line:col", code, errs)
	}
	missing := filepath.Join(dir, "gap.test.yaml")
	os.WriteFile(missing, []byte("contract: "+mustAbs(t, "../../fixtures/contracts/a2a-selfheal.md")+"\nruns:\n  - steps:\n      sol/health: {http: {status: 200, body: {status: running}}}\n"), 0o644)
	code, out, _ = runMain(t, "contractd", "test", missing)
	if code != 1 || !strings.Contains(out, "step sol/dispatch: no recorded output") {
		t.Fatalf("a step without a recording: exit %d\n%s", code, out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The test file in docs/contract-format.md ("Testing a contract") passes
// as written.
func TestDocumentedTestFilePasses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contract-format.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "```yaml\n# a2a-selfheal.test.yaml"
	i := strings.Index(string(doc), start)
	if i < 0 {
		t.Fatal("docs/contract-format.md has no a2a-selfheal.test.yaml example")
	}
	body := string(doc[i+len("```yaml\n"):])
	body = body[:strings.Index(body, "```")]
	tf := filepath.Join(t.TempDir(), "a2a-selfheal.test.yaml")
	os.WriteFile(tf, []byte("contract: "+mustAbs(t, "../../fixtures/contracts/a2a-selfheal.md")+"\n"+body), 0o644)
	if code, out, errs := runMain(t, "contractd", "test", tf); code != 0 {
		t.Fatalf("the documented test file: exit %d\n%s%s", code, out, errs)
	}
}

// everyKindContract has a step of each built-in kind on a target nothing
// answers on: an ssh host on a closed port, and a listener that counts
// every connection it is offered.
const everyKindContract = `---
name: every-kind
runtime_contract: 2
targets:
  far: {ssh: "nobody@127.0.0.1:{{closed}}"}
vars:
  addr: "{{addr}}"
---

## Execution

### Bash {#bash agent=b on=far}

` + "```bash {id=b}\nsystemctl is-active web\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`exit_code`" + ` | 0 | != 0 |

### Sh {#sh agent=s on=far}

` + "```sh {id=s}\ntest -f /run/web.pid\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`exit_code`" + ` | 0 | != 0 |

### HTTP {#http agent=h}

` + "```http {id=h}\nGET http://${addr}/health\n```" + `

Expected: ` + "`200`" + `

### TCP {#tcp agent=t}

` + "```tcp {id=t}\n${addr}\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`open`" + ` | true | false |

### Nagios {#nagios agent=n on=far}

` + "```nagios {id=n}\ncheck_procs -C web -c 1:\n```" + `
`

// TestContractTestReplaysEveryKindWithNoTargetReached: a recording with
// `exit: 1` for every step kind comes to the verdict its table gives that
// answer (an exit code of 1, an http probe that got no answer, a tcp port
// not open: each agent critical; a plugin's WARNING: degraded), healthy
// answers to healthy, and no step
// is run or dialled: the
// exec steps' ssh target is a closed port and the http and tcp steps'
// listener counts no connection.
func TestContractTestReplaysEveryKindWithNoTargetReached(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var dialled atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			c.Close()
		}
	}()
	dir := t.TempDir()
	contract := strings.NewReplacer("{{closed}}", strings.TrimPrefix(closedPort(t), "127.0.0.1:"), "{{addr}}", l.Addr().String()).Replace(everyKindContract)
	test := `runs:
  - name: every step exits 1
    steps:
      bash/b: {exit: 1}
      sh/s: {exit: 1}
      http/h: {exit: 1}
      tcp/t: {exit: 1}
      nagios/n: {exit: 1, stdout: "PROCS WARNING: 2 processes with command name 'web' | procs=2;1;1:;0;"}
    expect:
      overall: critical
      agents: {b: critical, s: critical, h: critical, t: critical, n: degraded}
  - name: every step answers
    steps:
      bash/b: {stdout: active}
      sh/s: {exit: 0}
      http/h: {http: {status: 200}}
      tcp/t: {exit: 0}
      nagios/n: {stdout: "PROCS OK: 1 process with command name 'web' | procs=1;;1:;0;"}
    expect:
      overall: healthy
      agents: {b: healthy, s: healthy, h: healthy, t: healthy, n: healthy}
`
	for name, text := range map[string]string{"every-kind.md": contract, "every-kind.test.yaml": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runMain(t, "contractd", "test", "-v", filepath.Join(dir, "every-kind.test.yaml"))
	if code != 0 || !strings.HasPrefix(out, "ok ") {
		t.Fatalf("contractd test: exit %d\n%s%s", code, out, errs)
	}
	if n := dialled.Load(); n != 0 {
		t.Fatalf("the replay connected %d times to the step's address", n)
	}
}
