package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/transports"
)

// TestRepairThatHitItsTimeoutSaysSo: a repair stopped by the repair
// timeout is failed with the timeout in its reason, never "exit code 0".
func TestRepairThatHitItsTimeoutSaysSo(t *testing.T) {
	src := "---\n" + `kind: responsibility
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

| Condition | Action |
|-----------|--------|
| ` + "`st.stdout == \"stopped\"`" + ` | ` + "`sleep 60`" + ` |
`
	rep := runOnPool(t, localPool(t, transports.PoolOptions{}), parse(t, src), Options{StepTimeout: time.Second})
	if len(rep.Actions) != 1 {
		t.Fatalf("actions %+v", rep.Actions)
	}
	a := rep.Actions[0]
	if a.Status != ActionFailed || !strings.Contains(a.Reason, "timed out after 1s (the repair timeout)") || strings.Contains(a.Reason, "exit code") {
		t.Fatalf("status %q reason %q; want failed, saying it timed out", a.Status, a.Reason)
	}
}
