package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// Action kinds: what an action-table row is, from the table itself.
const (
	KindRepair   = "repair"   // a literal command
	KindLog      = "log"      // record the message
	KindMonitor  = "monitor"  // no action, keep watching
	KindAlert    = "alert"    // open an incident for the row
	KindEscalate = "escalate" // page a person
)

// Action statuses besides the guard chain's (guard.Status*).
const (
	ActionRan     = "ran"     // the repair ran and exited 0
	ActionFailed  = "failed"  // the repair ran and failed, or its target was unreachable
	ActionMerged  = "merged"  // the same command already ran for another condition this run
	ActionLogged  = "logged"  // a log row
	ActionMonitor = "monitor" // a monitor row
	ActionAlert   = "alert"   // an alert row
	// ActionInterrupted is a repair a stopped run started and never saw
	// end: counted, verified by this run, not run again.
	ActionInterrupted = "interrupted"
)

// rowKind is the kind of an action row, from its Action cell.
func rowKind(row *contracts.ActionRow) string {
	switch row.Builtin {
	case contracts.ActionLog:
		return KindLog
	case contracts.ActionMonitor:
		return KindMonitor
	case contracts.ActionAlert:
		return KindAlert
	case contracts.ActionEscalate:
		return KindEscalate
	}
	return KindRepair
}

// verifyJob is a repair that ran and must be verified after its grace.
type verifyJob struct {
	u       *unit
	sr      *stageRun
	row     *contracts.ActionRow
	key     string
	command string
	seen    string
	grace   time.Duration
	report  *ActionReport
	// before is the unit's findings as the repair found them, for its
	// message.
	before string
}

// repairs is what the repair phase did: every action row that held (and
// every repair a stopped run left, judged), the repairs that ran, to be
// verified, and the incidents its rows and guards raised.
type repairs struct {
	said
	jobs   []*verifyJob
	raised raised
}

// repairing is the repair phase under way: the run it is part of, what it
// has done so far, and what its guards read. It runs in the run's own
// goroutine, one unit at a time.
type repairing struct {
	*run
	repairs
	fleet     guard.Fleet // the contract's units this run, for the blast-radius guard
	blocked   string      // non-empty: repairs are off for the rest of the run, and why
	blockedBy string      // the guard the report names for it
}

// repair is the third phase: every action table's rows that hold pass
// through the guard chain, and the repairs the chain allows run. Only the
// literal commands of action rows ever run, on the stage's target (or the
// row's on=); probe output never reaches a command line. Before any row,
// the repairs a stopped run left are judged on this run's probe
// (verifyInterrupted).
func (r *run) repair(ctx context.Context, units []*unit) repairs {
	p := &repairing{run: r, repairs: repairs{raised: raised{}}, blocked: r.noRepair, blockedBy: r.noRepairBy}
	r.enter("repair", &p.said)
	p.verifyInterrupted(units)
	for _, u := range units {
		if u.agent == "" || u.skipped || u.settled.Severity == contracts.SeverityUnknown && !u.settled.Failing {
			continue // gates are not units of the fleet; unknown says nothing
		}
		p.fleet.Units++
		if u.settled.Failing {
			p.fleet.Failing++
		}
	}
	for _, u := range units {
		if u.skipped {
			continue
		}
		ran := map[string]*merged{} // target+command → the row that took it this run
		for _, sr := range u.stages {
			if sr.report.Status == StatusSkipped {
				continue
			}
			p.readRestartCounter(u, sr)
			for _, row := range selectRows(sr, u.state) {
				if job := p.act(ctx, u, sr, row, ran); job != nil {
					p.jobs = append(p.jobs, job)
					u.repairs = append(u.repairs, job)
				}
			}
		}
	}
	return p.repairs
}

