package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/wait"
	"github.com/contractd/contractd/transports"
)

// slowFix is a contract whose one stage is always stopped and whose one
// repair runs action, with guards in the row's Guards column.
func slowFix(action, guards string) string {
	return "---\n" + `kind: responsibility
name: slowfix
version: 1.0.0
runtime_contract: 2
agent: svc
guards: {grace: 0s}
targets:
  box: {local: true}
` + "---\n" + `
# Slow fix

## Execution

### Svc {#svc agent=svc on=box}

` + "```sh {id=st}\necho stopped\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`running`" + ` | ` + "`stopped`" + ` |

| Condition | Action | Guards |
|-----------|--------|--------|
| ` + "`st.stdout == \"stopped\"`" + ` | ` + "`" + action + "`" + ` | ` + guards + ` |
`
}

// TestRepairThatHitItsTimeoutSaysSo: a repair stopped by the repair
// timeout is failed with the timeout in its reason, never "exit code 0".
func TestRepairThatHitItsTimeoutSaysSo(t *testing.T) {
	rep := runOnPool(t, localPool(t, transports.PoolOptions{}), parse(t, slowFix("sleep 60", "")), Options{StepTimeout: time.Second})
	if len(rep.Actions) != 1 {
		t.Fatalf("actions %+v", rep.Actions)
	}
	a := rep.Actions[0]
	if a.Status != ActionFailed || !strings.Contains(a.Reason, "timed out after 1s (the repair timeout)") || strings.Contains(a.Reason, "exit code") {
		t.Fatalf("status %q reason %q; want failed, saying it timed out", a.Status, a.Reason)
	}
}

// A row's timeout= is its repair's timeout, whichever way it differs from
// the default: a shorter one kills the command (and what it started) and
// fails the repair saying so; a longer one lets a slow command finish.
func TestRepairTimeoutOfTheRow(t *testing.T) {
	t.Run("shorter than the default", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		// The engine's default (30s) stays; the row allows 1s.
		rep := runOnPool(t, localPool(t, transports.PoolOptions{}),
			parse(t, slowFix("sh -c 'echo $$ > "+pidFile+"; exec sleep 60'", "timeout=1s")), Options{})
		if len(rep.Actions) != 1 {
			t.Fatalf("actions %+v", rep.Actions)
		}
		a := rep.Actions[0]
		if a.Status != ActionFailed || !strings.Contains(a.Reason, "timed out after 1s (the repair timeout) and was killed") {
			t.Fatalf("status %q reason %q; want failed after the row's 1s", a.Status, a.Reason)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("the repair did not start: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		wait.For(t, "the timed-out repair's sleep to be gone", func() bool {
			return syscall.Kill(pid, 0) == syscall.ESRCH
		})
	})
	t.Run("longer than the default", func(t *testing.T) {
		// The engine's default is 1s; the row allows 30s for a 2s start.
		rep := runOnPool(t, localPool(t, transports.PoolOptions{}), parse(t, slowFix("sleep 2; echo started", "timeout=30s")), Options{StepTimeout: time.Second})
		if len(rep.Actions) != 1 {
			t.Fatalf("actions %+v", rep.Actions)
		}
		if a := rep.Actions[0]; a.Status != ActionRan || a.Stdout != "started\n" {
			t.Fatalf("status %q reason %q stdout %q; want ran to the end within the row's 30s", a.Status, a.Reason, a.Stdout)
		}
	})
}
