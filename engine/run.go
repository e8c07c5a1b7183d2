package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// clockFunc adapts Options.Now to guard.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// run is the state of one Run call.
type run struct {
	e         *Engine
	c         *contracts.Contract
	rep       *Report
	ledger    *store.Ledger
	chain     *guard.Chain
	secrets   map[string]string
	runs      []*stageRun
	gateOK    bool
	downGate  string
	noRepair  string // non-empty: repairs are off for this run, and why
	active    map[string]*activeIncident
	outgoing  []outgoing
	notifiers []notify.Notifier
	fleet     guard.Fleet    // the contract's units this run, for the blast-radius guard
	base      map[string]any // what every expression sees: restarts(), state
	mu        sync.Mutex
}

// Run runs contract c once: probes, judgement, guarded repairs, alerts,
// snapshot. It returns an error wrapping ErrEngine only when the engine
// itself failed (state store, lock, deadline); sick or unreachable agents
// are results in the Report. When another process holds the contract's run
// lock past LockWait, the report says so in Skipped and the error is nil.
func (e *Engine) Run(ctx context.Context, c *contracts.Contract) (*Report, error) {
	now := e.opts.Now()
	rep := &Report{
		Contract: c.Name, Version: c.Version, RunID: newRunID(now), StartedAt: now,
		DryRun: e.opts.DryRun, Stages: []*StageReport{}, Agents: map[string]*AgentReport{},
		Actions: []*ActionReport{}, Alerts: []*AlertReport{},
	}
	st, err := e.openStore()
	if err != nil {
		return e.fail(rep, err)
	}
	unlock, err := st.Lock(ctx, c.Name, e.opts.LockWait)
	if errors.Is(err, store.ErrLocked) {
		rep.Skipped = "another run holds the lock"
		rep.FinishedAt = e.opts.Now()
		return rep, nil
	}
	if err != nil {
		return e.fail(rep, err)
	}
	defer unlock()

	r := &run{e: e, c: c, rep: rep, secrets: e.secrets(c)}
	r.notifiers = r.buildNotifiers()
	r.chain = guard.NewChain(c.Guards, clockFunc(e.opts.Now))
	if b := c.Guards.BlastRadius; b != nil {
		r.chain.Blast = guard.BlastRadius{MaxRepairs: b.MaxRepairs, Trip: b.Trip, MinUnits: b.MinUnits, Clock: r.chain.Clock}
	}
	r.ledger, err = st.ReadLedger(c.Name)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return e.fail(rep, err)
		}
		// Guards are never silently reset to zero: this run repairs nothing
		// and says why, loudly.
		r.noRepair = "ledger was corrupt and moved aside: " + err.Error()
		rep.Errors = append(rep.Errors, r.noRepair)
		r.ledger = store.NewLedger(c.Name)
		r.message(notify.Message{Contract: c.Name, Kind: notify.KindEscalate, Severity: contracts.SeverityCritical.String(),
			Text: "state ledger was corrupt and has been moved aside; this run repairs nothing, and the last repair is taken from the snapshot so the debounce still holds: " + err.Error()},
			&AlertReport{Key: guard.IncidentKey(c.Name, "", "ledger"), Condition: "ledger corrupt", Kind: notify.KindEscalate})
	}
	for agent, w := range r.ledger.Maintenance {
		if w.Active(now) {
			if rep.Maintenance == nil {
				rep.Maintenance = map[string]*guard.Window{}
			}
			rep.Maintenance[agent] = w
		}
	}
	prevSnap, _, err := st.ReadSnapshot(c.Name)
	if err != nil {
		// A snapshot is rebuilt by this run; a corrupt one is moved aside
		// and said so, never dropped in silence.
		rep.Errors = append(rep.Errors, "snapshot: "+err.Error())
		r.logf("%s: snapshot: %v", c.Name, err)
	}

	rctx, cancel := context.WithTimeout(ctx, e.opts.RunTimeout)
	defer cancel()
	r.runs = expandStages(c)
	if r.noRepair != "" {
		r.seedFromSnapshot(prevSnap)
	}
	state := prevSnap
	if state == nil {
		state = map[string]any{}
	}
	r.base = map[string]any{"restarts": r.restarts, "state": state}
	r.gateOK, r.downGate = e.runStages(rctx, c, r.runs, r.secrets, r.base)
	for _, sr := range r.runs {
		rep.Stages = append(rep.Stages, sr.report)
	}
	rep.GateOK = r.gateOK

	units := r.settleAgents()
	r.actions(rctx, units)
	r.alerts(rctx, units)
	r.send(ctx)

	rep.OverallSeverity = r.overall()
	rep.FinishedAt = e.opts.Now()
	rep.DurationMS = rep.FinishedAt.Sub(rep.StartedAt).Milliseconds()
	if rctx.Err() != nil && ctx.Err() == nil {
		rep.Errors = append(rep.Errors, "run deadline exceeded")
	}
	if e.opts.DryRun {
		return rep, nil
	}
	r.writeRunLog()
	snap := r.snapshot(prevSnap)
	if err := st.WriteSnapshot(c.Name, snap); err != nil {
		return e.fail(rep, err)
	}
	r.ledger.PruneWindows(e.opts.Now())
	if err := st.WriteLedger(c.Name, r.ledger); err != nil {
		return e.fail(rep, err)
	}
	if err := st.AppendHistory(c.Name, historyRecord(rep)); err != nil {
		return e.fail(rep, err)
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("%w: %v", ErrEngine, ctx.Err())
	}
	if rctx.Err() != nil {
		return rep, fmt.Errorf("%w: run deadline exceeded", ErrEngine)
	}
	return rep, nil
}