// verifyInterrupted judges every repair a stopped run started and never saw
// end, on this run's probe of its unit: the repair counts (it was recorded
// before it ran) and is verified here, never run again by the guards. An
// intent whose unit this run could not see waits for a run that can.
func (r *repairing) verifyInterrupted(units []*unit) {
	kept := r.ledger.Intents[:0]
	for _, in := range r.ledger.Intents {
		if in.RunID == r.rep.RunID {
			kept = append(kept, in)
			continue
		}
		var u *unit
		for _, x := range units {
			if x.key == in.Unit {
				u = x
			}
		}
		ar := &ActionReport{Agent: in.Unit, Condition: in.Condition, Kind: KindRepair, Action: in.Command, Status: ActionInterrupted,
			Reason: fmt.Sprintf("started by run %s at %s and never recorded as ended (contractd stopped during it): counted as a repair, verified, not run again",
				in.RunID, in.Started.UTC().Format(time.RFC3339))}
		if u != nil {
			ar.Agent = u.agent
		}
		if u == nil || !u.observed() || r.e.opts.DryRun {
			ar.Reason += "; not verified yet: the unit was not observed"
			r.actions = append(r.actions, ar)
			kept = append(kept, in)
			continue
		}
		remediated := !u.held[in.Condition]
		r.chain.RecordVerify(u.state, in.Condition, remediated)
		ar.Verify = guard.RemediationFailed
		if remediated {
			ar.Verify = guard.Remediated
		}
		r.actions = append(r.actions, ar)
		r.unitEvent(slog.LevelWarn, u, "repair interrupted", "stopped_run", in.RunID, "action", in.Command, "verify", ar.Verify)
	}
	r.ledger.Intents = kept
}

// readRestartCounter feeds a restart count read from the target (pm2
// `restarts`, systemd `NRestarts`) to the crash-loop guard, once per unit.
func (r *repairing) readRestartCounter(u *unit, sr *stageRun) {
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
			r.chain.RecordRestartCounter(u.state, int64(n))
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

// selectRows returns the rows whose condition holds, in table order. Rows
// of one condition with tiers are ordered by tier, and the row for the
// next attempt is chosen (guard.PickTier: restart, then a heavier repair,
// then escalate; the last tier repeats).
func selectRows(sr *stageRun, state *guard.Unit) []*contracts.ActionRow {
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
		tiers := make([]int, len(rows))
		for j, row := range rows {
			tiers[j] = row.Tier
		}
		out[i] = rows[guard.PickTier(tiers, state.Attempts(k))]
	}
	return out
}

// merged is the first row that asked for a command in a run, and its
// repair if it ran: a second row asking for the same command is merged
// into it.
type merged struct {
	condition string
	job       *verifyJob
}

