package engine

import (
	"github.com/contractd/contractd/steps"
)

// scope says what one evaluation sees. env builds the map for it; it is the
// only place an expression environment is assembled, so a health cell, an
// action condition, a verification and the escalation table read the same
// names the same way (docs/contract-format.md, "The expression
// environment").
type scope struct {
	// stage is the stage being judged; nil for the escalation table.
	stage *stageRun
	// steps are the stage's observations so far, visible by step id.
	steps []*steps.Observation
	// own is the step being judged (health cells): its fields are at the
	// top level and win over every other name, so a row over a field
	// called `restarts` reads the field.
	own *steps.Observation
	// merged puts every step's fields at the top level (later steps win)
	// and the stage's severity beside them (action conditions); the
	// engine's functions win over fields of the same name there, and a
	// field stays reachable by its step id (`pm2.restarts`).
	merged   bool
	severity string
	// of are stages whose final environments are merged in, in order: an
	// agent's stages for its Maintains snapshot. Their for_each items'
	// keys are names too, beneath everything else, so a per-agent key
	// named like one (`file`) is filled by it unless a step reports a
	// field of that name (contracts.MaintainedKey.Fill).
	of []*stageRun
	// values are named values nothing shadows: the escalation table's
	// aggregates, the snapshot values of a Maintains key, an agent's
	// severity and example.
	values map[string]any
}

// env builds the environment for sc. Lowest to highest precedence: the
// keys of sc.of's for_each items, the previous snapshot (`state`), the
// gates' steps by id, the final environments of sc.of, the stage's steps
// by id, merged fields, the
// engine's functions (action conditions), the step's own fields (health
// cells), then `vars`, `item`, `severity` and sc.values, which nothing
// shadows.
func (r *run) env(sc scope) map[string]any {
	n := 4 + len(r.gateValues) + len(sc.steps) + len(sc.values)
	if sc.own != nil {
		n += len(sc.own.Values)
	}
	env := make(map[string]any, n)
	for _, sr := range sc.of {
		for k, v := range sr.item {
			env[k] = v
		}
	}
	env["state"] = r.state
	env["restarts"] = r.restarts
	for id, v := range r.gateValues {
		env[id] = v
	}
	for _, sr := range sc.of {
		for k, v := range sr.current().env {
			env[k] = v
		}
	}
	if sc.merged {
		for _, o := range sc.steps {
			for k, v := range o.Values {
				env[k] = v
			}
		}
	}
	for _, o := range sc.steps {
		env[o.StepID] = o.Values
	}
	if sc.merged {
		env["restarts"] = r.restarts
	}
	if sc.own != nil {
		// The step is seen by its id in its own table too
		// (`health.connected`), as lint lets a cell read it.
		env[sc.own.StepID] = sc.own.Values
		for k, v := range sc.own.Values {
			env[k] = v
		}
	}
	if sr := sc.stage; sr != nil {
		env["vars"] = sr.varsEnv
		if sr.item != nil {
			env["item"] = sr.item
		}
	} else {
		// The escalation table reads the contract's vars too.
		env["vars"] = r.c.StageValues(nil)
	}
	if sc.severity != "" {
		env["severity"] = sc.severity
	}
	for k, v := range sc.values {
		env[k] = v
	}
	return env
}
