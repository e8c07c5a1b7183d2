package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// activeIncident is an alert condition seen this run.
type activeIncident struct {
	agent, condition, text string
	severity               contracts.Severity
}

func (r *run) activate(agent, condition, text string, sev contracts.Severity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active == nil {
		r.active = map[string]*activeIncident{}
	}
	key := guard.IncidentKey(r.c.Name, agent, condition)
	if _, ok := r.active[key]; !ok {
		r.active[key] = &activeIncident{agent: agent, condition: condition, text: text, severity: sev}
	}
}

// alerts decides every incident of the run: gates, the escalation table
// (relays per critical agent, fleet-wide alerts), and the alert, crash-loop
// and escalation conditions the actions raised. Each incident alerts once
// when it opens, reminds after the repeat interval and resolves exactly
// once. Incidents of units the run could not observe (skipped behind a down
// gate, unknown, unreachable below its threshold) neither open nor resolve.
func (r *run) alerts(ctx context.Context, units []*unitState) {
	c := r.c
	observed := map[string]bool{} // incident agent part → its state was observed this run
	for _, sr := range r.runs {
		if sr.stage.Gate && sr.report.Status != StatusSkipped {
			observed[sr.id] = true
			if !r.gateOK && sr.id == r.downGate {
				r.activate(sr.id, "down", fmt.Sprintf("gate %s is down (%s); the stages after it are skipped", sr.id, stageSummary(sr)), contracts.SeverityCritical)
			}
		}
	}
	for _, u := range units {
		if u.agent == "" || u.skipped {
			continue
		}
		if u.settled.Severity != contracts.SeverityUnknown || u.settled.Failing {
			observed[u.agent] = true
		}
	}
	if r.gateOK {
		observed["*"] = true
		r.escalate(units)
	}

	inc := r.chain.Incidents(r.ledger.Incidents)
	if r.e.opts.DryRun {
		inc.State = cloneIncidents(r.ledger.Incidents)
	}
	keys := make([]string, 0, len(r.active))
	for k := range r.active {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		a := r.active[key]
		hold := ""
		if !r.gateOK && a.agent != r.downGate {
			hold = "its gate is down"
		} else if w := r.ledger.Window(a.agent, r.e.opts.Now()); w != nil {
			hold = w.String()
		}
		act := inc.Observe(key, true, hold)
		r.deliver(ctx, act, a.agent, a.condition, a.text, a.severity)
	}
	open := inc.Open()
	sort.Strings(open)
	for _, key := range open {
		if _, active := r.active[key]; active {
			continue
		}
		parts := strings.SplitN(key, "/", 3)
		if len(parts) != 3 || parts[0] != c.Name || !observed[parts[1]] {
			continue
		}
		act := inc.Observe(key, false, "")
		text := fmt.Sprintf("%s %s cleared", nonEmpty(parts[1], "contract"), parts[2])
		r.deliver(ctx, act, parts[1], parts[2], text, contracts.SeverityHealthy)
	}
	if !r.e.opts.DryRun {
		inc.Prune(30 * 24 * time.Hour)
	}
}

// escalate evaluates the escalation table over the run's aggregates; the
// first matching row decides. Without a table, each critical agent is
// relayed. "relay" opens one incident per critical agent; "alert"/"page"
// opens one incident for the row (e.g. "network or DNS likely down"
// instead of one alert per agent); "log" only logs.
func (r *run) escalate(units []*unitState) {
	env := r.aggregates(units)
	rules := r.c.Escalation
	action, message, cond := "relay", "", "critical"
	matched := len(rules) == 0
	for _, rule := range rules {
		if ok, _ := evalBool(rule.Program, env); ok {
			action, message, cond, matched = strings.ToLower(rule.Action+" "+rule.Message), rule.Message, rule.Condition, true
			break
		}
	}
	if !matched {
		return
	}
	if strings.Contains(action, "log") && !strings.Contains(action, "relay") && !strings.Contains(action, "alert") {
		r.logf("%s: escalation: %s", r.c.Name, nonEmpty(message, cond))
		return
	}
	if strings.Contains(action, "relay") {
		// Relay the critical agents; a row that matched on degraded agents
		// alone (seed: "more than two degraded") relays those.
		relay := isCritical
		if env["critical_count"] == 0 {
			relay = func(u *unitState) bool { return u.severity == contracts.SeverityDegraded }
		}
		for _, u := range units {
			if u.agent == "" || u.skipped || !relay(u) || r.hasActive(u.agent) {
				// An agent whose own alert row (or crash-loop or
				// escalation) speaks this run gets no second relay.
				continue
			}
			r.activate(u.agent, u.severity.String(), fmt.Sprintf("%s is %s: %s", u.agent, u.severity, agentSummary(u)), u.severity)
		}
	}
	if strings.Contains(action, "alert") || strings.Contains(action, "page") {
		r.activate("*", cond, nonEmpty(message, cond), contracts.SeverityCritical)
	}
}

