package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/transports"
)

// TestStartThatOnlyReachedPendingIsUndecided: a repair whose verification
// finds its condition gone but the unit only starting (degraded, not
// healthy) is undecided in the report, and its message says so; it never
// says "repaired". A repair that leaves the unit healthy is remediated.
func TestStartThatOnlyReachedPendingIsUndecided(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := "---\n" + `kind: responsibility
name: starter
version: 1.0.0
runtime_contract: 2
agent: svc
guards: {grace: 0s}
targets:
  box: {local: true}
notify:
  - {log: {path: "` + filepath.Join(dir, "messages.log") + `"}}
` + "---\n" + `
# Starter

## Execution

### Svc {#svc agent=svc on=box}

` + "```sh {id=st}\ncat " + state + "\n```" + `

| Field | Healthy | Degraded | Critical |
|-------|---------|----------|----------|
| ` + "`stdout`" + ` | ` + "`running`" + ` | ` + "`starting`" + ` | ` + "`stopped`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`st.stdout == \"stopped\"`" + ` | ` + "`cat " + filepath.Join(dir, "next") + " > " + state + "`" + ` |
`
	c := parse(t, src)
	pool := localPool(t, transports.PoolOptions{})
	for _, tc := range []struct{ next, verify, word string }{
		{"starting", guard.Undecided, "undecided"},
		{"running", guard.Remediated, "repaired"},
	} {
		os.WriteFile(state, []byte("stopped\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "next"), []byte(tc.next+"\n"), 0o644)
		rep := runOnPool(t, pool, c, Options{})
		if len(rep.Actions) != 1 || rep.Actions[0].Verify != tc.verify {
			t.Fatalf("%s: actions %+v; want verify %q", tc.next, rep.Actions[0], tc.verify)
		}
		var texts []string
		for _, a := range rep.Alerts {
			texts = append(texts, a.Text)
		}
		all := strings.Join(texts, "\n")
		if !strings.Contains(all, tc.word) || (tc.verify == guard.Undecided && strings.Contains(all, "repaired")) {
			t.Fatalf("%s: messages %q; want them to say %q", tc.next, all, tc.word)
		}
	}
}
