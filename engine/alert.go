package engine

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// intent is an incident the run raises: a unit's relay, an alert or
// escalate row, a guard (crash loop, repairs exhausted, circuit open), a
// gate that is down, or a contract-wide escalation row.
type intent struct {
	unit      *unit     // nil for a gate or the whole contract
	stage     *stageRun // the stage whose row or guard raised it
	row       *contracts.ActionRow
	source    string // guard.Source*
	agent     string // the incident's owner: unit name, gate id, or "*"
	condition string
	severity  contracts.Severity
	text      string
	// pages is set for escalations (an escalate row, repairs exhausted, a
	// crash loop with `then: escalate`): they page even under
	// `alert_on: repair`.
	pages bool
}

// raised is the incidents a run raises, by key (guard.IncidentKey): the
// repair phase's rows and guards raise theirs, then the alert phase adds
// the slow-retry guard's, a gate's and the escalation table's, and decides
// them all.
type raised map[string]*intent

// add records an incident intent of contract's for this run; the first
// intent for a key wins.
func (rs raised) add(contract string, in *intent) {
	if in.agent == "" {
		in.agent = guard.AllUnits
		if in.unit != nil {
			in.agent = in.unit.name()
		}
	}
	key := guard.IncidentKey(contract, in.agent, in.condition)
	if _, ok := rs[key]; !ok {
		rs[key] = in
	}
}

// alerting is the alert phase under way: the run it is part of, what the
// phases before it produced, and the messages and errors it has so far.
type alerting struct {
	*run
	said
	seen   probed
	units  []*unit
	raised raised
	down   map[string]*targetDown // the contract's targets a host check found down (depend)
}

// alert is the fifth phase. It takes the stages as probed, the units at
// their state after repair and the incidents the repair phase raised, and
// decides every incident of the run:
//
//   - an incident opens once (one message), reminds after the repeat
//     interval, and resolves exactly once;
//   - a unit's relay is held while another incident of the same unit speaks
//     for it (its alert row, the crash-loop guard, an escalation), so a
//     more specific message replaces it instead of resolving it;
//   - an incident whose condition is gone resolves only when its unit is
//     observed and no longer failing: never because a different row or
//     guard took over, and never for a unit the run could not see;
//   - a unit repaired and verified healthy in this run opens nothing: one
//     message says what was repaired (a resolve, when an incident was open).
//
// It returns the messages to deliver and every alert decision for the
// report (those alert_on or a dry run keep back, with why), in the order
// it made them; it changes the ledger's incidents.
func (r *run) alert(seen probed, units []*unit, in raised, down map[string]*targetDown) said {
	a := &alerting{run: r, seen: seen, units: units, raised: in, down: down}
	r.enter("alert", &a.said)
	a.decide()
	return a.said
}

