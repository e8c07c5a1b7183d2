package engine

import (
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
)

// Report is the outcome of one run of one contract. Its JSON form is the
// documented `contractd run --json` schema (docs/report-schema.md).
type Report struct {
	Contract        string                  `json:"contract"`
	Version         string                  `json:"version,omitempty"`
	RunID           string                  `json:"run_id"`
	StartedAt       time.Time               `json:"started_at"`
	FinishedAt      time.Time               `json:"finished_at"`
	DurationMS      int64                   `json:"duration_ms"`
	DryRun          bool                    `json:"dry_run,omitempty"`
	OverallSeverity contracts.Severity      `json:"overall_severity"`
	GateOK          bool                    `json:"gate_ok"`
	Stages          []*StageReport          `json:"stages"`
	Agents          map[string]*AgentReport `json:"agents"`
	Actions         []*ActionReport         `json:"actions"`
	Alerts          []*AlertReport          `json:"alerts"`
	// Maintenance lists the operator's maintenance windows active when the
	// run started, by agent ("*" for the whole contract): repairs of those
	// agents are blocked and their new alerts held.
	Maintenance map[string]*guard.Window `json:"maintenance,omitempty"`
	Errors      []string                 `json:"errors,omitempty"`  // engine-level problems (store, lock); a sick agent is not an error
	Skipped     string                   `json:"skipped,omitempty"` // the whole run was skipped, e.g. "another run holds the lock"
}

// AgentReport is the per-agent verdict: the worst of its stages.
type AgentReport struct {
	Agent      string             `json:"agent"`
	Severity   contracts.Severity `json:"severity"`
	Raw        contracts.Severity `json:"raw_severity"` // before hysteresis (unreachable_after, recover_after)
	ReportOnly bool               `json:"report_only,omitempty"`
	// Failing is set once hysteresis counts the agent as failing: an
	// unreachable agent past unreachable_after counts as critical.
	Failing bool `json:"failing,omitempty"`
	// BeforeRepair is the agent's severity before this run's repairs, when
	// a verified repair changed it (Severity is the state after).
	BeforeRepair contracts.Severity `json:"before_repair,omitzero"`
	Stages       []string           `json:"stages"`
}

// Stage statuses.
const (
	StatusOK          = "ok"
	StatusFailed      = "failed"
	StatusSkipped     = "skipped"
	StatusUnreachable = "unreachable"
)

// StageReport is what one stage saw.
type StageReport struct {
	ID       string             `json:"id"`
	Title    string             `json:"title,omitempty"`
	Agent    string             `json:"agent"` // "" for agentless stages such as gates
	Target   string             `json:"target"`
	Gate     bool               `json:"gate,omitempty"`
	Item     map[string]any     `json:"item,omitempty"` // the for_each item, when expanded
	Severity contracts.Severity `json:"severity"`
	Status   string             `json:"status"` // ok, failed, skipped (gate: ID), unreachable
	Reason   string             `json:"reason,omitempty"`
	Steps    []*StepReport      `json:"steps"`
	// Verify is the stage probed again after a repair, when it was.
	Verify *StageReport `json:"verify,omitempty"`
}