// act handles one row that holds. It returns a verify job when a repair ran.
func (r *repairing) act(ctx context.Context, u *unit, sr *stageRun, row *contracts.ActionRow, ran map[string]*merged) *verifyJob {
	key := conditionKey(row)
	kind := rowKind(row)
	ar := &ActionReport{Agent: u.agent, Stage: sr.id, Condition: row.Condition, Kind: kind}
	defer func() { r.actions = append(r.actions, ar) }()
	seen := describeHeld(sr, row)
	switch kind {
	case KindLog:
		ar.Action, ar.Status = "log", ActionLogged
		ar.Reason = nonEmpty(row.Message, row.Condition)
		r.unitEvent(slog.LevelInfo, u, ar.Reason, "condition", row.Condition, "seen", seen)
		return nil
	case KindMonitor:
		ar.Action, ar.Status = "monitor", ActionMonitor
		ar.Reason = nonEmpty(row.Message, "monitor: no action")
		return nil
	case KindAlert:
		ar.Action, ar.Status = "alert", ActionAlert
		ar.Reason = nonEmpty(row.Message, row.Condition)
		r.raised.add(r.c.Name, &intent{unit: u, stage: sr, row: row, source: guard.SourceRow, condition: "alert: " + row.Condition,
			severity: steps.Worst(u.severity, contracts.SeverityDegraded), text: fmt.Sprintf("%s: %s (%s)", u.name(), ar.Reason, seen)})
		return nil
	case KindEscalate:
		ar.Action, ar.Status = "escalate", guard.StatusEscalate
		ar.Reason = nonEmpty(row.Message, row.Condition)
		r.raised.add(r.c.Name, &intent{unit: u, stage: sr, row: row, source: guard.SourceRow, condition: "escalate: " + row.Condition,
			severity: contracts.SeverityCritical, pages: true, text: fmt.Sprintf("%s needs a person: %s (%s)", u.name(), ar.Reason, seen)})
		return nil
	}

	target := sr.target
	if row.On != "" {
		target = sr.expandTarget(row.On)
	}
	// The command runs as declared; vars reach it as shell variables
	// (steps.Script), and cmd is how reports and guards name it.
	cmd := steps.ShowCommand(row.Action, sr.vars)
	ar.Action = cmd
	dupKey := target + "\x00" + cmd
	if prev, dup := ran[dupKey]; dup {
		ar.Status = ActionMerged
		ar.Reason = "same repair as condition " + prev.condition + " in this run"
		if prev.job != nil {
			prev.job.seen += ", " + seen // the repair answers both
		}
		return nil
	}
	first := &merged{condition: row.Condition}
	ran[dupKey] = first

	if r.blocked != "" {
		ar.Status, ar.Guard, ar.Reason = guard.StatusBlocked, r.blockedBy, "no repairs this run: "+r.blocked
		return nil
	}
	sev := u.settled.Severity
	if u.settled.Failing && sev == contracts.SeverityUnknown {
		sev = u.raw
	}
	v := r.chain.Decide(u.state, guard.Candidate{
		Condition: key, Action: cmd, Severity: sev, Guard: row.Guard,
		ReportOnly: u.reportOnly, DryRun: r.e.opts.DryRun, Fleet: r.fleet,
		Maintenance: r.window(u.agent), Suppressed: u.suppressed,
	})
	ar.Status, ar.Guard, ar.Reason, ar.Trace = v.Status, v.Guard, v.Reason, v.TraceLines()
	if r.e.opts.DryRun {
		return nil
	}
	switch v.Status {
	case guard.StatusRun:
		// handled below
	case guard.StatusPending:
		r.chain.RecordPending(u.state, key)
		if k := u.state.Conditions[key]; k != nil {
			ar.PendingSince = k.PendingSince
		}
		if r.changed(u, key, v) {
			r.unitEvent(slog.LevelInfo, u, "repair held", "status", v.Status, "guard", v.Guard, "action", cmd, "condition", row.Condition, "reason", ar.Reason)
		}
		return nil
	case guard.StatusEscalate:
		r.chain.RecordEscalated(u.state, key)
		r.raised.add(r.c.Name, &intent{unit: u, stage: sr, row: row, source: guard.SourceGuard, condition: "escalated: " + row.Condition,
			severity: contracts.SeverityCritical, pages: true, text: fmt.Sprintf("%s: repairs exhausted for %s; a person is needed (%s)", u.name(), row.Condition, v.Reason)})
		r.unitEvent(slog.LevelWarn, u, "repairs escalated: a person is needed", "action", cmd, "condition", row.Condition, "guard", v.Guard, "reason", v.Reason)
		return nil
	case guard.StatusAlert:
		if r.guardAlert(u, sr, row, v) {
			ar.Status = guard.StatusEscalate
		}
		return nil
	default:
		if r.changed(u, key, v) {
			r.unitEvent(slog.LevelInfo, u, "repair held", "status", v.Status, "guard", v.Guard, "action", cmd, "condition", row.Condition, "reason", strings.TrimPrefix(v.Reason, string(v.Status)+": "))
		}
		if v.Guard == guard.GuardBudget && u.failing() && !u.critical() {
			// A critical unit is relayed, and its relay says it is down; a
			// degraded one is not, so the budget holding its repair back
			// says so itself, once (an incident, resolved when the unit
			// is healthy again).
			r.raised.add(r.c.Name, &intent{unit: u, stage: sr, source: guard.SourceGuard, condition: "held: " + row.Condition,
				severity: u.final, text: fmt.Sprintf("%s is %s and its repair is held by its budget: %s → `%s` not run (%s)",
					u.name(), u.final, seen, cmd, strings.TrimPrefix(v.Reason, string(v.Status)+": "))})
		}
		return nil
	}

	// The only place a repair runs. Report-only agents never get here: the
	// chain returns StatusReportOnly for them whatever else it says.
	if u.reportOnly {
		ar.Status, ar.Reason = guard.StatusReportOnly, "report-only agent: never repaired"
		return nil
	}
	grace := r.chain.Grace(row.Guard)
	if r.e.opts.GraceOverride > 0 {
		grace = r.e.opts.GraceOverride
	}
	// Write-ahead: the repair is in the ledger before its command starts.
	intent, err := r.intend(u, key, cmd, target, grace)
	if err != nil {
		r.blocked = err.Error()
		ar.Status, ar.Guard, ar.Reason = guard.StatusBlocked, "ledger", "not run: "+err.Error()
		r.error("repairs stopped: " + err.Error())
		r.unitEvent(slog.LevelError, u, "repair not run: its intent cannot be recorded", "action", cmd, "condition", row.Condition, "error", err)
		return nil
	}
	r.fleet.Repairs++
	actx := WithProbe(ctx, Probe{Contract: r.c.Name, Stage: sr.id, Agent: u.agent, Action: cmd})
	command := transports.Command{Script: steps.Script(row.Action, sr.vars), Shell: "sh", Env: r.secrets}
	if r.c.TargetNamed(target).SudoCommands() {
		// The declared words, run as `sudo -n -- …` and nothing else: no
		// shell between sudo and the command, no secrets (sudo would
		// not pass them on). Lint made sure they fill literally.
		ar.Sudo = true
		argv, err := contracts.SudoArgv(row.Action, sr.vars, r.c.Secrets)
		if err != nil {
			r.ended(intent, -1)
			ar.Status, ar.Reason = ActionFailed, "not run: it cannot run through sudo: "+err.Error()
			r.unitEvent(slog.LevelWarn, u, "repair not run: it cannot run through sudo", "action", cmd, "condition", row.Condition, "error", err)
			return nil
		}
		command = transports.Command{Script: steps.SudoScript(argv), Shell: "sh"}
	}
	res, err := r.execAction(actx, row, target, command)
	if err != nil {
		r.ended(intent, -1)
	} else {
		r.ended(intent, res.ExitCode)
	}
	code := res.ExitCode
	ar.ExitCode = &code
	ar.Stdout = transports.Shorten(transports.Redact(res.Stdout, r.redact), 2048)
	ar.Stderr = transports.Shorten(transports.Redact(res.Stderr, r.redact), 2048)
	switch {
	case err != nil:
		ar.Status, ar.Reason = ActionFailed, "target unreachable: "+err.Error()
		r.unitEvent(slog.LevelWarn, u, "repair failed: target unreachable", "action", cmd, "condition", row.Condition, "seen", seen, "error", err)
	case res.TimedOut:
		timeout, _ := r.e.actionTimeouts(row)
		ar.Status, ar.Reason = ActionFailed, strings.TrimSuffix(fmt.Sprintf("timed out after %s (the repair timeout) and was killed: %s", contracts.FormatDuration(timeout), transports.Shorten(strings.TrimSpace(transports.Redact(res.Stderr, r.redact)), 200)), ": ")
		r.unitEvent(slog.LevelWarn, u, "repair failed: timed out and killed", "action", cmd, "condition", row.Condition, "seen", seen, "timeout", contracts.FormatDuration(timeout))
	case code != 0:
		ar.Status, ar.Reason = ActionFailed, fmt.Sprintf("exit code %d: %s", code, transports.Shorten(strings.TrimSpace(transports.Redact(res.Stderr, r.redact)), 200))
		r.unitEvent(slog.LevelWarn, u, "repair failed", "action", cmd, "condition", row.Condition, "seen", seen, "exit_code", code, "error", ar.Reason)
	default:
		ar.Status = ActionRan
	}
	job := &verifyJob{u: u, sr: sr, row: row, key: key, command: cmd, seen: seen, grace: grace, report: ar}
	job.before = unitSummary(u)
	first.job = job
	if ar.Status == ActionRan {
		// One log line per repair, in the author's words when the row or
		// the contract shapes repair messages.
		r.unitEvent(slog.LevelInfo, u, "repair ran", "action", cmd, "condition", row.Condition, "seen", seen,
			"text", r.shape(row, repairData(job, fmt.Sprintf("repaired %s (%s): `%s`", u.name(), seen, cmd)), &r.said))
	}
	return job
}

