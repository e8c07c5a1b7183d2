package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ContractRow is one contract as list_contracts shows it.
type ContractRow struct {
	Name        string        `json:"name"`
	Severity    string        `json:"severity" jsonschema:"the last run's overall severity: healthy, degraded, critical or unknown (never ran)"`
	AgentsOK    int           `json:"agents_ok" jsonschema:"agents healthy after the last run"`
	Agents      int           `json:"agents" jsonschema:"agents the last run judged"`
	LastRun     string        `json:"last_run,omitempty" jsonschema:"when the last run started (RFC 3339)"`
	LastRunID   string        `json:"last_run_id,omitempty"`
	Interrupted string        `json:"interrupted,omitempty" jsonschema:"why the last run stopped before its end, when it did"`
	State       string        `json:"state,omitempty" jsonschema:"on a daemon: idle, running, held_down, or standby (another instance of the group runs it)"`
	Owner       string        `json:"owner,omitempty" jsonschema:"with --etcd: the instance that runs the contract"`
	NextRun     string        `json:"next_run,omitempty" jsonschema:"on a daemon: when the next scheduled run starts"`
	Incidents   []IncidentOut `json:"open_incidents"`
	Maintenance []WindowOut   `json:"maintenance"`
	Problems    []string      `json:"problems,omitempty" jsonschema:"what of the state could not be read"`
}

// IncidentOut is one open incident: already alerted.
type IncidentOut struct {
	Contract  string `json:"contract"`
	Agent     string `json:"agent" jsonschema:"the agent, or * for the whole contract"`
	Condition string `json:"condition"`
	Severity  string `json:"severity,omitempty"`
	OpenedAt  string `json:"opened_at"`
	LastSent  string `json:"last_sent,omitempty"`
	Text      string `json:"text,omitempty" jsonschema:"the last message sent about it"`
}

// WindowOut is one maintenance window in force.
type WindowOut struct {
	Contract string `json:"contract"`
	Agent    string `json:"agent" jsonschema:"the agent, or * for the whole contract"`
	Since    string `json:"since"`
	Until    string `json:"until"`
	Reason   string `json:"reason,omitempty"`
	By       string `json:"by,omitempty" jsonschema:"who set it, when the caller named itself"`
}

// RowFromSummary is the row of a contract's summary (engine.Summarize).
func RowFromSummary(sum *engine.Summary) ContractRow {
	row := ContractRow{Name: sum.Contract, Severity: sum.Severity.String(), AgentsOK: sum.AgentsOK, Agents: sum.AgentTotal,
		LastRun: stamp(sum.LastRun), LastRunID: sum.LastRunID, Interrupted: sum.Interrupted, Owner: sum.Owner,
		Incidents: incidents(sum.Contract, sum.Incidents), Maintenance: windows(sum.Contract, sum.Maintenance), Problems: sum.Problems}
	return row
}

func incidents(contract string, in []*guard.Incident) []IncidentOut {
	out := []IncidentOut{}
	for _, inc := range in {
		if inc == nil || inc.Resolved {
			continue
		}
		out = append(out, IncidentOut{Contract: contract, Agent: inc.Agent, Condition: inc.Condition, Severity: inc.Severity,
			OpenedAt: stamp(inc.OpenedAt), LastSent: stamp(inc.LastSent), Text: inc.Text})
	}
	return out
}

func windows(contract string, in map[string]*guard.Window) []WindowOut {
	out := []WindowOut{}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := in[k]
		out = append(out, WindowOut{Contract: contract, Agent: k, Since: stamp(w.Since), Until: stamp(w.Until), Reason: w.Reason, By: w.By})
	}
	return out
}

// NoInput is the input of a tool that takes no arguments.
type NoInput struct{}

// ContractInput names one contract.
type ContractInput struct {
	Contract string `json:"contract" jsonschema:"the contract's name (its front matter's name:)"`
}

// ListOut is list_contracts' output.
type ListOut struct {
	Source    string        `json:"source" jsonschema:"where the state was read"`
	Contracts []ContractRow `json:"contracts"`
}