// decide raises the phase's own incidents (slow retry, a gate down, the
// escalation table's), decides every incident raised, and gives each
// repair no incident message told a message of its own.
func (r *alerting) decide() {
	r.judged(r.units)
	r.flapping()
	r.maintenance()
	r.targets()
	r.slowRetry()
	r.unknown()
	for _, sr := range r.seen.stages {
		if sr.stage.Gate && sr.report.Status != StatusSkipped && !r.seen.gateOK && sr.id == r.seen.downGate {
			r.raised.add(r.c.Name, &intent{source: guard.SourceGate, agent: sr.id, condition: "down", severity: contracts.SeverityCritical,
				text: fmt.Sprintf("gate %s is down (%s); the stages after it are skipped", sr.id, stageSummary(sr))})
		}
	}
	if r.seen.gateOK {
		r.escalate()
	}
	for key, in := range r.raised {
		// A row's alert is judged on the unit as it is now: a repair that
		// cleared the row's condition leaves nothing to say about it.
		if in.source == guard.SourceRow && in.stage != nil && in.stage.verified != nil && !in.stage.holds(in.row) {
			delete(r.raised, key)
		}
	}

	inc := r.chain.Incidents(r.ledger.Incidents)
	if r.e.opts.DryRun {
		inc.State = cloneIncidents(r.ledger.Incidents)
	}
	speaks := map[string]string{} // unit → the non-relay incident that speaks for it
	for _, key := range sortedKeys(r.raised) {
		if in := r.raised[key]; in.unit != nil && in.source != guard.SourceRelay {
			if _, ok := speaks[in.agent]; !ok {
				speaks[in.agent] = in.condition
			}
		}
	}
	for _, key := range sortedKeys(r.raised) {
		in := r.raised[key]
		hold := ""
		u := r.unitOf(in.agent)
		switch {
		case in.source == guard.SourceMaintenance:
			if i := inc.State[key]; i != nil && !i.Resolved {
				hold = "announced when it opened" // no reminder: its end is the next message
			}
		case !r.seen.gateOK && in.agent != r.seen.downGate:
			hold = "its gate is down"
		case r.window(in.agent) != nil:
			hold = r.window(in.agent).String()
		case u != nil && u.suppressed != nil:
			hold = "suppressed: " + u.suppressed.Reason
		case u != nil && u.flap.Flapping && in.source != guard.SourceFlapping:
			hold = fmt.Sprintf("flapping (%.0f%% of its last runs changed state): one message when it settles", u.flap.Percent)
		case in.source == guard.SourceRelay && speaks[in.agent] != "":
			hold = "covered by " + speaks[in.agent]
		}
		act := inc.Observe(key, true, hold, guard.Incident{Agent: in.agent, Condition: in.condition, Source: in.source, Severity: in.severity.String()})
		r.announce(act, in, in.severity)
	}
	for _, key := range sortedKeys(openSet(inc)) {
		if _, active := r.raised[key]; active {
			continue
		}
		i := inc.State[key]
		in := &intent{agent: i.Agent, condition: i.Condition, source: i.Source}
		_ = in.severity.UnmarshalText([]byte(i.Severity))
		ok, why := r.mayResolve(in)
		if !ok {
			continue
		}
		act := inc.Observe(key, false, "", *i)
		in.text = why
		r.announce(act, in, severityNow(in))
	}
	for _, u := range r.units {
		if len(u.repairs) > 0 && !u.told && !u.slowed && !r.quietRepair(u, inc) {
			// No incident message told this repair: it gets its own (a
			// slowed unit's repairs are told by its slow-retry incident).
			cond := u.repairs[0].row.Condition
			r.queue(&r.said, notify.Message{Contract: r.c.Name, Agent: u.name(), Condition: cond, Kind: notify.KindRepair, Severity: u.final.String(), Text: r.repairText(u)},
				&AlertReport{Key: guard.IncidentKey(r.c.Name, u.name(), cond), Agent: u.name(), Condition: cond, Kind: notify.KindRepair, Severity: u.final.String()})
		}
	}
	if !r.e.opts.DryRun {
		inc.Prune(30 * 24 * time.Hour)
	}
}

// flapping feeds each unit as the run saw it to flap detection and raises
// the flapping incident of each unit that flaps: one message when it
// starts, one when it stops (mayResolve), none in between; the unit's
// other incidents are held meanwhile.
func (r *alerting) flapping() {
	f, on := r.chain.Flapping()
	if !on {
		return
	}
	for _, u := range r.units {
		if u.skipped || u.state == nil {
			continue
		}
		seen := u.seenAs()
		if u.suppressed != nil {
			seen = contracts.SeveritySuppressed // its dependency's change, not its own
		}
		u.flap = f.Observe(u.state, seen)
		if !u.flap.Flapping {
			continue
		}
		r.raised.add(r.c.Name, &intent{unit: u, source: guard.SourceFlapping, condition: "flapping", severity: steps.Worst(u.raw, u.final),
			text: fmt.Sprintf("%s is flapping: its state changed in %.0f%% of its last %d runs (more than %g%%); messages about it wait until it settles below %g%%, and so do its repairs%s",
				u.name(), u.flap.Percent, f.Runs, f.High, f.Low, map[bool]string{true: " (no: flapping.repair is on)", false: ""}[f.Repair])})
	}
}

// maintenance raises the incident of each announced maintenance window
// that is open: a message when it opens, one when it ends.
func (r *alerting) maintenance() {
	for _, a := range r.recurring.Announced() {
		if a.Open == nil {
			continue
		}
		r.raised.add(r.c.Name, &intent{source: guard.SourceMaintenance, condition: "maintenance: " + a.Window.String(), severity: contracts.SeverityHealthy,
			text: fmt.Sprintf("maintenance window started: %s, until %s; repairs paused and new alerts held", a.Window, a.Open.Until.UTC().Format(time.RFC3339))})
	}
}