func (e *Engine) fail(rep *Report, err error) (*Report, error) {
	rep.Errors = append(rep.Errors, err.Error())
	rep.FinishedAt = e.opts.Now()
	return rep, fmt.Errorf("%w: %v", ErrEngine, err)
}

// unitState is one agent (or agentless stage) after hysteresis.
type unitState struct {
	key        string
	agent      string      // "" for an agentless stage such as a gate
	unit       *guard.Unit // the unit's guard state (a copy in a dry run)
	runs       []*stageRun
	raw        contracts.Severity
	settled    guard.Settled
	severity   contracts.Severity // what the report and alerts use
	held       map[string]bool    // action-table conditions that held this run
	skipped    bool
	reportOnly bool
}

// settleAgents groups stages by agent, takes the worst stage as the agent's
// raw severity and passes it through hysteresis.
func (r *run) settleAgents() []*unitState {
	byKey := map[string]*unitState{}
	var order []string
	for _, sr := range r.runs {
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
			u = &unitState{key: key, agent: agent, raw: contracts.SeveritySkipped, held: map[string]bool{}, skipped: true, reportOnly: agent != "" && r.c.IsReportOnly(agent)}
			byKey[key] = u
			order = append(order, key)
		}
		u.runs = append(u.runs, sr)
		if sr.report.Status != StatusSkipped {
			u.skipped = false
			u.raw = steps.Worst(u.raw, sr.report.Severity)
			for _, row := range sr.stage.Actions {
				if sr.holds(row) {
					u.held[conditionKey(row)] = true
				}
			}
		}
	}
	// An all-unreachable agent is unreachable, not "critical and unreachable".
	var out []*unitState
	for _, key := range order {
		u := byKey[key]
		if u.skipped {
			u.severity = contracts.SeveritySkipped
			out = append(out, u)
			continue
		}
		unit := r.ledger.Unit(key)
		if r.e.opts.DryRun {
			unit = cloneUnit(unit) // evaluate every guard; persist nothing
		}
		u.unit = unit
		conds := make([]string, 0, len(u.held))
		for k := range u.held {
			conds = append(conds, k)
		}
		sort.Strings(conds)
		u.settled = r.chain.Observe(unit, guard.Observation{Severity: u.raw, Conditions: conds})
		u.severity = u.settled.Severity
		if u.severity == contracts.SeverityUnknown && u.raw == contracts.SeverityUnreachable {
			u.severity = contracts.SeverityUnreachable // below unreachable_after: reported as itself
		}
		out = append(out, u)
		if u.agent != "" {
			ar := &AgentReport{Agent: u.agent, Severity: u.severity, Raw: u.raw, ReportOnly: u.reportOnly, Failing: u.settled.Failing}
			for _, sr := range u.runs {
				ar.Stages = append(ar.Stages, sr.id)
			}
			r.rep.Agents[u.agent] = ar
		}
	}
	for _, u := range out {
		if u.skipped && u.agent != "" {
			ar := &AgentReport{Agent: u.agent, Severity: contracts.SeveritySkipped, Raw: contracts.SeveritySkipped, ReportOnly: u.reportOnly}
			for _, sr := range u.runs {
				ar.Stages = append(ar.Stages, sr.id)
			}
			r.rep.Agents[u.agent] = ar
		}
	}
	return out
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
		return false, errors.New("condition not compiled")
	}
	out, err := expr.Run(p, env)
	if err != nil {
		return false, err
	}
	b, _ := out.(bool)
	return b, nil
}

