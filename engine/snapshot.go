package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/expr-lang/expr"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
)

// snapshot builds the Maintains snapshot: exactly the keys the contract's
// `## Maintains` declares, with the declared types. The engine knows how to
// fill:
//
//   - `agents`: per agent, the keys of that agent's entry in the per-agent
//     example (the union of all entries for an agent it does not show):
//     `severity` is the agent's severity; a key with an expression in the
//     `Key | Value` table is that expression over the agent's steps
//     (`service.stdout`); `platform` is the example's constant; any other
//     key is a step field of that name, or `<step>_<field>`;
//   - `last_check`: the run's start time;
//   - `overall_severity`: the worst agent, mapped onto the declared enum
//     (unknown and unreachable below their threshold read as degraded);
//   - `restart_debounce` / `last_repair`: the last repair's time;
//   - an enum key ending in `status` (e.g. `zulip_server_status`): the first
//     gate's state, "healthy" when it passed, else the enum's other value.
//
// A key the run could not fill keeps its previous value, or null.
func (r *run) snapshot(prev map[string]any) map[string]any {
	snap := map[string]any{}
	for _, k := range r.c.Maintains.Keys {
		var v any
		switch {
		case k.Name == "agents":
			v = r.agentSnapshots(prev)
		case k.Name == "last_check":
			v = r.rep.StartedAt.UTC().Format(time.RFC3339)
		case k.Name == "overall_severity":
			v = enumSeverity(r.rep.OverallSeverity, k.Enum)
		case k.Name == "restart_debounce" || k.Name == "last_repair":
			if t := lastRepair(r.ledger); !t.IsZero() {
				v = t.UTC().Format(time.RFC3339)
			}
		case strings.HasSuffix(k.Name, "status") && len(k.Enum) > 0:
			v = r.gateStatus(k)
		}
		if v == nil {
			v = prev[k.Name]
		}
		snap[k.Name] = coerce(v, k)
	}
	return snap
}

func (r *run) gateStatus(k *contracts.MaintainedKey) any {
	for _, sr := range r.stages {
		if !sr.stage.Gate || sr.report.Status == StatusSkipped {
			continue
		}
		sev := sr.current().report.Severity
		ok := sev == contracts.SeverityHealthy || sev == contracts.SeverityDegraded
		if ok && slices.Contains(k.Enum, "healthy") {
			return "healthy"
		}
		for _, e := range k.Enum {
			if !ok && e != "healthy" {
				return e
			}
		}
		if ok {
			return k.Enum[0]
		}
	}
	return nil
}

// enumSeverity maps a severity onto a declared enum such as
// "healthy" | "degraded" | "critical".
func enumSeverity(s contracts.Severity, enum []string) any {
	name := s.String()
	if len(enum) == 0 || slices.Contains(enum, name) {
		return name
	}
	switch s {
	case contracts.SeverityUnknown, contracts.SeverityUnreachable, contracts.SeveritySkipped:
		if slices.Contains(enum, "degraded") {
			return "degraded"
		}
	}
	return enum[len(enum)-1]
}

func (r *run) agentSnapshots(prev map[string]any) map[string]any {
	prevAgents, _ := prev["agents"].(map[string]any)
	out := map[string]any{}
	for agent, ar := range r.rep.Agents {
		var runs []*stageRun
		env := map[string]any{}
		for _, sr := range r.stages {
			if sr.agent == agent {
				cur := sr.current()
				runs = append(runs, cur)
				for k, v := range cur.env {
					env[k] = v
				}
			}
		}
		old, _ := prevAgents[agent].(map[string]any)
		m := map[string]any{}
		for _, k := range agentKeys(r.c, agent) {
			var v any
			switch {
			case k.Name == "severity":
				v = ar.Severity.String()
			case ar.Severity == contracts.SeveritySkipped:
				// nothing seen this run: keep the previous value below
			case k.Program != nil:
				if out, err := expr.Run(k.Program, env); err == nil {
					v = out
				}
			case k.Name == "platform":
				if s, ok := k.Example.(string); ok {
					v = s
				} else if len(runs) > 0 {
					v = runs[0].stage.ID
				}
			default:
				v = findValue(runs, k.Name)
			}
			if v == nil && old != nil {
				v = old[k.Name]
			}
			m[k.Name] = coerce(v, k)
		}
		out[agent] = m
	}
	return out
}