// targets raises the incident of each target of the contract a host
// check found down that suppresses units: the one alert for them.
func (r *alerting) targets() {
	for _, host := range sortedKeys(r.down) {
		td := r.down[host]
		if !td.failing() {
			continue // not yet unreachable_after runs in a row
		}
		name, also := td.names[0], ""
		if len(td.names) > 1 {
			also = ", also named " + strings.Join(td.names[1:], ", ")
		}
		r.raised.add(r.c.Name, &intent{source: guard.SourceTarget, agent: contracts.TargetPrefix + name, condition: "unreachable", severity: contracts.SeverityCritical,
			text: fmt.Sprintf("target %s (%s%s) cannot be reached: %s%s", name, r.c.Chain(name), also, steps.FirstLine(td.err.Error()), suppressedNote(td.unitNames()))})
	}
}

// slowRetry raises the slow-retry incident of every unit whose repairs the
// guard slowed (verify recorded it) and whose repair condition held this
// run: one message when it slows, one when the unit is healthy again (the
// incident resolves), and no message for each slow repair in between.
func (r *alerting) slowRetry() {
	for _, u := range r.units {
		if u.skipped || u.reportOnly || u.state == nil {
			continue
		}
		for _, sr := range u.stages {
			for _, row := range sr.stage.Actions {
				s := r.chain.SlowRetry(row.Guard)
				if row.Builtin != "" || !u.held[conditionKey(row)] || !s.Slowed(u.state) {
					continue
				}
				u.slowed = true
				// No row: the row's Message words its repairs, not this.
				r.raised.add(r.c.Name, &intent{unit: u, stage: sr, source: guard.SourceGuard, condition: "slow-retry",
					severity: contracts.SeverityCritical, text: fmt.Sprintf("%s: %d repairs in a row did not help (`%s`); repairing only every %s (%dx the %s interval) until it is healthy again",
						u.name(), u.state.Slow.Failed, steps.ShowCommand(row.Action, sr.vars), contracts.FormatDuration(time.Duration(s.Factor)*s.Interval()), s.Factor, contracts.FormatDuration(s.Interval()))})
			}
		}
	}
}

// unknown raises the unknown incident of every unit the run could not
// judge for unknown_after runs in a row (a row none of whose cells held, a
// value the output lacks): a monitor that cannot see says so, once, and
// says so again when it sees (mayResolve).
func (r *alerting) unknown() {
	for _, u := range r.units {
		if u.skipped || u.raw != contracts.SeverityUnknown || u.final != contracts.SeverityUnknown || !r.chain.UnknownFor(u.state) {
			continue
		}
		r.raised.add(r.c.Name, &intent{unit: u, source: guard.SourceUnknown, condition: "unknown", severity: contracts.SeverityUnknown,
			text: fmt.Sprintf("%s is unknown, %d runs in a row: the monitor cannot judge it (%s)", u.name(), u.state.Unknown, unitSummary(u))})
	}
}

// quietRepair reports whether a repair of u this run is no news: the unit
// is still failing and an incident of it that is still true this run is
// already open, so the person it paged knows; the report and the log keep
// the repair. Under alert_on: repair every repair is the news.
func (r *alerting) quietRepair(u *unit, inc guard.Incidents) bool {
	if r.c.AlertOn == contracts.AlertOnRepair || !u.failing() {
		return false
	}
	for key, in := range r.raised {
		if i := inc.State[key]; in.agent == u.name() && i != nil && !i.Resolved {
			return true
		}
	}
	return false
}

