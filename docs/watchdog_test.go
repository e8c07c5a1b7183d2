package docs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/lintrun"
)

// TestWatchdogExample runs the contract of mcp.md's "An agent as a
// watchdog" with the stand-in harness it names (a dry run: the repair it
// declares is a real systemctl line): lint is clean, a valid report is
// judged critical with the repair it documents, an invalid one is
// unknown, and every finding the run gives is the one the page shows.
func TestWatchdogExample(t *testing.T) {
	src, err := os.ReadFile("mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "\n## An agent as a watchdog\n")
	if !ok {
		t.Fatal(`mcp.md has no section "An agent as a watchdog"`)
	}
	section, _, _ = strings.Cut(section, "\n## Tested\n") // the next section; the contract has ## headings of its own
	_, contract, ok := strings.Cut(section, "````markdown\n---\n")
	if !ok {
		t.Fatal("the section shows no contract")
	}
	contract, _, _ = strings.Cut("---\n"+contract, "\n````\n")
	harness, err := filepath.Abs("../fixtures/scripts/standin-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		sev  contracts.Severity
		acts int
	}{
		{"valid", map[string]string{}, contracts.SeverityCritical, 1},
		{"invalid", map[string]string{"mode": "invalid", "report": `{"status": "down", "restarts": "4"}`}, contracts.SeverityUnknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.vars["harness"] = harness
			c, ds := contracts.Parse("web-watchdog.md", []byte(contract), contracts.Options{Vars: tc.vars})
			if ds.HasErrors() || len(ds) > 0 {
				t.Fatalf("lint --strict would refuse the example:\n%s", ds)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := lintrun.Run(ctx, c, lintrun.Options{StateDir: t.TempDir(), DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ConfigErrors) > 0 {
				t.Fatalf("configuration errors: %v", res.ConfigErrors)
			}
			rep := res.Report
			if len(rep.Stages) != 1 || len(rep.Stages[0].Steps) != 1 {
				t.Fatalf("the example's run has stages %+v, want one stage of one step", rep.Stages)
			}
			if rep.OverallSeverity != tc.sev || len(rep.Actions) != tc.acts {
				t.Fatalf("severity %v with %d actions, want %v with %d: %s", rep.OverallSeverity, len(rep.Actions), tc.sev, tc.acts, lintrun.Unhealthy(rep))
			}
			for _, a := range rep.Actions {
				if a.Action != "systemctl restart web" || !strings.Contains(section, a.Action) {
					t.Errorf("action %q is not the one the page shows", a.Action)
				}
			}
			for _, f := range rep.Stages[0].Steps[0].Findings {
				if shown := strings.ReplaceAll(f, "\n", `\n`); !strings.Contains(section, shown) {
					t.Errorf("the page does not show the finding %q", shown)
				}
			}
		})
	}
}
