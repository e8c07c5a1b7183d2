package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
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
	c, diags := contracts.Parse("slowfix.md", []byte(src), contracts.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	pool := transports.NewPool(transports.PoolOptions{})
	defer pool.Close()
	eng, err := New(Options{StateDir: t.TempDir(), Opener: PoolOpener{Pool: pool}, StepTimeout: time.Second, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := eng.Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Actions) != 1 {
		t.Fatalf("actions %+v", rep.Actions)
	}
	a := rep.Actions[0]
	if a.Status != ActionFailed || !strings.Contains(a.Reason, "timed out after 1s (the repair timeout)") || strings.Contains(a.Reason, "exit code") {
		t.Fatalf("status %q reason %q; want failed, saying it timed out", a.Status, a.Reason)
	}
}