// mayResolve decides whether an open incident whose condition is not active
// this run resolves now, and the message that says so.
func (r *alerting) mayResolve(in *intent) (bool, string) {
	switch in.source {
	case guard.SourceMaintenance:
		return true, fmt.Sprintf("maintenance window ended: %s", strings.TrimPrefix(in.condition, "maintenance: "))
	case guard.SourceTarget:
		name := strings.TrimPrefix(in.agent, contracts.TargetPrefix)
		for _, td := range r.down {
			if slices.Contains(td.names, name) {
				return false, ""
			}
		}
		text := fmt.Sprintf("target %s is reached again (%s)", name, r.c.Chain(name))
		if units := behind(r.c, name); len(units) > 0 {
			text += "; judged on their own again: " + strings.Join(units, ", ")
		}
		return true, text
	}
	if in.agent == guard.AllUnits {
		return r.seen.gateOK, fmt.Sprintf("%s cleared", in.condition)
	}
	for _, sr := range r.seen.stages {
		if sr.stage.Gate && sr.id == in.agent {
			return sr.report.Status != StatusSkipped && sr.id != r.seen.downGate, fmt.Sprintf("gate %s is up again", sr.id)
		}
	}
	u := r.unitOf(in.agent)
	if u == nil {
		return true, fmt.Sprintf("%s is no longer in the contract: %s closed", in.agent, in.condition)
	}
	in.unit = u
	if in.source == guard.SourceFlapping {
		if u.flap.Flapping || u.skipped {
			return false, ""
		}
		return true, fmt.Sprintf("%s stopped flapping (its state changed in %.0f%% of its last runs); now %s", u.name(), u.flap.Percent, u.shown())
	}
	if u.flap.Flapping || u.suppressed != nil {
		// Held: a flapping unit speaks once it settles, a suppressed one
		// once its dependency is back and it is judged on its own.
		return false, ""
	}
	if in.source == guard.SourceUnknown {
		// Judged again, whatever it is now: a fault it shows now is an
		// incident of its own.
		judged := !u.skipped && u.raw != contracts.SeverityUnknown
		return judged, fmt.Sprintf("%s is judged again (now %s)", u.name(), u.final)
	}
	if !u.observed() || u.failing() || u.final == contracts.SeverityUnknown {
		// Unseen, still failing (another row or guard speaks for it now),
		// or not judged: nothing resolves on unknown, which the unknown
		// incident speaks for once it lasts.
		return false, ""
	}
	if in.source == guard.SourceRelay {
		return true, fmt.Sprintf("%s is %s again (was %s)", u.name(), u.final, in.condition)
	}
	return true, fmt.Sprintf("%s: %s cleared (now %s)", u.name(), in.condition, u.final)
}

// isRoot reports whether an incident is about a unit or gate that fails
// by itself (critical, or unreachable) and not because of a dependency:
// its message names the units of the fleet that depend on it.
func (r *alerting) isRoot(in *intent) bool {
	if in.source == guard.SourceGate {
		return true
	}
	u := in.unit
	if u == nil || u.suppressed != nil || in.source == guard.SourceFlapping {
		return false
	}
	return u.critical() || u.final == contracts.SeverityUnreachable
}

// suppressedNote is what a root cause's message adds about the units it
// suppresses: "; 5 units suppressed: a/web, b/web, c/api, d/db and 1
// more"; "" when none depends on it.
func suppressedNote(units []string) string {
	if len(units) == 0 {
		return ""
	}
	shown := units
	more := ""
	if len(shown) > 4 {
		shown, more = shown[:4], fmt.Sprintf(" and %d more", len(units)-4)
	}
	noun := "units"
	if len(units) == 1 {
		noun = "unit"
	}
	return fmt.Sprintf("; %d %s suppressed: %s%s", len(units), noun, strings.Join(shown, ", "), more)
}

// severityNow is the severity a resolve message carries: the unit's.
func severityNow(in *intent) contracts.Severity {
	if in.unit != nil {
		return in.unit.final
	}
	return contracts.SeverityHealthy
}

func (r *alerting) unitOf(name string) *unit {
	for _, u := range r.units {
		if u.name() == name {
			return u
		}
	}
	return nil
}