func (s *server) listContracts(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, ListOut, error) {
	s.logCall(ctx, req, "list_contracts", false)
	rows, err := s.Source.List(ctx)
	if err != nil {
		return nil, ListOut{}, err
	}
	out := ListOut{Source: s.Source.Where(), Contracts: rows}
	var b strings.Builder
	if len(rows) == 0 {
		fmt.Fprintf(&b, "no contract known in %s\n", out.Source)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "%s: %s, %d/%d agents ok", r.Name, r.Severity, r.AgentsOK, r.Agents)
		if r.State != "" {
			fmt.Fprintf(&b, ", %s", r.State)
		}
		if r.LastRun != "" {
			fmt.Fprintf(&b, ", last run %s", r.LastRun)
		} else {
			b.WriteString(", never ran")
		}
		fmt.Fprintf(&b, ", %d open incidents", len(r.Incidents))
		if len(r.Maintenance) > 0 {
			b.WriteString(", in maintenance")
		}
		b.WriteString("\n")
	}
	return textResult(b.String()), out, nil
}

// StatusOut is get_status' output.
type StatusOut struct {
	Contract ContractRow `json:"contract"`
	// Snapshot is the last Maintains snapshot; absent before the first run.
	Snapshot           map[string]any `json:"snapshot,omitempty" jsonschema:"the last Maintains snapshot: the keys the contract declares, with their values"`
	SnapshotWrittenAt  string         `json:"snapshot_written_at,omitempty"`
	SnapshotAgeSeconds float64        `json:"snapshot_age_seconds,omitempty"`
}

// known checks name and that the source knows the contract (loaded, or
// with state), with the nearest name when it does not.
func (s *server) known(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, err := s.row(ctx, name)
	return err
}

// row is the contract's row of the source's list; it fails, with the
// nearest name, for a contract the source does not know.
func (s *server) row(ctx context.Context, name string) (ContractRow, error) {
	rows, err := s.Source.List(ctx)
	if err != nil {
		return ContractRow{}, err
	}
	return s.find(rows, name)
}

// find is the row of name among rows, or the error that says the source
// does not know it, with the nearest name.
func (s *server) find(rows []ContractRow, name string) (ContractRow, error) {
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		if r.Name == name {
			return r, nil
		}
		names = append(names, r.Name)
	}
	return ContractRow{}, fmt.Errorf("unknown contract %q: %s knows %d contracts%s", name, s.Source.Where(), len(names), contracts.Suggest(name, names))
}

func (s *server) getStatus(ctx context.Context, req *mcp.CallToolRequest, in ContractInput) (*mcp.CallToolResult, StatusOut, error) {
	s.logCall(ctx, req, "get_status", false, "contract", in.Contract)
	if err := checkName(in.Contract); err != nil {
		return nil, StatusOut{}, err
	}
	row, err := s.row(ctx, in.Contract)
	if err != nil {
		return nil, StatusOut{}, err
	}
	out := StatusOut{Contract: row}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %d/%d agents ok, %d open incidents\n", row.Name, row.Severity, row.AgentsOK, row.Agents, len(row.Incidents))
	st, err := engine.ReadStatus(s.Source.Store(), in.Contract, time.Now())
	switch {
	case errors.Is(err, engine.ErrNeverRan):
		b.WriteString("no snapshot yet: the contract has not run\n")
	case err != nil:
		return nil, StatusOut{}, fmt.Errorf("snapshot of %s: %w", in.Contract, err)
	default:
		out.Snapshot, out.SnapshotWrittenAt, out.SnapshotAgeSeconds = st.Snapshot, stamp(st.WrittenAt), st.AgeSec
		fmt.Fprintf(&b, "snapshot written %s (%s ago)\n", out.SnapshotWrittenAt, time.Duration(st.AgeSec*float64(time.Second)).Round(time.Second))
		keys := make([]string, 0, len(st.Snapshot))
		for k := range st.Snapshot {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %v\n", k, st.Snapshot[k])
		}
	}
	return textResult(b.String()), out, nil
}

// WhyOut is why's output.
type WhyOut struct {
	Contract    string              `json:"contract"`
	RunID       string              `json:"run_id"`
	StartedAt   string              `json:"started_at"`
	Severity    string              `json:"severity"`
	RequestedBy string              `json:"requested_by,omitempty" jsonschema:"who asked for the run, when a caller named itself"`
	Interrupted string              `json:"interrupted,omitempty"`
	Findings    map[string][]string `json:"findings,omitempty" jsonschema:"stage/step → what it found"`
	Actions     []*store.Action     `json:"actions" jsonschema:"every candidate action: status (ran, failed, blocked, pending, report-only, dry-run, …), the guard that decided and each guard's answer in trace"`
	// Operator lists what operators who named themselves changed: before
	// the run (from its record) and since (from the ledger).
	Operator []OperatorOut `json:"operator"`
}

