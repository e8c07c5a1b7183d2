package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/steps"
)

// unit is one agent (or agentless stage, such as a gate) of the run: its
// stages, its guard state, and its severity before and after repairs.
type unit struct {
	key        string
	agent      string      // "" for an agentless stage such as a gate
	state      *guard.Unit // the unit's guard state (a copy in a dry run)
	stages     []*stageRun
	raw        contracts.Severity // worst stage this run, before hysteresis
	settled    guard.Settled
	severity   contracts.Severity // after hysteresis: what repairs act on
	final      contracts.Severity // after verification: what the report, alerts and snapshot say
	held       map[string]bool    // action-table conditions that held this run
	skipped    bool
	reportOnly bool
	repairs    []*verifyJob // repairs that ran this run
	told       bool         // a message of this run already says what its repairs did
	slowed     bool         // the slow-retry guard holds its repairs back: its incident tells them
	// suppressed is set by depend when a dependency of the unit fails;
	// localRoot when that is a host of this contract it found down itself,
	// so the contract's verdict still counts the unit.
	suppressed *guard.Suppression
	localRoot  bool
	// flap is what flap detection made of this run (alert).
	flap guard.FlapChange
}

// name is how messages and logs name the unit.
func (u *unit) name() string {
	if u.agent != "" {
		return u.agent
	}
	return u.key
}

// failing reports whether the unit counts as failing at the end of the run:
// critical or degraded, or unreachable past unreachable_after.
func (u *unit) failing() bool {
	switch u.final {
	case contracts.SeverityCritical, contracts.SeverityDegraded:
		return true
	case contracts.SeverityUnreachable:
		return u.settled.Failing
	}
	return false
}

// critical: critical, or unreachable past unreachable_after.
func (u *unit) critical() bool {
	return u.final == contracts.SeverityCritical || (u.final == contracts.SeverityUnreachable && u.settled.Failing)
}

// observed reports whether the run saw the unit well enough to open or
// resolve its incidents: unknown, skipped and unreachable below its
// threshold say nothing.
func (u *unit) observed() bool {
	return !u.skipped && (u.settled.Severity != contracts.SeverityUnknown || u.settled.Failing)
}

// judge is the second phase: it groups the probed stages into units,
// takes the worst stage as the unit's raw severity and passes it through
// hysteresis. It returns the units in the order of their first stage, with
// their settled severities and the action-table conditions that held; what
// it says is a condition that could not be evaluated.
func (r *run) judge(stages []*stageRun) ([]*unit, said) {
	var units []*unit
	var s said
	r.enter("judge", &s)
	byKey := map[string]*unit{}
	for _, sr := range stages {
		key, agent := sr.agent, sr.agent
		switch {
		case key == "":
			key = sr.id
		case sr.item != nil && !strings.Contains(sr.stage.Agent, "$"):
			// Every item of a for_each stage is its own unit, even when
			// the items share an agent name: lab[sol], lab[ace] …
			key, agent = sr.id, sr.id
		}
		u, ok := byKey[key]
		if !ok {
			u = &unit{key: key, agent: agent, raw: contracts.SeveritySkipped, held: map[string]bool{}, skipped: true,
				reportOnly: agent != "" && r.c.IsReportOnly(agent)}
			byKey[key] = u
			units = append(units, u)
		}
		u.stages = append(u.stages, sr)
		if sr.report.Status != StatusSkipped {
			u.skipped = false
			u.raw = steps.Worst(u.raw, sr.report.Severity)
			for _, row := range sr.stage.Actions {
				ok, err := sr.evaluate(row)
				if err != nil && sr.readsAll(row) {
					// A condition over a value the probe did not give is
					// simply false; one that fails over values it has is a
					// mistake worth saying.
					s.error(fmt.Sprintf("%s: stage %s: condition %q could not be evaluated, read as false: %v", row.Pos, sr.id, row.Condition, err))
				}
				if ok {
					u.held[conditionKey(row)] = true
				}
			}
		}
	}
	for _, u := range units {
		if u.skipped {
			u.severity, u.final = contracts.SeveritySkipped, contracts.SeveritySkipped
			continue
		}
		u.state = r.ledger.Unit(u.key)
		if r.e.opts.DryRun {
			u.state = cloneUnit(u.state) // evaluate every guard; persist nothing
		}
		conds := make([]string, 0, len(u.held))
		for k := range u.held {
			conds = append(conds, k)
		}
		sort.Strings(conds)
		u.settled = r.chain.Observe(u.state, guard.Observation{Severity: u.raw, Conditions: conds})
		u.severity = u.settled.Severity
		if u.severity == contracts.SeverityUnknown && u.raw == contracts.SeverityUnreachable {
			u.severity = contracts.SeverityUnreachable // below unreachable_after: reported as itself
		}
		u.final = u.severity
	}
	return units, s
}

// agentReports is the report's agents, from the units' final state.
func agentReports(units []*unit) map[string]*AgentReport {
	out := map[string]*AgentReport{}
	for _, u := range units {
		if u.agent == "" {
			continue
		}
		ar := &AgentReport{Agent: u.agent, Severity: u.shown(), Raw: u.raw, ReportOnly: u.reportOnly, Failing: u.failing() && u.settled.Failing && u.suppressed == nil,
			Suppressed: u.suppressed}
		if u.state != nil && u.state.Flap != nil && u.state.Flap.Flapping {
			ar.Flapping, ar.FlapPercent = true, u.state.Flap.Percent
		}
		if u.skipped {
			ar.Severity, ar.Raw, ar.Failing = contracts.SeveritySkipped, contracts.SeveritySkipped, false
		}
		if u.final != u.severity {
			ar.BeforeRepair = u.severity
		}
		if u.state != nil && u.raw == contracts.SeverityUnknown {
			ar.UnknownRuns = u.state.Unknown
		}
		for _, sr := range u.stages {
			ar.Stages = append(ar.Stages, sr.id)
		}
		out[u.agent] = ar
	}
	return out
}

// overall is the worst agent at the end of the run; a run whose gate is
// down is at least critical.
func overall(units []*unit) contracts.Severity {
	sev := contracts.SeverityHealthy
	seen := false
	for _, u := range units {
		if u.skipped {
			continue
		}
		seen = true
		if u.suppressed != nil && !u.localRoot {
			sev = steps.Worst(sev, contracts.SeveritySuppressed)
			continue
		}
		if u.agent == "" {
			for _, sr := range u.stages {
				if sr.report.Status != StatusSkipped {
					sev = steps.Worst(sev, sr.current().report.Severity)
				}
			}
			continue
		}
		if u.critical() {
			sev = contracts.SeverityCritical // unreachable for unreachable_after runs
			continue
		}
		sev = steps.Worst(sev, u.final)
	}
	if !seen {
		return contracts.SeverityUnknown
	}
	return sev
}

// conditionKey names an action row's condition in the ledger.
func conditionKey(row *contracts.ActionRow) string {
	if row.Expr != "" {
		return row.Expr
	}
	return row.Condition
}

func evalBool(p *vm.Program, env map[string]any) (bool, error) {
	if p == nil {
		return false, errNotCompiled
	}
	out, err := expr.Run(p, env)
	if err != nil {
		// expr's message goes on with the source and a caret under the
		// column on lines of their own; the row's position says where.
		return false, errors.New(steps.FirstLine(err.Error()))
	}
	b, _ := out.(bool)
	return b, nil
}
