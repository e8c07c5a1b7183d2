package replay

import (
	"fmt"
	"sort"
	"strings"

	"github.com/contractd/contractd/engine"
)

// compare lists how rep differs from want, one readable line each:
// "agent abiba: want critical, got healthy", "- action {…}" for an
// expected action the run did not take, "+ action {…}" for one it took
// that was not expected.
func compare(want Expect, rep *engine.Report) []string {
	var out []string
	if want.Overall != "" && want.Overall != rep.OverallSeverity.String() {
		out = append(out, fmt.Sprintf("overall: want %s, got %s", want.Overall, rep.OverallSeverity))
	}
	agents := make([]string, 0, len(want.Agents))
	for a := range want.Agents {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, a := range agents {
		got, ok := rep.Agents[a]
		switch {
		case !ok || got == nil:
			have := make([]string, 0, len(rep.Agents))
			for n := range rep.Agents {
				have = append(have, n)
			}
			sort.Strings(have)
			out = append(out, fmt.Sprintf("agent %s: not in the report (its agents: %s)", a, strings.Join(have, ", ")))
		case got.Severity.String() != want.Agents[a]:
			out = append(out, fmt.Sprintf("agent %s: want %s, got %s", a, want.Agents[a], got.Severity))
		}
	}
	if want.Actions != nil {
		var actual []*engine.ActionReport
		for _, a := range rep.Actions {
			if a.Kind != engine.KindLog && a.Kind != engine.KindMonitor {
				actual = append(actual, a)
			}
		}
		missing, extra := match(len(*want.Actions), len(actual), func(i, j int) bool { return (*want.Actions)[i].matches(actual[j]) })
		for _, i := range missing {
			out = append(out, "- action "+(*want.Actions)[i].String()+"   (expected; the run did not take it)")
		}
		for _, j := range extra {
			out = append(out, "+ action "+describeAction(actual[j])+"   (the run took it; not expected)")
		}
	}
	if want.Alerts != nil {
		missing, extra := match(len(*want.Alerts), len(rep.Alerts), func(i, j int) bool { return (*want.Alerts)[i].matches(rep.Alerts[j]) })
		for _, i := range missing {
			out = append(out, "- alert "+(*want.Alerts)[i].String()+"   (expected; the run sent no such message)")
		}
		for _, j := range extra {
			out = append(out, "+ alert "+describeAlert(rep.Alerts[j])+"   (the run sent it; not expected)")
		}
	}
	return out
}

// match pairs each of n expectations with one of m actual items (first
// fit, in order) and returns the expectations and items left unpaired.
func match(n, m int, fits func(i, j int) bool) (missing, extra []int) {
	used := make([]bool, m)
	for i := 0; i < n; i++ {
		found := false
		for j := 0; j < m; j++ {
			if !used[j] && fits(i, j) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			missing = append(missing, i)
		}
	}
	for j, u := range used {
		if !u {
			extra = append(extra, j)
		}
	}
	return missing, extra
}

func (e ActionExpect) matches(a *engine.ActionReport) bool {
	return (e.Agent == "" || e.Agent == a.Agent) &&
		(e.Stage == "" || e.Stage == a.Stage) &&
		(e.Action == "" || e.Action == a.Action) &&
		(e.Status == "" || e.Status == a.Status) &&
		(e.Guard == "" || e.Guard == a.Guard) &&
		(e.Verify == "" || e.Verify == a.Verify) &&
		(e.Condition == "" || e.Condition == a.Condition)
}

func (e AlertExpect) matches(a *engine.AlertReport) bool {
	return (e.Kind == "" || e.Kind == a.Kind) &&
		(e.Agent == "" || e.Agent == a.Agent) &&
		(e.Condition == "" || e.Condition == a.Condition) &&
		(e.Severity == "" || e.Severity == a.Severity) &&
		(e.Text == "" || strings.Contains(a.Text, e.Text))
}

// fields renders the given key/value pairs as {k: v, …}, leaving out the
// empty ones.
func fields(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			parts = append(parts, kv[i]+": "+kv[i+1])
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (e ActionExpect) String() string {
	return fields("agent", e.Agent, "stage", e.Stage, "status", e.Status, "guard", e.Guard, "action", e.Action, "verify", e.Verify, "condition", e.Condition)
}

func describeAction(a *engine.ActionReport) string {
	return fields("agent", a.Agent, "stage", a.Stage, "status", a.Status, "guard", a.Guard, "action", a.Action, "verify", a.Verify, "condition", a.Condition)
}

func (e AlertExpect) String() string {
	return fields("kind", e.Kind, "agent", e.Agent, "condition", e.Condition, "severity", e.Severity, "text", e.Text)
}

func describeAlert(a *engine.AlertReport) string {
	return fields("kind", a.Kind, "agent", a.Agent, "condition", a.Condition, "severity", a.Severity, "text", a.Text)
}