// OperatorOut is one change an operator made, with when it was seen.
type OperatorOut struct {
	At   string `json:"at"`
	By   string `json:"by"`
	What string `json:"what"`
	Seen string `json:"seen" jsonschema:"before_run: the run took it into account; since_run: after the last run"`
}

func (s *server) why(ctx context.Context, req *mcp.CallToolRequest, in ContractInput) (*mcp.CallToolResult, WhyOut, error) {
	s.logCall(ctx, req, "why", false, "contract", in.Contract)
	if err := s.known(ctx, in.Contract); err != nil {
		return nil, WhyOut{}, err
	}
	st := s.Source.Store()
	hist, err := st.History(in.Contract, 1)
	if err != nil && !(errors.Is(err, store.ErrCorrupt) && len(hist) > 0) {
		return nil, WhyOut{}, fmt.Errorf("history of %s: %w", in.Contract, err)
	}
	if len(hist) == 0 {
		return nil, WhyOut{}, fmt.Errorf("%s has not run yet: no run history in %s", in.Contract, s.Source.Where())
	}
	h := hist[len(hist)-1]
	out := WhyOut{Contract: in.Contract, RunID: h.RunID, StartedAt: stamp(h.StartedAt), Severity: h.OverallSeverity,
		RequestedBy: h.RequestedBy, Interrupted: h.Interrupted, Findings: h.Findings, Actions: h.Actions, Operator: []OperatorOut{}}
	for _, ev := range h.Operator {
		out.Operator = append(out.Operator, OperatorOut{At: stamp(ev.At), By: ev.By, What: ev.What, Seen: "before_run"})
	}
	var since []store.OperatorEvent
	if l, err := engine.ReadLedger(st, in.Contract); err == nil {
		since = l.Operator
		for _, ev := range l.Operator {
			out.Operator = append(out.Operator, OperatorOut{At: stamp(ev.At), By: ev.By, What: ev.What, Seen: "since_run"})
		}
	}
	var b strings.Builder
	engine.WriteWhy(&b, in.Contract, h, since)
	return textResult(b.String()), out, nil
}

// HistoryInput names a contract and how many runs.
type HistoryInput struct {
	Contract string `json:"contract" jsonschema:"the contract's name"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many recent runs (default 20, at most 200)"`
}

// HistoryOut is get_history's output.
type HistoryOut struct {
	Contract string       `json:"contract"`
	Runs     []HistoryRun `json:"runs" jsonschema:"oldest first"`
}

// HistoryRun is one recorded run.
type HistoryRun struct {
	RunID       string                `json:"run_id"`
	StartedAt   string                `json:"started_at"`
	DurationMS  int64                 `json:"duration_ms"`
	Severity    string                `json:"severity"`
	Agents      map[string]string     `json:"agents,omitempty" jsonschema:"agent → severity"`
	RequestedBy string                `json:"requested_by,omitempty"`
	Interrupted string                `json:"interrupted,omitempty"`
	Actions     []*store.Action       `json:"actions"`
	Messages    []MessageOut          `json:"messages"`
	Errors      []string              `json:"errors,omitempty"`
	Operator    []store.OperatorEvent `json:"operator,omitempty" jsonschema:"what operators who named themselves changed before this run"`
}

// MessageOut is one message of a run.
type MessageOut struct {
	Kind      string `json:"kind" jsonschema:"open, reminder, resolved, repair, escalate, holddown"`
	Agent     string `json:"agent,omitempty"`
	Condition string `json:"condition"`
	Severity  string `json:"severity,omitempty"`
	Text      string `json:"text"`
	Sent      bool   `json:"sent"`
	Error     string `json:"error,omitempty"`
}

func messages(in []*store.Alert) []MessageOut {
	out := []MessageOut{}
	for _, a := range in {
		if a != nil {
			out = append(out, MessageOut{Kind: a.Kind, Agent: a.Agent, Condition: a.Condition, Severity: a.Severity, Text: a.Text, Sent: a.Sent, Error: a.Error})
		}
	}
	return out
}

