package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The acting tools refuse every call unless the server allows actions
// (mayAct), and name their caller to the engine (engine.WithRequester),
// which records it in the run's history, in the maintenance window and in
// the ledger's operator events. None of them takes a command: a run runs
// only what the contract's action tables declare.

func (s *server) runContract(ctx context.Context, req *mcp.CallToolRequest, in ContractInput) (*mcp.CallToolResult, RunOut, error) {
	s.logCall(ctx, req, "run_contract", true, "contract", in.Contract)
	if err := s.mayAct(req); err != nil {
		return nil, RunOut{}, err
	}
	if err := s.known(ctx, in.Contract); err != nil {
		return nil, RunOut{}, err
	}
	rep, err := s.Source.Run(engine.WithRequester(ctx, s.caller(req)), in.Contract)
	return runOut("run "+in.Contract, rep, err)
}

// MaintenanceInput starts or ends a maintenance window.
type MaintenanceInput struct {
	Contract string `json:"contract" jsonschema:"the contract's name"`
	Agent    string `json:"agent,omitempty" jsonschema:"one agent of the contract; the whole contract when absent"`
	Duration string `json:"duration,omitempty" jsonschema:"how long from now, as contracts write durations: 30m, 2h, 1d (at most 7d); required unless end"`
	Reason   string `json:"reason,omitempty" jsonschema:"why, for the report, the log and the history; required unless end"`
	End      bool   `json:"end,omitempty" jsonschema:"end the window now instead"`
}

// MaintenanceOut is set_maintenance's output: the windows in force after.
type MaintenanceOut struct {
	Contract    string      `json:"contract"`
	Maintenance []WindowOut `json:"maintenance"`
}

// maxMaintenance bounds a window an agent may set: a longer pause is a
// person's decision, made with the CLI.
const maxMaintenance = 7 * 24 * time.Hour

// maxReason bounds a maintenance reason.
const maxReason = 500

func (s *server) setMaintenance(ctx context.Context, req *mcp.CallToolRequest, in MaintenanceInput) (*mcp.CallToolResult, MaintenanceOut, error) {
	s.logCall(ctx, req, "set_maintenance", true, "contract", in.Contract, "agent", in.Agent, "duration", in.Duration, "end", in.End)
	if err := s.mayAct(req); err != nil {
		return nil, MaintenanceOut{}, err
	}
	if err := s.known(ctx, in.Contract); err != nil {
		return nil, MaintenanceOut{}, err
	}
	var d time.Duration
	switch {
	case in.End && in.Duration != "":
		return nil, MaintenanceOut{}, errors.New("give either duration (with a reason) or end, not both")
	case in.End:
	default:
		var err error
		if d, err = contracts.ParseDuration(in.Duration); err != nil || d <= 0 {
			return nil, MaintenanceOut{}, fmt.Errorf("duration %q: give a positive duration such as 30m or 2h", in.Duration)
		}
		if d > maxMaintenance {
			return nil, MaintenanceOut{}, fmt.Errorf("duration %s is longer than %s: a longer pause is for `contractd maintenance`", in.Duration, contracts.FormatDuration(maxMaintenance))
		}
		if strings.TrimSpace(in.Reason) == "" {
			return nil, MaintenanceOut{}, errors.New("reason: say why repairs pause (it goes into the report, the log and the history)")
		}
		if len(in.Reason) > maxReason {
			return nil, MaintenanceOut{}, fmt.Errorf("reason: at most %d bytes", maxReason)
		}
	}
	if len(in.Agent) > 128 || strings.ContainsFunc(in.Agent, unicode.IsControl) {
		return nil, MaintenanceOut{}, fmt.Errorf("agent %q: not an agent name", in.Agent)
	}
	ws, err := s.Source.Maintenance(engine.WithRequester(ctx, s.caller(req)), in.Contract, in.Agent, d, in.Reason)
	if err != nil {
		return nil, MaintenanceOut{}, err
	}
	out := MaintenanceOut{Contract: in.Contract, Maintenance: windows(in.Contract, ws)}
	var b strings.Builder
	if len(out.Maintenance) == 0 {
		fmt.Fprintf(&b, "%s: no maintenance window; repairs and alerts run as the contract says\n", in.Contract)
	}
	for _, w := range out.Maintenance {
		fmt.Fprintf(&b, "%s: %s until %s: %s (set by %s): repairs blocked, new alerts held\n", in.Contract, w.Agent, w.Until, w.Reason, w.By)
	}
	return textResult(b.String()), out, nil
}

// ReleaseOut is release_hold_down's output.
type ReleaseOut struct {
	Contract string      `json:"contract"`
	Released bool        `json:"released"`
	Status   ContractRow `json:"status" jsonschema:"the contract's state afterwards"`
}

func (s *server) releaseHoldDown(ctx context.Context, req *mcp.CallToolRequest, in ContractInput) (*mcp.CallToolResult, ReleaseOut, error) {
	s.logCall(ctx, req, "release_hold_down", true, "contract", in.Contract)
	if err := s.mayAct(req); err != nil {
		return nil, ReleaseOut{}, err
	}
	if err := s.known(ctx, in.Contract); err != nil {
		return nil, ReleaseOut{}, err
	}
	if err := s.Source.Release(engine.WithRequester(ctx, s.caller(req)), in.Contract); err != nil {
		return nil, ReleaseOut{}, err
	}
	row, err := s.row(ctx, in.Contract)
	if err != nil {
		return nil, ReleaseOut{}, err
	}
	return textResult(fmt.Sprintf("%s: released (hold-down, escalations and pending repairs cleared)\n", in.Contract)),
		ReleaseOut{Contract: in.Contract, Released: true, Status: row}, nil
}
