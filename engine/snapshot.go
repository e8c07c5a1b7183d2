package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
)

// snapshot builds the Maintains snapshot: exactly the keys the contract's
// `## Maintains` declares, with the declared types, each filled by the
// Maintains rule (contracts.MaintainedKey.Fill, the rule lint checks): its
// `Key | Value` expression, else the snapshot value of the same name
// (contracts.SnapshotNames). Per-agent snapshots are filled the same way
// from each agent's environment. A key the run could not fill keeps its
// previous value, or null.
func (r *run) snapshot(seen probed, prev map[string]any) map[string]any {
	stages := map[string]any{}
	for _, sr := range seen.stages {
		cur := sr.current()
		stages[sr.id] = map[string]any{"severity": cur.report.Severity.String(), "status": cur.report.Status, "agent": sr.agent}
	}
	var lastRepairAt any
	if t := lastRepair(r.ledger); !t.IsZero() {
		lastRepairAt = t.UTC().Format(time.RFC3339)
	}
	env := r.env(scope{values: map[string]any{
		"last_check":       r.rep.StartedAt.UTC().Format(time.RFC3339),
		"overall_severity": r.rep.OverallSeverity.String(),
		"last_repair":      lastRepairAt,
		"agents":           r.agentSnapshots(seen.stages, prev),
		"gate_ok":          seen.gateOK,
		"stages":           stages,
		"state":            r.state,
		"vars":             r.c.StageValues(nil),
	}})
	snap := map[string]any{}
	for _, k := range r.c.Maintains.Keys {
		v, _ := k.Fill(env)
		if v == nil {
			v = prev[k.Name]
		}
		snap[k.Name] = coerce(v, k)
	}
	return snap
}

// enumSeverity maps a severity onto a declared enum of severities such as
// "healthy" | "degraded" | "critical": unknown, unreachable and skipped
// read as degraded when the enum has it, else as its last value.
func enumSeverity(name string, enum []string) any {
	if slices.Contains(enum, name) {
		return name
	}
	var s contracts.Severity
	if s.UnmarshalText([]byte(name)) != nil || !slices.Contains(enum, "healthy") {
		return name // not a severity, or not an enum of severities: the type check says so
	}
	switch s {
	case contracts.SeverityUnknown, contracts.SeverityUnreachable, contracts.SeveritySkipped:
		if slices.Contains(enum, "degraded") {
			return "degraded"
		}
	}
	return enum[len(enum)-1]
}

// agentSnapshots fills each agent's snapshot from the agent's environment:
// its stages' fields and step ids as they are at the end of the run, its
// severity, its name and its entry of the per-agent example.
func (r *run) agentSnapshots(stages []*stageRun, prev map[string]any) map[string]any {
	prevAgents, _ := prev["agents"].(map[string]any)
	out := map[string]any{}
	for agent, ar := range r.rep.Agents {
		var of []*stageRun
		for _, sr := range stages {
			if sr.agent == agent {
				of = append(of, sr)
			}
		}
		keys := agentKeys(r.c, agent)
		example := map[string]any{}
		for _, k := range keys {
			example[k.Name] = k.Example
		}
		env := r.env(scope{of: of, values: map[string]any{"severity": ar.Severity.String(), "agent": agent, "example": example}})
		old, _ := prevAgents[agent].(map[string]any)
		m := map[string]any{}
		for _, k := range keys {
			var v any
			seen := false
			if k.Name == "severity" || ar.Severity != contracts.SeveritySkipped {
				// A skipped agent was not seen: only its severity is new.
				v, seen = k.Fill(env)
			}
			// A field the probe reported as null is null now; only a
			// field the run could not see (unreachable, skipped, absent,
			// or an expression over what is missing) keeps its last value.
			if v == nil && old != nil && !(seen && k.Program == nil) {
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
	return c.Maintains.KeysFor(agent)
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
	case "enum":
		str, ok := v.(string)
		if !ok {
			str = steps.FormatValue(v)
		}
		return enumSeverity(str, k.Enum)
	case "string", "timestamp":
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
