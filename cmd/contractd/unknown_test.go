package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/engine/notify"
)

// blindContract reads a JSON field a status file may lack: a service that
// renamed the field it reports leaves the row, and the unit, unknown.
const blindContract = `---
name: blind
runtime_contract: 2
notify:
  - {webhook: {url: "http://{{hook}}/hook", retries: 0, timeout: 5s}}
---

## Execution

### Queue {#queue agent=queue}

` + "```sh {id=status as=json}\ncat {{status}}\n```" + `

` + "```json {example=status}\n{\"depth\": 3}\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`depth`" + ` | < 100 | >= 100 |
`

// TestUnknownForThreeRunsAlertsOnceAndResolves, with the real binary and
// a real webhook listener: a contract left unknown for 3 runs sends
// exactly one message (nothing before, nothing after while it stays
// unknown), run --nagios says UNKNOWN and exits 3, and when the unit is
// judged again one message resolves it.
func TestUnknownForThreeRunsAlertsOnceAndResolves(t *testing.T) {
	bin := binary(t)
	hook := startReceiver(t, "127.0.0.1:0")
	dir := t.TempDir()
	status, state := filepath.Join(dir, "status.json"), filepath.Join(dir, "state")
	contract := filepath.Join(dir, "blind.md")
	text := strings.NewReplacer("{{hook}}", hook.addr, "{{status}}", status).Replace(blindContract)
	for _, f := range [][2]string{{contract, text}, {status, `{"queue_depth": 3}`}} {
		if err := os.WriteFile(f[0], []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(bin, "lint", "--strict", contract).CombinedOutput(); err != nil {
		t.Fatalf("lint --strict: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"run", "--quiet", "--state-dir", state}, append(args, contract)...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	messages := func() []notify.Message {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		return append([]notify.Message(nil), hook.bodies...)
	}
	for i := 1; i <= 2; i++ {
		if code, out := run(); code != 0 || len(messages()) != 0 {
			t.Fatalf("unknown run %d: exit %d, %d messages (want 0 before unknown_after)\n%s", i, code, len(messages()), out)
		}
	}
	if code, out := run(); code != 0 || len(messages()) != 1 {
		t.Fatalf("third unknown run: exit %d, messages %+v; want exactly one\n%s", code, messages(), out)
	}
	if m := messages()[0]; m.Kind != notify.KindOpen || m.Condition != "unknown" || !strings.Contains(m.Text, "queue is unknown, 3 runs in a row") {
		t.Fatalf("the message: %+v", m)
	}
	code, out := run("--nagios")
	if code != 3 || !strings.HasPrefix(out, "BLIND UNKNOWN - ") {
		t.Fatalf("run --nagios: exit %d\n%s\nwant UNKNOWN and exit 3", code, out)
	}
	if n := len(messages()); n != 1 {
		t.Fatalf("still unknown: %d messages, want the one", n)
	}
	if err := os.WriteFile(status, []byte(`{"depth": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run(); code != 0 {
		t.Fatalf("judged again: exit %d\n%s", code, out)
	}
	got := messages()
	if len(got) != 2 || got[1].Kind != notify.KindResolved || got[1].Condition != "unknown" {
		t.Fatalf("judged again: messages %+v; want the open and one resolve", got)
	}
	if code, out := run("--nagios"); code != 0 || !strings.HasPrefix(out, "BLIND OK - ") {
		t.Fatalf("healthy: run --nagios exit %d\n%s", code, out)
	}
	if n := len(messages()); n != 2 {
		t.Fatalf("healthy again: %d messages, want 2", n)
	}
}