// changed records the guard's answer for a repair it held back and reports
// whether it differs from the last one logged for the condition: a repair
// held run after run for the same reason (slowed, pending, report-only) is
// logged once, and again when the answer changes. The report and `why`
// keep every run's answer.
func (r *repairing) changed(u *unit, key string, v guard.Verdict) bool {
	k := u.state.Conditions[key]
	if k == nil {
		return true
	}
	said := string(v.Status) + "/" + v.Guard
	if k.Said == said {
		return false
	}
	k.Said = said
	return true
}

// guardAlert handles a repair the chain turned into an alert: the circuit
// breaker (one contract-wide alert) or the crash-loop guard (alert, or
// escalate when the contract says `then: escalate`).
// It reports whether the crash loop was escalated (then: escalate): the
// crash-loop incident pages a person; the guard, not an escalation mark,
// keeps repairs off while the loop lasts, so no second incident opens.
func (r *repairing) guardAlert(u *unit, sr *stageRun, row *contracts.ActionRow, v guard.Verdict) bool {
	if v.Guard == guard.GuardBlastRadius {
		r.raised.add(r.c.Name, &intent{source: guard.SourceGuard, condition: "circuit open", severity: contracts.SeverityCritical,
			text: "circuit breaker open, no repairs this run: " + v.Reason})
		r.unitEvent(slog.LevelWarn, u, "repair held: circuit breaker open", "status", v.Status, "guard", v.Guard, "condition", row.Condition, "reason", v.Reason)
		return false
	}
	if r.c.Guards.CrashLoop.Then == contracts.CrashLoopEscalate {
		r.raised.add(r.c.Name, &intent{unit: u, stage: sr, row: row, source: guard.SourceGuard, condition: "crash-loop",
			severity: contracts.SeverityCritical, pages: true, text: fmt.Sprintf("%s is crash-looping and needs a person; not repairing: %s", u.name(), v.Reason)})
		r.unitEvent(slog.LevelWarn, u, "repairs escalated: crash loop", "guard", v.Guard, "condition", row.Condition, "reason", v.Reason)
		return true
	}
	for _, other := range sr.stage.Actions {
		if other.Builtin == contracts.ActionAlert && other.CallsRestarts && sr.holds(other) {
			// The contract's own crash-loop row alerts this run: one
			// fault, one message.
			return false
		}
	}
	r.raised.add(r.c.Name, &intent{unit: u, stage: sr, row: row, source: guard.SourceGuard, condition: "crash-loop",
		severity: contracts.SeverityCritical, text: fmt.Sprintf("%s is crash-looping; not repairing: %s", u.name(), v.Reason)})
	r.unitEvent(slog.LevelWarn, u, "repair held: crash loop", "status", v.Status, "guard", v.Guard, "condition", row.Condition, "reason", v.Reason)
	return false
}