func (s *server) history(ctx context.Context, req *mcp.CallToolRequest, in HistoryInput) (*mcp.CallToolResult, HistoryOut, error) {
	s.logCall(ctx, req, "get_history", false, "contract", in.Contract)
	if err := s.known(ctx, in.Contract); err != nil {
		return nil, HistoryOut{}, err
	}
	n := in.Limit
	switch {
	case n <= 0:
		n = 20
	case n > 200:
		n = 200
	}
	hist, err := s.Source.Store().History(in.Contract, n)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return nil, HistoryOut{}, fmt.Errorf("history of %s: %w", in.Contract, err)
	}
	out := HistoryOut{Contract: in.Contract, Runs: []HistoryRun{}}
	var b strings.Builder
	if len(hist) == 0 {
		fmt.Fprintf(&b, "%s has no recorded run\n", in.Contract)
	}
	for _, h := range hist {
		acts := h.Actions
		if acts == nil {
			acts = []*store.Action{}
		}
		out.Runs = append(out.Runs, HistoryRun{RunID: h.RunID, StartedAt: stamp(h.StartedAt), DurationMS: h.DurationMS, Severity: h.OverallSeverity,
			Agents: h.Agents, RequestedBy: h.RequestedBy, Interrupted: h.Interrupted, Actions: acts, Messages: messages(h.Alerts), Errors: h.Errors, Operator: h.Operator})
		fmt.Fprintf(&b, "%s %s %d ms", stamp(h.StartedAt), h.OverallSeverity, h.DurationMS)
		if h.RequestedBy != "" {
			fmt.Fprintf(&b, " (requested by %s)", h.RequestedBy)
		}
		b.WriteString("\n")
		for _, ev := range h.Operator {
			fmt.Fprintf(&b, "  before it: %s\n", ev.String())
		}
		for _, a := range h.Actions {
			if a.Status == engine.ActionLogged || a.Status == engine.ActionMonitor {
				continue
			}
			fmt.Fprintf(&b, "  %s %s: %s (%s)\n", a.Agent, a.Status, a.Action, a.Condition)
		}
		for _, a := range h.Alerts {
			fmt.Fprintf(&b, "  message %s: %s\n", a.Kind, a.Text)
		}
	}
	return textResult(b.String()), out, nil
}

// ExplainOut is the output of explain_contract and explain_draft.
type ExplainOut struct {
	Plan        *contracts.Plan `json:"plan,omitempty" jsonschema:"the plan (contractd explain --json); absent when a draft does not load"`
	Diagnostics []Diagnostic    `json:"diagnostics" jsonschema:"a draft's diagnostics (none for a loaded contract)"`
}

func (s *server) explainContract(ctx context.Context, req *mcp.CallToolRequest, in ContractInput) (*mcp.CallToolResult, ExplainOut, error) {
	s.logCall(ctx, req, "explain_contract", false, "contract", in.Contract)
	if err := checkName(in.Contract); err != nil {
		return nil, ExplainOut{}, err
	}
	c, err := s.Source.Contract(ctx, in.Contract)
	if err != nil {
		return nil, ExplainOut{}, err
	}
	return explain(c, nil)
}

// explain is the output of explain for a loaded contract.
func explain(c *contracts.Contract, diags []Diagnostic) (*mcp.CallToolResult, ExplainOut, error) {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(d.Text + "\n")
	}
	if err := contracts.WriteExplainText(&b, c); err != nil {
		return nil, ExplainOut{}, err
	}
	if diags == nil {
		diags = []Diagnostic{}
	}
	return textResult(b.String()), ExplainOut{Plan: contracts.Explain(c), Diagnostics: diags}, nil
}

// IncidentsInput names a contract, or none for all.
type IncidentsInput struct {
	Contract string `json:"contract,omitempty" jsonschema:"one contract's name; every contract's when absent"`
}

// IncidentsOut is list_incidents' output.
type IncidentsOut struct {
	Incidents   []IncidentOut `json:"open_incidents" jsonschema:"already alerted: do not report these again"`
	Maintenance []WindowOut   `json:"maintenance"`
}