// overall is the worst agent; a run whose gate is down is at least critical.
func (r *run) overall() contracts.Severity {
	sev := contracts.SeverityHealthy
	seen := false
	for _, ar := range r.rep.Agents {
		if ar.Severity == contracts.SeveritySkipped {
			continue
		}
		seen = true
		if ar.Severity == contracts.SeverityUnreachable && ar.Failing {
			sev = contracts.SeverityCritical // unreachable for unreachable_after runs
			continue
		}
		sev = steps.Worst(sev, ar.Severity)
	}
	for _, sr := range r.runs {
		if sr.agent == "" && sr.report.Status != StatusSkipped {
			seen = true
			sev = steps.Worst(sev, sr.report.Severity)
		}
	}
	if !seen {
		return contracts.SeverityUnknown
	}
	return sev
}

// aggregates is the environment of the escalation table.
func (r *run) aggregates(units []*unitState) map[string]any {
	counts := map[contracts.Severity]int{}
	var critical []any
	agents := 0
	for _, u := range units {
		if u.agent == "" || u.skipped {
			continue
		}
		agents++
		sev := u.severity
		if isCritical(u) {
			// unreachable for unreachable_after runs counts as critical
			sev = contracts.SeverityCritical
			critical = append(critical, u.agent)
		}
		counts[sev]++
	}
	return map[string]any{
		"restarts":          r.restarts,
		"state":             r.base["state"],
		"critical_count":    counts[contracts.SeverityCritical],
		"degraded_count":    counts[contracts.SeverityDegraded],
		"unreachable_count": counts[contracts.SeverityUnreachable],
		"healthy_count":     counts[contracts.SeverityHealthy],
		"unknown_count":     counts[contracts.SeverityUnknown],
		"agents":            agents,
		"gate_ok":           r.gateOK,
		"critical_agents":   critical,
	}
}

func (r *run) addAction(a *ActionReport) {
	r.mu.Lock()
	r.rep.Actions = append(r.rep.Actions, a)
	r.mu.Unlock()
}

// seedFromSnapshot rebuilds the one guard fact the snapshot keeps when the
// ledger was lost: the last repair (`restart_debounce`), recorded on every
// agent the snapshot names, so "never restart more than once per debounce
// window" holds across the loss. It over-counts rather than forgets.
func (r *run) seedFromSnapshot(snap map[string]any) {
	var last time.Time
	for _, key := range []string{"restart_debounce", "last_repair"} {
		if s, ok := snap[key].(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(last) {
				last = t
			}
		}
	}
	if last.IsZero() {
		return
	}
	agents, _ := snap["agents"].(map[string]any)
	for name := range agents {
		u := r.ledger.Unit(name)
		u.Repairs = append(u.Repairs, last)
	}
	for _, sr := range r.runs {
		if sr.agent != "" {
			u := r.ledger.Unit(sr.agent)
			if len(u.Repairs) == 0 {
				u.Repairs = append(u.Repairs, last)
			}
		}
	}
}

// restarts is the expression function restarts(agent, window): repairs
// the ledger recorded for agent within window (e.g. "1h"); 0 for a window
// that does not parse.
func (r *run) restarts(agent, window string) int {
	d, err := time.ParseDuration(window)
	if err != nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.ledger.Units[agent]
	if !ok {
		return 0
	}
	// Counted as the crash-loop guard counts: the repairs contractd made or
	// the increase of a restart counter read from the target (pm2
	// `restarts`), whichever is larger.
	n, _ := guard.CrashLoop{Per: d, Clock: clockFunc(r.e.opts.Now)}.Count(u)
	return n
}

// logf writes one log line with the contract's secret values redacted and
// control characters escaped: whatever a target said, it stays one line.
func (r *run) logf(format string, args ...any) {
	r.e.opts.Logf("%s", transports.Printable(transports.Redact(fmt.Sprintf(format, args...), secretValues(r.secrets))))
}