// execAction runs one repair command of row on its target, within the
// row's timeout.
func (r *run) execAction(ctx context.Context, row *contracts.ActionRow, target string, cmd transports.Command) (transports.Result, error) {
	tr, err := r.e.opts.Opener.Open(r.c, target)
	if err != nil {
		return transports.Result{}, err
	}
	timeout, deadline := r.e.actionTimeouts(row)
	actx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cmd.Timeout = timeout
	return tr.Exec(actx, cmd)
}

// describeHeld renders what a row's condition saw: "field=value" for the
// `field: value` shorthand, else the condition with the values it read,
// e.g. `probe.stdout != "up" (probe.stdout=down)`.
func describeHeld(sr *stageRun, row *contracts.ActionRow) string {
	env := sr.current().env
	if f, v, ok := strings.Cut(row.Condition, ":"); ok && !strings.ContainsAny(f, " <>=!`()") {
		f = strings.TrimSpace(f)
		if actual, ok := steps.Lookup(env, f); ok {
			return f + "=" + steps.FormatValue(actual)
		}
		return f + "=" + strings.TrimSpace(v)
	}
	var seen []string
	for _, p := range row.Reads {
		if v, ok := steps.Lookup(env, p); ok {
			if _, fn := v.(func(string, string) int); !fn {
				seen = append(seen, p+"="+transports.Shorten(steps.FormatValue(v), 80))
			}
		}
	}
	if len(seen) == 0 {
		return row.Condition
	}
	return row.Condition + " (" + strings.Join(seen, ", ") + ")"
}

func nonEmpty(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}