func (s *server) listIncidents(ctx context.Context, req *mcp.CallToolRequest, in IncidentsInput) (*mcp.CallToolResult, IncidentsOut, error) {
	s.logCall(ctx, req, "list_incidents", false, "contract", in.Contract)
	if in.Contract != "" {
		if err := checkName(in.Contract); err != nil {
			return nil, IncidentsOut{}, err
		}
	}
	rows, err := s.Source.List(ctx)
	if err != nil {
		return nil, IncidentsOut{}, err
	}
	if in.Contract != "" {
		if _, err := s.find(rows, in.Contract); err != nil {
			return nil, IncidentsOut{}, err
		}
	}
	out := IncidentsOut{Incidents: []IncidentOut{}, Maintenance: []WindowOut{}}
	for _, r := range rows {
		if in.Contract == "" || r.Name == in.Contract {
			out.Incidents = append(out.Incidents, r.Incidents...)
			out.Maintenance = append(out.Maintenance, r.Maintenance...)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d open incidents, %d maintenance windows\n", len(out.Incidents), len(out.Maintenance))
	for _, i := range out.Incidents {
		fmt.Fprintf(&b, "incident %s/%s: %s (%s) open since %s\n", i.Contract, i.Agent, i.Condition, i.Severity, i.OpenedAt)
	}
	for _, w := range out.Maintenance {
		fmt.Fprintf(&b, "maintenance %s/%s until %s: %s\n", w.Contract, w.Agent, w.Until, w.Reason)
	}
	return textResult(b.String()), out, nil
}

// HealthOut is get_health's output.
type HealthOut struct {
	Status         string   `json:"status" jsonschema:"ok, stuck (the scheduler does not tick), or no_daemon"`
	Source         string   `json:"source"`
	LastTick       string   `json:"last_tick,omitempty"`
	TickAgeSeconds float64  `json:"tick_age_seconds,omitempty"`
	Contracts      int      `json:"contracts" jsonschema:"contracts loaded"`
	Rejected       int      `json:"rejected" jsonschema:"contract files kept out by lint"`
	Running        []string `json:"running"`
	Node           string   `json:"node,omitempty" jsonschema:"with --etcd: this instance's name"`
	EtcdUp         *bool    `json:"etcd_up,omitempty"`
	Owned          int      `json:"owned,omitempty" jsonschema:"with --etcd: contracts this instance runs"`
	Nodes          []string `json:"nodes,omitempty"`
	Note           string   `json:"note,omitempty"`
}

func (s *server) health(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, HealthOut, error) {
	s.logCall(ctx, req, "get_health", false)
	h, err := s.Source.Health(ctx)
	if err != nil {
		return nil, HealthOut{}, err
	}
	if h.Running == nil {
		h.Running = []string{}
	}
	text := fmt.Sprintf("%s: %s, %d contracts loaded, %d rejected, %d running", h.Source, h.Status, h.Contracts, h.Rejected, len(h.Running))
	if h.Node != "" {
		up := "down"
		if h.EtcdUp != nil && *h.EtcdUp {
			up = "up"
		}
		text += fmt.Sprintf("; node %s, etcd %s, owns %d, nodes %s", h.Node, up, h.Owned, strings.Join(h.Nodes, ", "))
	}
	if h.Note != "" {
		text += "; " + h.Note
	}
	return textResult(text + "\n"), h, nil
}

// BriefInput names a contract and optionally one stage.
type BriefInput struct {
	Contract string `json:"contract" jsonschema:"the contract's name"`
	Stage    string `json:"stage,omitempty" jsonschema:"one stage's id; the whole contract when absent"`
}

func (s *server) brief(ctx context.Context, req *mcp.CallToolRequest, in BriefInput) (*mcp.CallToolResult, *engine.Briefing, error) {
	s.logCall(ctx, req, "brief", false, "contract", in.Contract, "stage", in.Stage)
	if err := checkName(in.Contract); err != nil {
		return nil, nil, err
	}
	c, err := s.Source.Contract(ctx, in.Contract)
	if err != nil {
		return nil, nil, err
	}
	b, err := engine.Brief(c, in.Stage, s.Source.Store(), time.Now())
	if err != nil {
		return nil, nil, err
	}
	var text strings.Builder
	if err := engine.WriteBrief(&text, b); err != nil {
		return nil, nil, err
	}
	return textResult(text.String()), b, nil
}
