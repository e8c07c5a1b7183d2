package contracts

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const explainSrc = `---
name: lanes
runtime_contract: 2
report_only_agents: [beta]
vars: {warn_pct: 80, ratio: 0.5, paging: true, unit: web, who: ops}
targets:
  pve: {ssh: root@10.0.0.1}
  ct: {via: pve, pct: 112}
for_each:
  lanes:
    - {name: alpha, host: pve}
    - {name: beta, host: ct}
---

## Execution

### Disk {#disk agent=$who}

` + "```sh {id=df}\necho 1\n```" + `

Expected: ` + "`1`" + `

### Lanes {#lanes agent=$name on=$host for_each=lanes}

` + "```sh {id=lane}\necho 1\n```" + `

Expected: ` + "`1`" + `
`

// explain shows each var with its declared type, and a for_each stage's
// agent= and on= filled in for every item, as the run fills them.
func TestExplainVarsAndItems(t *testing.T) {
	c, ds := Parse("lanes.md", []byte(explainSrc), Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	explainSays(t, c,
		"  warn_pct     80\n", "  ratio        0.5\n", "  paging       true\n", `  unit         "web"`+"\n",
		"   agent ops, on local\n",
		"   once for each item of lanes:\n",
		"     lanes[alpha]: agent alpha, on pve (ssh root@10.0.0.1)\n",
		"     lanes[beta]: agent beta, on ct (ssh root@10.0.0.1 → pct 112) [report-only]\n",
	)
	raw, err := json.Marshal(Explain(c))
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Vars []struct {
			Name  string
			Value any
		}
		Stages []struct {
			Agent string
			Items []struct {
				ID, Agent, On, Target string
				ReportOnly            bool `json:"report_only"`
			}
		}
	}
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, v := range plan.Vars {
		got[v.Name] = v.Value
	}
	for name, want := range map[string]any{"warn_pct": 80.0, "ratio": 0.5, "paging": true, "unit": "web"} {
		if got[name] != want {
			t.Errorf("explain --json: vars %s is %#v, want %#v", name, got[name], want)
		}
	}
	if plan.Stages[0].Agent != "ops" {
		t.Errorf("agent=$who: explain --json says %q, want ops", plan.Stages[0].Agent)
	}
	items := plan.Stages[1].Items
	if len(items) != 2 || items[1].ID != "lanes[beta]" || items[1].Agent != "beta" || items[1].On != "ct" || !items[1].ReportOnly {
		t.Errorf("explain --json items: %+v", items)
	}
}

// explainSays fails t for each of want that c's explain text lacks.
func explainSays(t *testing.T, c *Contract, want ...string) {
	t.Helper()
	var text bytes.Buffer
	if err := WriteExplainText(&text, c); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(text.String(), w) {
			t.Errorf("explain lacks %q:\n%s", w, text.String())
		}
	}
}