// hasActive reports whether agent already has an incident active this run.
func (r *run) hasActive(agent string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.active {
		if a.agent == agent {
			return true
		}
	}
	return false
}

// isCritical: critical, or unreachable for unreachable_after runs.
func isCritical(u *unitState) bool {
	return u.severity == contracts.SeverityCritical || (u.severity == contracts.SeverityUnreachable && u.settled.Failing)
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

func agentSummary(u *unitState) string {
	var f []string
	seen := map[string]bool{}
	for _, sr := range u.runs {
		for _, st := range sr.report.Steps {
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
		return u.severity.String()
	}
	return strings.Join(f, "; ")
}

// deliver turns an incident decision into a message, unless nothing is to
// be sent. alert_on: repair keeps incident messages out of the notifiers
// (seed 000: alert only on restart) but still records them.
func (r *run) deliver(ctx context.Context, act guard.Action, agent, condition, text string, sev contracts.Severity) {
	if act.Send == guard.SendNothing {
		return
	}
	switch act.Send {
	case guard.SendReminder:
		text = fmt.Sprintf("%s (still open since %s)", text, act.Incident.OpenedAt.UTC().Format(time.RFC3339))
	}
	ar := &AlertReport{Key: act.Key, Agent: agent, Condition: condition, Kind: act.Send, Text: text}
	r.mu.Lock()
	r.rep.Alerts = append(r.rep.Alerts, ar)
	r.mu.Unlock()
	if r.e.opts.DryRun {
		ar.Error = "dry-run: not sent"
		return
	}
	if r.c.AlertOn == "repair" && !strings.HasPrefix(condition, "escalat") {
		ar.Error = "alert_on: repair: recorded, not sent"
		return
	}
	r.message(notify.Message{Contract: r.c.Name, Agent: agent, Condition: condition, Kind: act.Send, Severity: sev.String(), Text: text}, ar)
}

// message queues m for delivery at the end of the run. Every message is
// reported in alerts[]: ar, or a new report when ar is nil.
func (r *run) message(m notify.Message, ar *AlertReport) {
	if m.Time.IsZero() {
		m.Time = r.e.opts.Now()
	}
	if ar == nil {
		ar = &AlertReport{Key: guard.IncidentKey(m.Contract, m.Agent, m.Condition), Agent: m.Agent, Condition: m.Condition, Kind: m.Kind}
	}
	// The text is what every route receives and the report shows: no
	// secret, no control character from a target's output.
	m.Text = transports.Printable(transports.Redact(m.Text, secretValues(r.secrets)))
	if ar.Text == "" {
		r.mu.Lock()
		r.rep.Alerts = append(r.rep.Alerts, ar)
		r.mu.Unlock()
	}
	ar.Text = m.Text
	r.logf("%s", "alert: "+m.Line())
	r.mu.Lock()
	r.outgoing = append(r.outgoing, outgoing{msg: m, report: ar})
	r.mu.Unlock()
}

// outgoing is a message of this run and the alert it reports, if any.
type outgoing struct {
	msg    notify.Message
	report *AlertReport
}

// buildNotifiers builds one notifier per notify route, plus the engine's
// own. A route that cannot be built stays in the list as a notifier whose
// deliveries fail, so its messages are queued and retried like any other;
// the reason is a run error and a log line.
func (r *run) buildNotifiers() []notify.Notifier {
	own, errs := notify.NewAll(r.c.Notify, r.e.opts.NotifyDeps)
	for _, err := range errs {
		r.rep.Errors = append(r.rep.Errors, "notify: "+err.Error())
		r.logf("%s: notify: %v", r.c.Name, err)
	}
	return append(own, r.e.opts.Notifiers...)
}

// send retries the outbox, then delivers this run's messages to every
// route, and records per message and route what happened. A failing route
// never fails the run nor stops another: its messages stay in the ledger's
// outbox and are retried with backoff; its failure is a run error, a log
// line, and an outcome in alerts[].
func (r *run) send(ctx context.Context) {
	if r.e.opts.DryRun || (len(r.outgoing) == 0 && len(r.ledger.Outbox.Queue) == 0) {
		return
	}
	msgs := make([]notify.Message, len(r.outgoing))
	for i, o := range r.outgoing {
		msgs[i] = o.msg
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sender := notify.Sender{Notifiers: r.notifiers, Clock: clockFunc(r.e.opts.Now)}
	deliveries := sender.Send(sctx, &r.ledger.Outbox, msgs...)

	type routeTrouble struct {
		queued, dropped int
		err             string // the first error of an attempt, else the first error
		tried           bool   // err is an attempt's
		next            time.Time
	}
	trouble := map[string]*routeTrouble{}
	var troubled []string
	retried := map[notify.Message]*AlertReport{}
	for _, d := range deliveries {
		rd := RouteDelivery{Route: d.Route, Outcome: d.Outcome, Tried: d.Tried, Attempts: d.Attempts, NextAttempt: d.Next}
		if d.Err != nil {
			rd.Error = transports.Redact(d.Err.Error(), secretValues(r.secrets))
		}
		var ar *AlertReport
		if d.Retry() {
			if ar = retried[d.Message]; ar == nil {
				m := d.Message
				ar = &AlertReport{Key: guard.IncidentKey(m.Contract, m.Agent, m.Condition), Agent: m.Agent, Condition: m.Condition,
					Kind: m.Kind, Text: m.Text, Retry: true, Time: m.Time, ReachedBefore: d.ReachedBefore}
				retried[d.Message] = ar
				r.rep.Alerts = append(r.rep.Alerts, ar)
			}
		} else {
			ar = r.outgoing[d.Index].report
		}
		ar.Sent = (len(ar.Routes) == 0 || ar.Sent) && d.Outcome == notify.OutcomeDelivered
		ar.Routes = append(ar.Routes, rd)
		if d.Outcome == notify.OutcomeDelivered {
			continue
		}
		t := trouble[d.Route]
		if t == nil {
			t = &routeTrouble{}
			trouble[d.Route] = t
			troubled = append(troubled, d.Route)
		}
		if t.err == "" || (d.Tried && !t.tried) {
			t.err, t.tried = rd.Error, d.Tried
		}
		if d.Outcome == notify.OutcomeDropped {
			t.dropped++
			r.logf("%s: notify %s: dropped undeliverable message: %s", r.c.Name, d.Route, d.Message.Line())
		} else {
			t.queued++
			t.next = d.Next
		}
	}
	for _, o := range r.outgoing {
		if ar := o.report; !ar.Sent && ar.Error == "" {
			if len(ar.Routes) == 0 {
				ar.Error = "no notify routes"
			} else {
				ar.Error = "not delivered: " + ar.Summary()
			}
		}
	}
	for _, name := range troubled {
		t := trouble[name]
		var what []string
		if t.queued > 0 {
			w := fmt.Sprintf("%d message(s) queued for retry", t.queued)
			if t.next.After(r.e.opts.Now()) {
				w += " after " + t.next.UTC().Format(time.RFC3339)
			}
			what = append(what, w)
		}
		if t.dropped > 0 {
			what = append(what, fmt.Sprintf("%d message(s) dropped", t.dropped))
		}
		line := fmt.Sprintf("notify %s: %s: %s", name, strings.Join(what, ", "), t.err)
		r.rep.Errors = append(r.rep.Errors, line)
		r.logf("%s: %s", r.c.Name, line)
	}
}
