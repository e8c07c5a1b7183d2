package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// verifyJob is a repair that ran and must be verified after its grace.
type verifyJob struct {
	u      *unitState
	unit   *guard.Unit
	sr     *stageRun
	row    *contracts.ActionRow
	key    string
	grace  time.Duration
	report *ActionReport
}

// actions evaluates every action table and passes each matching row through
// the guard chain. Only the literal commands of action rows ever run, on the
// stage's target; probe output never reaches a command line.
func (r *run) actions(ctx context.Context, units []*unitState) {
	var jobs []*verifyJob
	for _, u := range units {
		if u.agent == "" || u.skipped || u.settled.Severity == contracts.SeverityUnknown && !u.settled.Failing {
			continue // gates are not units of the fleet; unknown says nothing
		}
		r.fleet.Units++
		if u.settled.Failing {
			r.fleet.Failing++
		}
	}
	for _, u := range units {
		if u.skipped {
			continue
		}
		unit := u.unit
		ran := map[string]string{} // target+command → condition that ran it this run
		for _, sr := range u.runs {
			if sr.report.Status == StatusSkipped {
				continue
			}
			r.readRestartCounter(u, unit, sr)
			for _, row := range r.selectRows(sr, unit) {
				if job := r.act(ctx, u, unit, sr, row, ran); job != nil {
					jobs = append(jobs, job)
				}
			}
		}
	}
	r.verify(ctx, jobs)
}

// readRestartCounter feeds a restart count read from the target (pm2
// `restarts`, systemd `NRestarts`) to the crash-loop guard, once per unit.
func (r *run) readRestartCounter(u *unitState, unit *guard.Unit, sr *stageRun) {
	for _, row := range sr.stage.Actions {
		if row.Guard.RestartCount == "" {
			continue
		}
		v, ok := steps.Lookup(sr.env, row.Guard.RestartCount)
		if !ok {
			continue
		}
		n, ok := toInt(v)
		if !ok {
			continue
		}
		if !r.e.opts.DryRun {
			r.chain.RecordRestartCounter(unit, int64(n))
		}
		return
	}
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	}
	return 0, false
}

// holds reports whether an action row's condition holds in the stage. In a
// stage with an unreachable step nothing holds: a condition over a step that
// never ran (`service.stdout != "active"`) would read its absence as a fault.
func (sr *stageRun) holds(row *contracts.ActionRow) bool {
	for _, o := range sr.obs {
		if o.Err != nil {
			return false
		}
	}
	ok, _ := evalBool(row.Program, sr.env)
	return ok
}

// selectRows returns the rows whose condition holds, in table order. Rows
// of one condition with tiers are ordered by occurrence: the row for the
// next attempt is chosen (restart, then a heavier repair, then escalate).
func (r *run) selectRows(sr *stageRun, unit *guard.Unit) []*contracts.ActionRow {
	var out []*contracts.ActionRow
	tiered := map[string][]*contracts.ActionRow{}
	var tierOrder []string
	for _, row := range sr.stage.Actions {
		if !sr.holds(row) {
			continue
		}
		if row.Tier > 0 {
			k := conditionKey(row)
			if _, seen := tiered[k]; !seen {
				tierOrder = append(tierOrder, k)
				out = append(out, nil) // placeholder keeps table order
			}
			tiered[k] = append(tiered[k], row)
			continue
		}
		out = append(out, row)
	}
	ti := 0
	for i, row := range out {
		if row != nil {
			continue
		}
		k := tierOrder[ti]
		ti++
		rows := tiered[k]
		sort.SliceStable(rows, func(a, b int) bool { return rows[a].Tier < rows[b].Tier })
		n := unit.Attempts(k)
		if n >= len(rows) {
			n = len(rows) - 1
		}
		out[i] = rows[n]
	}
	return out
}

