package engine

import (
	"fmt"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
)

// stageRun is one stage (or one for_each expansion of it) during a run: what
// its steps saw, and the environment its action conditions are evaluated in.
type stageRun struct {
	stage   *contracts.Stage
	id      string
	agent   string
	target  string
	item    map[string]any
	vars    map[string]string
	varsEnv map[string]any // vars as expressions see them, built once per stage
	report  *StageReport
	obs     []*steps.Observation
	env     map[string]any // action conditions' environment, set by finish
	// verified is the stage probed again after a repair, when it was: from
	// then on it is the stage's state (its severity, fields and env).
	verified *stageRun
}

// expandStages turns the contract's stages into runs, one per for_each item.
func expandStages(c *contracts.Contract) []*stageRun {
	var out []*stageRun
	for _, st := range c.Stages {
		if st.ForEach == "" {
			out = append(out, newStageRun(c, st, st.ID, nil))
			continue
		}
		for i, item := range c.ForEach[st.ForEach] {
			out = append(out, newStageRun(c, st, fmt.Sprintf("%s[%s]", st.ID, contracts.ItemName(item, i)), item))
		}
	}
	return out
}

func newStageRun(c *contracts.Contract, st *contracts.Stage, id string, item map[string]any) *stageRun {
	vars := c.StageVars(item)
	sr := &stageRun{stage: st, id: id, item: item, vars: vars, varsEnv: c.StageValues(item)}
	sr.target = sr.expandTarget(st.On)
	sr.agent = contracts.ExpandAttr(st.Agent, vars)
	sr.report = &StageReport{ID: id, Title: st.Title, Agent: sr.agent, Gate: st.Gate, Item: item, Steps: []*StepReport{}}
	return sr
}

// again returns a fresh run of the same stage, for verification.
func (sr *stageRun) again(c *contracts.Contract) *stageRun {
	return newStageRun(c, sr.stage, sr.id, sr.item)
}

// current is the stage's latest state: the verification probe when there
// was one, else the run's own probe.
func (sr *stageRun) current() *stageRun {
	if sr.verified != nil {
		return sr.verified
	}
	return sr
}

// expandAttr expands a target or agent attribute: ${key}, or $key, which

// expandTarget names the target an `on=` (of a stage, step or action row)
// means in this stage: `$key` and `${key}` expand from the item and vars,
// and "" is the engine's host.
func (sr *stageRun) expandTarget(on string) string {
	if t := contracts.ExpandAttr(on, sr.vars); t != "" {
		return t
	}
	return "local"
}

// targetName is the target a step runs on.
func (sr *stageRun) targetName(step *contracts.Step) string {
	if step.On != "" {
		return sr.expandTarget(step.On)
	}
	return sr.target
}

// targets lists every target a stage reaches: its own, its steps' on= and
// their via= vantage points.
func (sr *stageRun) targets() []string {
	set := map[string]bool{sr.target: true}
	for _, st := range sr.stage.Steps {
		set[sr.targetName(st)] = true
		if st.Via != "" {
			set[contracts.ExpandAttr(st.Via, sr.vars)] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	return out
}

// sees reports whether a row's condition reads only what the stage's
// reachable steps gave: a condition over a step that never ran
// (`service.stdout != "active"`) would read its absence as a fault, so it
// does not hold; one over the steps that did run is judged as usual, so a
// stopped container is restarted even when another step of its stage could
// not get into it.
func (sr *stageRun) sees(row *contracts.ActionRow) bool {
	down := map[string]bool{}
	for _, o := range sr.obs {
		if o.Err != nil {
			down[o.StepID] = true
		}
	}
	if len(down) == 0 {
		return true
	}
	for _, p := range row.Reads {
		head, _, _ := strings.Cut(p, ".")
		switch {
		case down[head]:
			return false
		case head == "vars" || head == "item" || head == "state" || head == "severity":
			continue
		}
		given := false
		for _, o := range sr.obs {
			if o.Err != nil {
				continue
			}
			if _, ok := o.Values[head]; ok || o.StepID == head {
				given = true
				break
			}
		}
		if !given {
			return false // it could have come from the step that did not run
		}
	}
	return true
}

// holds reports whether an action row's condition holds in the stage's
// current state (after verification, when the stage was verified).
func (sr *stageRun) holds(row *contracts.ActionRow) bool {
	ok, _ := sr.evaluate(row)
	return ok
}

// readsAll reports whether every value the row's condition reads is
// present (not missing, not null) in the stage's current state.
func (sr *stageRun) readsAll(row *contracts.ActionRow) bool {
	for _, p := range row.Reads {
		if v, ok := steps.Lookup(sr.current().env, p); !ok || v == nil {
			return false
		}
	}
	return true
}

// evaluate is holds with the reason a condition could not be evaluated (a
// type mismatch at run time, say), which then reads as false.
func (sr *stageRun) evaluate(row *contracts.ActionRow) (bool, error) {
	cur := sr.current()
	if cur.report.Status == StatusSkipped || !cur.sees(row) {
		return false, nil
	}
	return evalBool(row.Program, cur.env)
}