// announce turns an incident decision into a message, unless nothing is to
// be sent.
func (r *alerting) announce(act guard.Action, in *intent, sev contracts.Severity) {
	if act.Send == guard.SendNothing {
		return
	}
	send := r.sendable(act.Send, in, sev)
	text := in.text
	shaped := false // text is already in the author's words
	if u := in.unit; u != nil && len(u.repairs) > 0 && !u.told && send {
		// The unit's repair is told once, in this message.
		u.told = true
		if act.Send == guard.SendResolved {
			text, shaped = r.repairText(u), true
		} else {
			text += "; " + r.repairText(u)
		}
	}
	if in.agent == guard.AllUnits && act.Send != guard.SendResolved && send {
		// A contract-wide message (the network is down, say) speaks for the
		// units whose repairs no message has told yet.
		var notes []string
		for _, u := range r.units {
			if len(u.repairs) > 0 && !u.told {
				u.told = true
				notes = append(notes, r.repairText(u))
			}
		}
		if len(notes) > 0 {
			text += "; " + strings.Join(notes, "; ")
		}
	}
	if act.Send == guard.SendReminder {
		text = fmt.Sprintf("%s (still open since %s)", text, act.Incident.OpenedAt.UTC().Format(time.RFC3339))
	}
	if act.Send == guard.SendOpen && r.isRoot(in) {
		text += suppressedNote(r.fleet.Dependents(r.c.Name, in.agent))
	}
	if !shaped {
		d := messageData(act.Send, in.unit, in.condition, text)
		d.Unit, d.Severity = in.agent, sev.String()
		if in.row != nil && in.stage != nil {
			d.Seen = describeHeld(in.stage, in.row)
		}
		text = r.shape(in.row, d, &r.said)
	}
	m := notify.Message{Contract: r.c.Name, Agent: in.agent, Condition: in.condition, Kind: act.Send, Severity: sev.String(), Text: text,
		IncidentSeverity: act.Incident.Severity, OpenedAt: act.Incident.OpenedAt}
	ar := &AlertReport{Key: act.Key, Agent: in.agent, Condition: in.condition, Kind: act.Send, Severity: sev.String()}
	if i := r.ledger.Incidents[act.Key]; i != nil && !r.e.opts.DryRun {
		// What a resend of the open incident says (alertmanager).
		i.Text, i.Unsent = transports.Printable(transports.Redact(text, r.redact)), !send
	}
	if !send {
		r.withhold(&r.said, m, ar, "alert_on: "+r.c.AlertOn+": recorded, not sent")
		return
	}
	r.queue(&r.said, m, ar)
}

// sendable reports whether alert_on lets a message reach the notifiers:
// `change` sends every incident message and every repair; `repair` sends
// repairs and escalations only; `critical` keeps incidents below critical
// out (their resolves included).
func (r *run) sendable(kind string, in *intent, sev contracts.Severity) bool {
	if kind == notify.KindRepair || in != nil && (in.pages || in.source == guard.SourceMaintenance) {
		return true
	}
	switch r.c.AlertOn {
	case contracts.AlertOnRepair:
		return false
	case contracts.AlertOnCritical:
		// A unit that stays unknown is sent as a critical one is: a
		// monitor that cannot see pages like a fault.
		if kind == guard.SendResolved {
			return in.severity == contracts.SeverityCritical || in.severity == contracts.SeverityUnreachable || in.severity == contracts.SeverityUnknown
		}
		return sev == contracts.SeverityCritical || sev == contracts.SeverityUnreachable || in != nil && in.source == guard.SourceUnknown
	}
	return true
}

// repairText says what the unit's repairs this run did, e.g. "repaired
// abiba: response_pipeline=blocked → `pm2 restart abiba-zulip`, verified
// healthy after 30s", each shaped by its row's template when it has one.
func (r *alerting) repairText(u *unit) string {
	var parts []string
	for _, j := range u.repairs {
		var text string
		switch {
		// A repair that failed (cut off, or an error exit) may still have
		// done its work: the verification after grace says how the unit
		// is, and the message leads with that.
		case j.report.Status == ActionFailed && j.report.Verify == guard.Remediated && u.final == contracts.SeverityHealthy:
			text = fmt.Sprintf("%s is healthy after %s, though its repair failed: %s → `%s`: %s", u.name(), j.grace, j.seen, j.command, j.report.Reason)
		case j.report.Status == ActionFailed && (j.report.Verify == guard.Remediated || j.report.Verify == guard.Undecided):
			text = fmt.Sprintf("repair of %s failed: %s → `%s`: %s; after %s the condition is gone all the same (now %s)", u.name(), j.seen, j.command, j.report.Reason, j.grace, u.final)
		case j.report.Status == ActionFailed:
			text = fmt.Sprintf("repair of %s failed: %s → `%s`: %s", u.name(), j.seen, j.command, j.report.Reason)
		case j.report.Verify == guard.Remediated && u.final == contracts.SeverityHealthy:
			text = fmt.Sprintf("repaired %s: %s → `%s`, verified healthy after %s", u.name(), j.seen, j.command, j.grace)
		case j.report.Verify == guard.Remediated:
			text = fmt.Sprintf("repaired %s: %s → `%s`, cleared after %s; still %s", u.name(), j.seen, j.command, j.grace, u.final)
		case j.report.Verify == guard.Undecided:
			text = fmt.Sprintf("repair of %s undecided: %s → `%s`; after %s the condition is gone but the unit is not yet healthy (%s); the next run decides", u.name(), j.seen, j.command, j.grace, u.final)
		default:
			text = fmt.Sprintf("repair of %s did not help: %s → `%s`, still failing after %s", u.name(), j.seen, j.command, j.grace)
		}
		// The author's template has the last word: the receiving side may
		// parse its format, and .Verify tells it the outcome (lint notes
		// a template that ignores it).
		parts = append(parts, r.shape(j.row, repairData(j, text), &r.said))
	}
	return strings.Join(parts, "; ")
}