// StepReport is what one step saw and how it was judged.
type StepReport struct {
	ID         string             `json:"id"`
	Kind       string             `json:"kind"`
	Severity   contracts.Severity `json:"severity"`
	DurationMS int64              `json:"duration_ms"`
	ExitCode   int                `json:"exit_code"`
	TimedOut   bool               `json:"timed_out,omitempty"`
	HTTPStatus string             `json:"http_status,omitempty"`
	Stdout     string             `json:"stdout,omitempty"`
	Stderr     string             `json:"stderr,omitempty"`
	Error      string             `json:"error,omitempty"` // transport error (unreachable)
	Note       string             `json:"note,omitempty"`  // how the transport ran it when not as usual (a broken resident session, a fresh one instead)
	Findings   []string           `json:"findings"`
	Values     map[string]any     `json:"values,omitempty"` // the fields the tables read
	// Metrics are the numeric values of the fields the contract exports
	// (`{export=true}` on a health row), for /metrics and Nagios perfdata.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// ActionReport is one candidate action and what the guards made of it.
type ActionReport struct {
	Agent     string   `json:"agent"`
	Stage     string   `json:"stage"`
	Condition string   `json:"condition"`
	Kind      string   `json:"kind"` // the row's kind: repair, log, monitor, alert, escalate
	Action    string   `json:"action"`
	Status    string   `json:"status"` // ran, failed, merged, pending, blocked, report-only, dry-run, alert, escalate, logged, monitor
	Reason    string   `json:"reason"`
	Guard     string   `json:"guard,omitempty"`
	Trace     []string `json:"trace,omitempty"`
	ExitCode  *int     `json:"exit_code,omitempty"`
	// Stdout and Stderr are what a repair command printed (first 2 KiB,
	// secrets replaced by ***).
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Verify string `json:"verify,omitempty"` // remediated | remediation failed
	// PendingSince is when a pending repair was first held back.
	PendingSince time.Time `json:"pending_since,omitzero"`
}

// AlertReport is one message of the run (an incident's open, reminder or
// resolve, a repair, an escalation) or one retried from the outbox, and
// what became of it at each notify route.
type AlertReport struct {
	Key       string `json:"key"`
	Agent     string `json:"agent,omitempty"`
	Condition string `json:"condition"`
	Kind      string `json:"kind"`               // open, reminder, resolved, repair, escalate, holddown
	Severity  string `json:"severity,omitempty"` // the unit's severity the message carries
	Text      string `json:"text"`
	// Retry marks a message of an earlier run that this run retried from
	// the outbox; Time is when it was composed.
	Retry bool      `json:"retry,omitempty"`
	Time  time.Time `json:"time,omitzero"`
	// Sent is true when every route of the message delivered it in this
	// run; Routes says what happened at each.
	Sent bool `json:"sent"`
	// ReachedBefore marks a retried message that another route had
	// already delivered in an earlier run.
	ReachedBefore bool `json:"reached_before,omitempty"`
	// Error says why nothing was sent (dry run, alert_on: repair, no
	// routes) or which routes did not deliver.
	Error  string          `json:"error,omitempty"`
	Routes []RouteDelivery `json:"routes"`
}

// RouteDelivery is what became of one message at one notify route.
type RouteDelivery struct {
	Route   string         `json:"route"`   // the route's name
	Outcome notify.Outcome `json:"outcome"` // delivered, queued (retried later) or dropped
	Error   string         `json:"error,omitempty"`
	// Tried is false when the route did not attempt the message this run:
	// it waited behind an earlier failure or for the route's backoff.
	Tried       bool      `json:"tried"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"` // queued: not before this
}

// FirstSent reports whether this run is the first to deliver the message
// to anyone: a route delivered it, and it is not a retry another route had
// already delivered.
func (a *AlertReport) FirstSent() bool {
	if a.ReachedBefore {
		return false
	}
	for _, rd := range a.Routes {
		if rd.Outcome == notify.OutcomeDelivered {
			return true
		}
	}
	return false
}

// Summary renders the alert's outcome on one line, e.g. "delivered: log,
// pages; queued: webhook (post http://127.0.0.1:9: connection refused)" or
// "not sent: dry-run".
func (a *AlertReport) Summary() string {
	if len(a.Routes) == 0 {
		return "not sent: " + a.Error
	}
	var parts []string
	for _, o := range []notify.Outcome{notify.OutcomeDelivered, notify.OutcomeQueued, notify.OutcomeDropped} {
		var names []string
		var why string
		for _, rd := range a.Routes {
			if rd.Outcome != o {
				continue
			}
			names = append(names, rd.Route)
			if why == "" && rd.Error != "" {
				why = rd.Error
			}
		}
		if len(names) == 0 {
			continue
		}
		part := string(o) + ": " + strings.Join(names, ", ")
		if why != "" {
			part += " (" + why + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
