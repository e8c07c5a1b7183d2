package engine

import (
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
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
	// RequestedBy names who asked for this run, when the caller named
	// itself (WithRequester: an MCP client); "" for a scheduled run.
	RequestedBy string `json:"requested_by,omitempty"`
	// StateUnwritable says the state directory could not be written
	// ("state directory DIR cannot be written: read-only file system"):
	// the run probed and judged, repaired nothing, decided no alert and
	// recorded nothing. `contractd run` exits 1 for it; `serve` tells
	// every route once, and the next run that can write carries on.
	StateUnwritable string `json:"state_unwritable,omitempty"`
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
	// UnknownRuns counts the runs in a row, this one included, that
	// judged the agent unknown: at guards.unknown_after it is an
	// incident of its own.
	UnknownRuns int `json:"unknown_runs,omitempty"`
	// Suppressed says which dependency fails while the agent does (its
	// Severity is then suppressed): no repair, no incident, no message;
	// the dependency's own incident is the alert.
	Suppressed *guard.Suppression `json:"suppressed,omitempty"`
	// Flapping is set while the agent's state changes in more than the
	// flapping threshold of its last runs; FlapPercent is that share.
	Flapping    bool     `json:"flapping,omitempty"`
	FlapPercent float64  `json:"flap_percent,omitempty"`
	Stages      []string `json:"stages"`
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
	Values     map[string]any     `json:"values,omitempty"` // the fields the tables read, and those the kind reports (a nagios step's perf)
	// Metrics are the numeric values of the fields the contract exports
	// (`{export=true}` on a health row), for /metrics and Nagios perfdata.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// ActionReport is one candidate action and what the guards made of it:
// the type the run history keeps (store.Action).
type ActionReport = store.Action

// AlertReport is one message of the run (an incident's open, reminder or
// resolve, a repair, an escalation) or one retried from the outbox, and
// what became of it at each notify route (store.Alert).
type AlertReport = store.Alert

// RouteDelivery is what became of one message at one notify route.
type RouteDelivery = store.RouteDelivery