// escalate evaluates the escalation table over the run's aggregates; the
// first matching row decides (docs/contract-format.md, "Escalation table").
// Without a table, each critical agent is relayed.
func (r *alerting) escalate() {
	agg := r.aggregates()
	env := r.env(scope{values: agg})
	action, message, cond := contracts.EscalateRelay, "", "critical"
	matched := len(r.c.Escalation) == 0
	for _, rule := range r.c.Escalation {
		ok, err := evalBool(rule.Program, env)
		if err != nil {
			r.error(fmt.Sprintf("%s: escalation row %q could not be evaluated, read as false: %v", rule.Pos, rule.Condition, err))
		}
		if ok {
			action, message, cond, matched = rule.Action, rule.Message, rule.Condition, true
			break
		}
	}
	if !matched {
		return
	}
	switch action {
	case contracts.EscalateLog, contracts.EscalateRecover:
		r.event(slog.LevelInfo, "escalation", "text", nonEmpty(message, cond))
	case contracts.EscalateRelay:
		// Relay the critical agents; a row that matched with no agent
		// critical (seed: "more than two degraded") relays the degraded.
		relay := (*unit).critical
		if agg["critical_count"] == 0 && len(r.c.Escalation) > 0 {
			relay = func(u *unit) bool { return u.final == contracts.SeverityDegraded }
		}
		for _, u := range r.units {
			if u.agent == "" || u.skipped || u.suppressed != nil || !relay(u) {
				continue
			}
			r.raised.add(r.c.Name, &intent{unit: u, source: guard.SourceRelay, condition: u.final.String(), severity: u.final,
				text: fmt.Sprintf("%s is %s: %s", u.agent, u.final, unitSummary(u))})
		}
	default: // alert, page, escalate: one incident for the row
		r.raised.add(r.c.Name, &intent{source: guard.SourceContract, condition: cond, severity: contracts.SeverityCritical, text: nonEmpty(message, cond)})
	}
}

// aggregates are the escalation table's names, from the units' final state.
func (r *alerting) aggregates() map[string]any {
	counts := map[contracts.Severity]int{}
	critical := []any{}
	agents := 0
	for _, u := range r.units {
		if u.agent == "" || u.skipped {
			continue
		}
		agents++
		sev := u.final
		if u.suppressed != nil {
			counts[contracts.SeveritySuppressed]++
			continue
		}
		if u.critical() {
			sev = contracts.SeverityCritical // unreachable past unreachable_after counts as critical
			critical = append(critical, u.agent)
		}
		counts[sev]++
	}
	return map[string]any{
		"critical_count":    counts[contracts.SeverityCritical],
		"degraded_count":    counts[contracts.SeverityDegraded],
		"unreachable_count": counts[contracts.SeverityUnreachable],
		"healthy_count":     counts[contracts.SeverityHealthy],
		"unknown_count":     counts[contracts.SeverityUnknown],
		"suppressed_count":  counts[contracts.SeveritySuppressed],
		"agents":            agents,
		"gate_ok":           r.seen.gateOK,
		"critical_agents":   critical,
	}
}

func stageSummary(sr *stageRun) string {
	var f []string
	for _, st := range sr.report.Steps {
		f = append(f, st.Findings...)
	}
	if len(f) == 0 {
		return sr.report.Severity.String()
	}
	return strings.Join(f, "; ")
}

// unitSummary lists what the unit's stages found, as they are now.
func unitSummary(u *unit) string {
	var f []string
	seen := map[string]bool{}
	for _, sr := range u.stages {
		for _, st := range sr.current().report.Steps {
			for _, x := range st.Findings {
				if !seen[x] {
					seen[x] = true
					f = append(f, x)
				}
			}
		}
	}
	if len(f) > 4 {
		f = append(f[:4], fmt.Sprintf("and %d more", len(f)-4))
	}
	if len(f) == 0 {
		return u.final.String()
	}
	return strings.Join(f, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func openSet(inc guard.Incidents) map[string]bool {
	out := map[string]bool{}
	for _, k := range inc.Open() {
		out[k] = true
	}
	return out
}
