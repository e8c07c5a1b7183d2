package contracts

import (
	"encoding/json"
	"strings"
	"testing"
)

// repairTimeoutSrc has one row per case of a repair's timeout: its own
// (timeout=2m), the default, and a built-in that runs nothing; rows gives
// the Guards cells of the three rows.
func repairTimeoutSrc(rows [3]string) string {
	return `---
name: slowstart
runtime_contract: 2
agent: svc
---

## Execution

### Svc {#svc agent=svc}

` + "```sh {id=st}\necho running\n```" + `

Expected: ` + "`running`" + `

| Condition | Action | Guards |
|-----------|--------|--------|
| ` + "`st.stdout == \"stopped\"`" + ` | ` + "`systemctl start svc`" + ` | ` + rows[0] + ` |
| ` + "`st.stdout == \"wedged\"`" + ` | ` + "`systemctl restart svc`" + ` | ` + rows[1] + ` |
| ` + "`st.stdout == \"gone\"`" + ` | Alert — svc is gone | ` + rows[2] + ` |
`
}

// A row's timeout= is the repair's timeout, shown by explain (text and
// JSON) beside the command; a row without one shows the default 30s, and
// a built-in action, which runs nothing, shows none.
func TestRepairTimeoutIsExplained(t *testing.T) {
	c, ds := Parse("slowstart.md", []byte(repairTimeoutSrc([3]string{"timeout=2m after=2", "", ""})), Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	explainSays(t, c,
		"→ run `systemctl start svc` on local (timeout 2m)\n",
		"→ run `systemctl restart svc` on local (timeout 30s)\n",
		"→ alert: Alert — svc is gone\n",
	)
	b, err := json.Marshal(Explain(c))
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Stages []struct {
			Actions []map[string]any `json:"actions"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	acts := plan.Stages[0].Actions
	if len(acts) != 3 || acts[0]["timeout"] != "2m" || acts[1]["timeout"] != "30s" {
		t.Fatalf("explain --json actions: %v", acts)
	}
	if _, set := acts[2]["timeout"]; set {
		t.Errorf("a built-in action has a timeout in explain --json: %v", acts[2])
	}
}

// A timeout that is not a positive duration, or one on a built-in action
// (which runs no command), is an error at the attribute.
func TestRepairTimeoutLint(t *testing.T) {
	cases := []struct {
		name string
		rows [3]string
		want string
	}{
		{"not a duration", [3]string{"timeout=soon", "", ""}, "slowstart.md:19:54: error: guards: timeout must be a duration like 60s, got \"soon\""},
		{"zero", [3]string{"", "timeout=0s", ""}, "slowstart.md:20:55: error: guards: timeout must be a duration like 60s, got \"0s\""},
		{"on a built-in", [3]string{"", "", "timeout=1m"}, "slowstart.md:21:49: error: guards: timeout bounds a command; the built-in action alert runs none"},
		{"misspelt", [3]string{"timout=1m", "", ""}, "unknown guard \"timout\" (want after, grace, budget, escalate_after, restart_count, slow_retry or timeout)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := Parse("slowstart.md", []byte(repairTimeoutSrc(tc.rows)), Options{})
			if !ds.HasErrors() || !strings.Contains(ds.String(), tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant %s", ds, tc.want)
			}
		})
	}
}
