package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// RunRecord is one run of a contract as its history keeps it: enough to
// answer `contractd history` and `contractd why` (every action with every
// guard's answer) and to draw the status page's history strip, without
// keeping whole reports. Every backend stores it as one JSON object and
// checks it when it reads it back (Check); the engine's report carries
// the same Action and Alert types.
type RunRecord struct {
	RunID           string            `json:"run_id"`
	StartedAt       time.Time         `json:"started_at"`
	DurationMS      int64             `json:"duration_ms"`
	DryRun          bool              `json:"dry_run,omitempty"`
	OverallSeverity string            `json:"overall_severity"`
	Agents          map[string]string `json:"agents"`
	// Suppressed says, for each agent suppressed in the run, which
	// dependency held it and what the root cause was.
	Suppressed map[string]*Suppression `json:"suppressed,omitempty"`
	// Flapping holds each agent flapping in the run, with the share of
	// its last runs whose state changed.
	Flapping map[string]float64  `json:"flapping,omitempty"`
	Findings map[string][]string `json:"findings,omitempty"`
	Actions  []*Action           `json:"actions,omitempty"`
	Alerts   []*Alert            `json:"alerts,omitempty"`
	Errors   []string            `json:"errors,omitempty"`
	// Interrupted says why the run stopped before its end, when it did: a
	// signal or a daemon's shutdown (the run then recorded what it did),
	// an engine panic, or a process that died during it (the record is
	// then rebuilt from the ledger by the next holder of the run lock,
	// severity unknown).
	Interrupted string `json:"interrupted,omitempty"`
	// RequestedBy names who asked for the run when it was asked for by a
	// caller that names itself (an MCP client); "" for scheduled runs.
	RequestedBy string `json:"requested_by,omitempty"`
	// Operator lists what operators who named themselves changed in the
	// ledger since the run before (Ledger.Operator).
	Operator []OperatorEvent `json:"operator,omitempty"`
}

// Suppression is why an agent was suppressed in a run: the dependency it
// waited for (By), the root cause, whether it waited for the dependency
// to be judged again, and the reason in words.
type Suppression struct {
	By      string `json:"by"`
	Root    string `json:"root"`
	Waiting bool   `json:"waiting,omitempty"`
	Reason  string `json:"reason"`
}

// Check returns what makes r not a run record: no run id, no start time,
// a null action or alert. It returns nil for a good one.
func (r *RunRecord) Check() error {
	switch {
	case r.RunID == "":
		return errors.New("not a run record: run_id missing")
	case r.StartedAt.IsZero():
		return errors.New("not a run record: started_at missing")
	}
	for i, a := range r.Actions {
		if a == nil {
			return fmt.Errorf("actions[%d] is null", i)
		}
	}
	for i, a := range r.Alerts {
		if a == nil {
			return fmt.Errorf("alerts[%d] is null", i)
		}
	}
	return nil
}

// EncodeRecord returns r as every backend stores it, one JSON object on
// one line. It fails when r is not a run record (Check).
func EncodeRecord(r RunRecord) ([]byte, error) {
	if err := r.Check(); err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode run record %s: %w", r.RunID, err)
	}
	return b, nil
}

// DecodeRecord decodes a run record read back from any backend and checks
// it; it returns what is wrong with it otherwise (not JSON, not an object,
// not a run record).
func DecodeRecord(b []byte) (RunRecord, error) {
	var r RunRecord
	switch {
	case !json.Valid(b):
		return r, errors.New("not JSON")
	case len(b) == 0 || b[0] != '{':
		return r, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("not a run record: %v", err)
	}
	return r, r.Check()
}

// Action is one candidate action of a run and what the guards made of it.
type Action struct {
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
	// Sudo says the command ran as `sudo -n -- COMMAND ARGS…` (its target
	// has sudo: true).
	Sudo   bool   `json:"sudo,omitempty"`
	Verify string `json:"verify,omitempty"` // remediated | remediation failed
	// PendingSince is when a pending repair was first held back.
	PendingSince time.Time `json:"pending_since,omitzero"`
}

// Command is the action as it ran, for people: its command after `sudo
// -n --` when it went through sudo, else Action.
func (a *Action) Command() string {
	if a.Sudo {
		return "sudo -n -- " + a.Action
	}
	return a.Action
}

// Why is an action's reason without the name of the guard that decided
// it, for outputs that show that name beside it: a reason that begins with
// its guard's name ("report-only: would run …") does not say it twice.
func (a *Action) Why() string {
	if a.Guard != "" {
		return strings.TrimPrefix(a.Reason, a.Guard+": ")
	}
	return a.Reason
}

// Alert is one message of a run (an incident's open, reminder or resolve,
// a repair, an escalation) or one retried from the outbox, and what became
// of it at each notify route.
type Alert struct {
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

// OperatorEvent is one change an operator made to a contract's ledger.
type OperatorEvent struct {
	At   time.Time `json:"at"`
	By   string    `json:"by"`   // the caller, e.g. "mcp claude-code 1.2 (stdio)"
	What string    `json:"what"` // "maintenance of web for 2h: upgrade", "released"
}

// String renders "2026-11-30T02:00:00Z by mcp claude-code 1.2 (stdio): released".
func (e OperatorEvent) String() string {
	return e.At.UTC().Format(time.RFC3339) + " by " + e.By + ": " + e.What
}

// Outcome is what became of a message at a route, as a run record keeps
// it (the engine's notify.Outcome, by the same words).
type Outcome string

// Outcomes of a message at a route.
const (
	OutcomeDelivered Outcome = "delivered"
	OutcomeQueued    Outcome = "queued" // retried later from the outbox
	OutcomeDropped   Outcome = "dropped"
)

// RouteDelivery is what became of one message at one notify route.
type RouteDelivery struct {
	Route   string  `json:"route"`   // the route's name
	Outcome Outcome `json:"outcome"` // delivered, queued (retried later) or dropped
	Error   string  `json:"error,omitempty"`
	// Tried is false when the route did not attempt the message this run:
	// it waited behind an earlier failure or for the route's backoff.
	Tried       bool      `json:"tried"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"` // queued: not before this
}

// AttemptsNote is " (N attempts)" when the route tried the message more
// than once, from Attempts, else "".
func (rd RouteDelivery) AttemptsNote() string {
	if rd.Attempts > 1 {
		return fmt.Sprintf(" (%d attempts)", rd.Attempts)
	}
	return ""
}

// FirstSent reports whether this run is the first to deliver the message
// to anyone: a route delivered it, and it is not a retry another route had
// already delivered.
func (a *Alert) FirstSent() bool {
	if a.ReachedBefore {
		return false
	}
	for _, rd := range a.Routes {
		if rd.Outcome == OutcomeDelivered {
			return true
		}
	}
	return false
}

// Summary renders the alert's outcome on one line, e.g. "delivered: log,
// pages; queued: webhook (post http://127.0.0.1:9: connection refused)" or
// "not sent: dry-run".
func (a *Alert) Summary() string {
	if len(a.Routes) == 0 {
		return "not sent: " + a.Error
	}
	var parts []string
	for _, o := range []Outcome{OutcomeDelivered, OutcomeQueued, OutcomeDropped} {
		var names []string
		var why string
		for _, rd := range a.Routes {
			if rd.Outcome != o {
				continue
			}
			names = append(names, rd.Route)
			if why == "" && rd.Error != "" {
				why = rd.Error + rd.AttemptsNote()
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