// agentKeys is the snapshot schema of one agent: its own entry in the
// per-agent example, or the union of every entry for an agent the example
// does not show (a for_each item, say).
func agentKeys(c *contracts.Contract, agent string) []*contracts.MaintainedKey {
	if keys, ok := c.Maintains.PerAgent[agent]; ok {
		return keys
	}
	return c.Maintains.Agent
}

// findValue looks for a field in the agent's steps: by name, or as
// `<step>_<field>` (pm2_status is step pm2's status).
func findValue(runs []*stageRun, name string) any {
	for _, sr := range runs {
		for _, o := range sr.obs {
			if o.Err != nil {
				continue
			}
			if v, ok := o.Values[name]; ok {
				return v
			}
			if rest, ok := strings.CutPrefix(name, o.StepID+"_"); ok {
				if v, ok := o.Values[rest]; ok {
					return v
				}
			}
		}
	}
	return nil
}

// coerce converts v to the declared type where that is lossless ("200" to
// 200 for an int); null stays null (the run could not see it).
func coerce(v any, k *contracts.MaintainedKey) any {
	if v == nil {
		return nil
	}
	switch k.Type {
	case "int", "number":
		switch x := v.(type) {
		case string:
			var n int
			if _, err := fmt.Sscanf(x, "%d", &n); err == nil {
				return n
			}
		case float64:
			if x == float64(int(x)) && k.Type == "int" {
				return int(x)
			}
		}
	case "string", "enum", "timestamp":
		if _, ok := v.(string); !ok {
			return steps.FormatValue(v)
		}
	}
	return v
}

// ValidateSnapshot checks a snapshot against the contract's Maintains
// schema: every declared key present, no other key, enums within their
// values, types as declared (null allowed for a value the run could not
// see). It returns every problem found.
func ValidateSnapshot(c *contracts.Contract, snap map[string]any) []string {
	var problems []string
	declared := map[string]*contracts.MaintainedKey{}
	for _, k := range c.Maintains.Keys {
		declared[k.Name] = k
		v, ok := snap[k.Name]
		if !ok {
			problems = append(problems, "missing key "+k.Name)
			continue
		}
		problems = append(problems, checkType(k.Name, v, k)...)
		if k.Name == "agents" {
			agents, _ := v.(map[string]any)
			for name, av := range agents {
				m, ok := av.(map[string]any)
				if !ok {
					problems = append(problems, "agents."+name+" is not an object")
					continue
				}
				keys := agentKeys(c, name)
				for _, ak := range keys {
					if _, ok := m[ak.Name]; !ok {
						problems = append(problems, fmt.Sprintf("agents.%s: missing key %s", name, ak.Name))
						continue
					}
					problems = append(problems, checkType("agents."+name+"."+ak.Name, m[ak.Name], ak)...)
				}
				for key := range m {
					if !slices.ContainsFunc(keys, func(k *contracts.MaintainedKey) bool { return k.Name == key }) {
						problems = append(problems, fmt.Sprintf("agents.%s: undeclared key %s", name, key))
					}
				}
			}
		}
	}
	for key := range snap {
		if declared[key] == nil {
			problems = append(problems, "undeclared key "+key)
		}
	}
	return problems
}

func checkType(path string, v any, k *contracts.MaintainedKey) []string {
	if v == nil {
		return nil
	}
	bad := func() []string { return []string{fmt.Sprintf("%s: %v is not %s", path, v, k.Type)} }
	switch k.Type {
	case "enum":
		s, ok := v.(string)
		if !ok || !slices.Contains(k.Enum, s) {
			return []string{fmt.Sprintf("%s: %v is not one of %s", path, v, strings.Join(k.Enum, " | "))}
		}
	case "timestamp":
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return bad()
		}
	case "string":
		if _, ok := v.(string); !ok {
			return bad()
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case "int":
		switch x := v.(type) {
		case int, int64:
		case float64:
			if x != float64(int64(x)) {
				return bad()
			}
		default:
			return bad()
		}
	case "number":
		switch v.(type) {
		case int, int64, float64:
		default:
			return bad()
		}
	case "map":
		if _, ok := v.(map[string]any); !ok {
			return bad()
		}
	}
	return nil
}