// act handles one matching row. It returns a verify job when a repair ran.
func (r *run) act(ctx context.Context, u *unitState, unit *guard.Unit, sr *stageRun, row *contracts.ActionRow, ran map[string]string) *verifyJob {
	c := r.c
	key := conditionKey(row)
	ar := &ActionReport{Agent: u.agent, Stage: sr.id, Condition: row.Condition}
	defer r.addAction(ar)
	who := u.agent
	if who == "" {
		who = sr.id
	}
	switch row.Builtin {
	case contracts.ActionLog:
		ar.Action, ar.Status = "log", "logged"
		ar.Reason = nonEmpty(row.Message, row.Condition)
		r.logf("%s: %s: %s (%s)", c.Name, who, ar.Reason, describeHeld(sr, row))
		return nil
	case contracts.ActionMonitor:
		ar.Action, ar.Status = "monitor", "monitor"
		ar.Reason = nonEmpty(row.Message, "monitor: no action")
		return nil
	case contracts.ActionAlert:
		ar.Action, ar.Status = "alert", "alert"
		ar.Reason = nonEmpty(row.Message, row.Condition)
		r.activate(u.agent, "alert: "+row.Condition, fmt.Sprintf("%s: %s (%s)", who, ar.Reason, describeHeld(sr, row)), u.severity)
		return nil
	case contracts.ActionEscalate:
		ar.Action, ar.Status = "escalate", "escalate"
		ar.Reason = nonEmpty(row.Message, row.Condition)
		r.activate(u.agent, "escalate: "+row.Condition, fmt.Sprintf("%s needs a person: %s", who, ar.Reason), contracts.SeverityCritical)
		return nil
	}

	target := sr.target
	if row.On != "" {
		target = steps.Expand(row.On, sr.vars)
	}
	// The command runs as declared; vars reach it as shell variables
	// (steps.Script), and cmd is how reports and guards name it.
	cmd := steps.ShowCommand(row.Action, sr.vars)
	ar.Action = cmd
	dupKey := target + "\x00" + cmd
	if prev, dup := ran[dupKey]; dup {
		ar.Status = "merged"
		ar.Reason = "same repair as condition " + prev + " in this run"
		return nil
	}
	ran[dupKey] = row.Condition

	if r.noRepair != "" {
		ar.Status, ar.Guard, ar.Reason = guard.StatusBlocked, "ledger", "no repairs this run: "+r.noRepair
		return nil
	}
	sev := u.settled.Severity
	if u.settled.Failing && sev == contracts.SeverityUnknown {
		sev = u.raw
	}
	v := r.chain.Decide(unit, guard.Candidate{
		Condition: key, Action: cmd, Severity: sev, Guard: row.Guard,
		ReportOnly: u.reportOnly, DryRun: r.e.opts.DryRun, Fleet: r.fleet,
		Maintenance: r.ledger.Window(u.agent, r.e.opts.Now()),
	})
	ar.Status, ar.Guard, ar.Reason, ar.Trace = v.Status, v.Guard, v.Reason, v.TraceLines()
	if r.e.opts.DryRun {
		return nil
	}
	switch v.Status {
	case guard.StatusRun:
		// handled below
	case guard.StatusPending:
		r.chain.RecordPending(unit, key)
		if k := unit.Conditions[key]; k != nil && !k.PendingSince.IsZero() && !strings.Contains(v.Reason, "pending restart since") {
			ar.Reason = fmt.Sprintf("pending restart since %s (%s)", k.PendingSince.UTC().Format(time.RFC3339), v.Reason)
		}
		r.logf("%s: %s: pending %s (%s): %s", c.Name, who, cmd, row.Condition, ar.Reason)
		return nil
	case guard.StatusEscalate:
		r.chain.RecordEscalated(unit, key)
		r.activate(u.agent, "escalated: "+row.Condition, fmt.Sprintf("%s: repairs exhausted for %s; a person is needed (%s)", who, row.Condition, v.Reason), contracts.SeverityCritical)
		r.logf("%s: %s: escalated %s: %s", c.Name, who, row.Condition, v.Reason)
		return nil
	case guard.StatusAlert:
		if v.Guard == guard.GuardBlastRadius {
			// One contract-wide alert, not one per unit.
			r.activate("*", "circuit open", "circuit breaker open, no repairs this run: "+v.Reason, contracts.SeverityCritical)
			r.logf("%s: %s: not repaired: %s", c.Name, who, v.Reason)
			return nil
		}
		if crashLoopRowHolds(sr) {
			// The contract's own crash-loop row already alerts this run:
			// one fault, one message.
			return nil
		}
		r.activate(u.agent, "crash-loop", fmt.Sprintf("%s is crash-looping; not repairing: %s", who, v.Reason), contracts.SeverityCritical)
		r.logf("%s: %s: not repaired, crash loop: %s", c.Name, who, v.Reason)
		return nil
	default:
		r.logf("%s: %s: %s %s (%s): %s", c.Name, who, v.Status, cmd, row.Condition, v.Reason)
		return nil
	}

	// The only place a repair runs. Report-only agents never get here: the
	// chain returns StatusReportOnly for them whatever else it says.
	if u.reportOnly {
		ar.Status, ar.Reason = guard.StatusReportOnly, "report-only agent: never repaired"
		return nil
	}
	r.fleet.Repairs++
	res, err := r.execAction(ctx, c, target, steps.Script(row.Action, sr.vars))
	grace := r.chain.Grace(row.Guard)
	if r.e.opts.GraceOverride > 0 {
		grace = r.e.opts.GraceOverride
	}
	r.mu.Lock()
	r.chain.RecordRepair(unit, key, grace)
	r.mu.Unlock()
	code := res.ExitCode
	ar.ExitCode = &code
	verb := "repaired"
	if strings.Contains(cmd, "restart") {
		verb = "restarted"
	}
	line := fmt.Sprintf("%s: %s %s (%s)", c.Name, verb, who, describeHeld(sr, row))
	switch {
	case err != nil:
		ar.Status, ar.Reason = "failed", "target unreachable: "+err.Error()
		line = fmt.Sprintf("%s: could not repair %s (%s): %v", c.Name, who, describeHeld(sr, row), err)
	case code != 0 || res.TimedOut:
		ar.Status, ar.Reason = "failed", fmt.Sprintf("exit code %d: %s", code, truncate(strings.TrimSpace(transports.Redact(res.Stderr, secretValues(r.secrets))), 200))
		line = fmt.Sprintf("%s: repair of %s failed (%s): exit %d", c.Name, who, describeHeld(sr, row), code)
	default:
		ar.Status = "ran"
	}
	r.logf("%s", line)
	if c.AlertOn == "repair" {
		text := strings.TrimPrefix(line, c.Name+": ")
		r.message(notify.Message{Contract: c.Name, Agent: u.agent, Condition: row.Condition, Kind: notify.KindRepair, Severity: u.raw.String(), Text: text}, nil)
	}
	return &verifyJob{u: u, unit: unit, sr: sr, row: row, key: key, grace: grace, report: ar}
}

