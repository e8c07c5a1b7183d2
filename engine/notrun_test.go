package engine

import (
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// TestStepsAfterABrokenSessionAreUnreachable: when the session dies in the
// middle of a batch (here the shell running it is killed by the first
// step), the steps that never ran are unreachable, as documented, never
// critical with exit -1; the step that was running when it died is not
// judged either. One-shot and resident sessions alike.
func TestStepsAfterABrokenSessionAreUnreachable(t *testing.T) {
	src := "---\n" + `kind: responsibility
name: cut
version: 1.0.0
runtime_contract: 2
agent: box
targets:
  box: {local: true}
` + "---\n" + `
# Cut

## Execution

### Box {#box agent=box on=box}

` + "```bash {id=first}\necho fine\n```" + `

Expected: ` + "`fine`" + `

` + "```bash {id=killer}\nkill -KILL $$\n```" + `

Expected: ` + "`never`" + `

` + "```bash {id=after}\necho after\n```" + `

Expected: ` + "`after`" + `
`
	c := parse(t, src)
	for _, resident := range []bool{false, true} {
		opts := transports.PoolOptions{}
		if resident {
			opts.Resident = &transports.ResidentOptions{}
		}
		rep := runOnPool(t, localPool(t, opts), c, Options{})
		st := rep.Stages[0].Steps
		if len(st) != 3 || st[0].Severity != contracts.SeverityHealthy {
			t.Fatalf("resident %v: steps %+v", resident, st)
		}
		for _, s := range st[1:] {
			if s.Severity != contracts.SeverityUnreachable || s.Error == "" || s.ExitCode == -1 || s.TimedOut {
				t.Errorf("resident %v: step %s: severity %v, exit %d, timed out %v, error %q; want unreachable", resident, s.ID, s.Severity, s.ExitCode, s.TimedOut, s.Error)
			}
		}
	}
}