func (r *run) execAction(ctx context.Context, c *contracts.Contract, target, script string) (transports.Result, error) {
	tr, err := r.e.opts.Opener.Open(c, target)
	if err != nil {
		return transports.Result{}, err
	}
	actx, cancel := context.WithTimeout(ctx, r.e.opts.StepTimeout+10*time.Second)
	defer cancel()
	return tr.Exec(actx, transports.Command{Script: script, Shell: "sh", Timeout: r.e.opts.StepTimeout, Env: r.secrets})
}

// describeHeld renders a row's condition with the values it read, e.g.
// "response_pipeline=blocked".
func describeHeld(sr *stageRun, row *contracts.ActionRow) string {
	if f, v, ok := strings.Cut(row.Condition, ":"); ok && !strings.ContainsAny(f, " <>=!`()") {
		f = strings.TrimSpace(f)
		if actual, ok := steps.Lookup(sr.env, f); ok {
			return f + "=" + steps.FormatValue(actual)
		}
		return f + "=" + strings.TrimSpace(v)
	}
	return row.Condition
}

func nonEmpty(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// verify waits each repaired stage's grace, probes it again once, and
// records remediated or remediation failed. Stages verify concurrently.
func (r *run) verify(ctx context.Context, jobs []*verifyJob) {
	byStage := map[*stageRun][]*verifyJob{}
	var order []*stageRun
	for _, j := range jobs {
		if _, ok := byStage[j.sr]; !ok {
			order = append(order, j.sr)
		}
		byStage[j.sr] = append(byStage[j.sr], j)
	}
	var wg sync.WaitGroup
	for _, sr := range order {
		js := byStage[sr]
		wg.Add(1)
		go func() {
			defer wg.Done()
			grace := time.Duration(0)
			for _, j := range js {
				grace = max(grace, j.grace)
			}
			if err := r.e.opts.Sleep(ctx, grace); err != nil {
				return
			}
			again := newStageRun(r.c, sr.stage, sr.id, sr.item)
			r.e.runStage(ctx, r.c, again, r.base, r.secrets)
			known := again.report.Status != StatusUnreachable && again.report.Severity != contracts.SeverityUnknown
			for _, j := range js {
				still, err := evalBool(j.row.Program, again.env)
				remediated := known && err == nil && !still
				r.mu.Lock()
				r.chain.RecordVerify(j.unit, j.key, remediated)
				r.mu.Unlock()
				if remediated {
					j.report.Verify = guard.Remediated
					r.logf("%s: verified %s after %s: %s cleared (now %s)", r.c.Name, nonEmpty(j.u.agent, sr.id), grace, j.row.Condition, again.report.Severity)
				} else {
					j.report.Verify = guard.RemediationFailed
					r.logf("%s: %s still failing after repair and %s grace: %s (now %s)", r.c.Name, nonEmpty(j.u.agent, sr.id), grace, j.row.Condition, again.report.Severity)
				}
			}
		}()
	}
	wg.Wait()
}

// crashLoopRowHolds reports whether the stage's own alert row over
// restarts() holds this run; then the crash-loop guard's alert would say the
// same thing twice.
func crashLoopRowHolds(sr *stageRun) bool {
	for _, row := range sr.stage.Actions {
		if row.Builtin == contracts.ActionAlert && strings.Contains(row.Condition, "restarts(") && sr.holds(row) {
			return true
		}
	}
	return false
}
