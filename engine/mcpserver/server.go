// Package mcpserver serves contractd's tools over the Model Context
// Protocol (the official Go SDK): read tools and authoring tools always,
// acting tools only when the operator allows them. The tools call the
// code paths the CLI and the daemon's API use (contracts.Parse for lint,
// contracts.Explain, replay.Test, the engine's dry run, the daemon's
// RunNow, engine.SetMaintenance, engine.ReleaseLedger, store.Backend); no
// tool can make anything run that a contract does not declare, and no
// argument ever reaches a command line.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Source is what the tools read and change: a running daemon's view
// (Daemon), or the state and contract files a `contractd mcp` process
// reaches.
type Source interface {
	// Where names the source in the tools' texts: "the daemon at
	// 127.0.0.1:7070", "the state in /var/lib/contractd".
	Where() string
	// Store is the contracts' state: history, ledger, snapshots.
	Store() store.Backend
	// List returns every contract known, with its state, sorted by name.
	List(ctx context.Context) ([]ContractRow, error)
	// Contract returns the loaded contract of name, or an error that says
	// which contracts there are (the nearest name first).
	Contract(ctx context.Context, name string) (*contracts.Contract, error)
	// Health is the daemon's health.
	Health(ctx context.Context) (HealthOut, error)
	// DryRun runs c with every guard asked and nothing run, sent or
	// recorded (`contractd run --dry-run`).
	DryRun(ctx context.Context, c *contracts.Contract) (*engine.Report, error)
	// Run runs contract name now, repairs inside its guards, as POST
	// /contracts/NAME/run; ctx names the caller (engine.WithRequester).
	Run(ctx context.Context, name string) (*engine.Report, error)
	// Maintenance starts (d > 0) or ends (d == 0) a maintenance window of
	// agent ("" for the whole contract); ctx names the caller.
	Maintenance(ctx context.Context, name, agent string, d time.Duration, reason string) (map[string]*guard.Window, error)
	// Release releases the contract's hold-down, escalations and pending
	// repairs (`contractd reset`); ctx names the caller.
	Release(ctx context.Context, name string) error
	// LoadOptions are the options drafts are parsed with (the size caps).
	LoadOptions() contracts.Options
}

// Options configure a server.
type Options struct {
	Source Source
	// AllowActions turns the acting tools on (run, maintenance, release);
	// without it they refuse every call, saying so.
	AllowActions bool
	// Transport names how callers reach the server, for the caller's name
	// in logs and history: "stdio" or "http".
	Transport string
	Version   string
	// Log receives one record per call: acting calls at info, the others
	// at debug. Nil discards them.
	Log *slog.Logger
}

// server holds what every tool handler reads.
type server struct {
	Options
}

// New returns the MCP server with every tool registered (tools.go).
func New(opts Options) *mcp.Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Transport == "" {
		opts.Transport = "stdio"
	}
	s := &server{Options: opts}
	srv := mcp.NewServer(&mcp.Implementation{Name: "contractd", Title: "contractd", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
	})
	for _, t := range s.tools() {
		t.add(srv)
	}
	return srv
}

const instructions = `contractd runs responsibility contracts: Markdown runbooks that probe services, judge them with health tables and repair them with the commands the contract declares, inside guards. ` +
	`Read tools show contracts, their state, why their last run did what it did, incidents and the daemon's health. ` +
	`Authoring tools lint, explain and test a contract draft given as text, and dry-run a contract, with no side effects. ` +
	`Acting tools (run now, maintenance, release a hold-down) are off unless the operator started contractd with --allow-actions; ` +
	`even then they run nothing a contract does not declare.`

// maxCallerName bounds the client name kept in logs and history.
const maxCallerName = 80

// caller names who makes a call, for logs and history: the client's name
// and version as it introduced itself, and how it reached the server
// ("mcp claude-code 1.2.0 (stdio)", "mcp agent 0.1 (http, token, from
// 127.0.0.1:5555)"). A client's name is its own claim; the token is what
// admitted it over HTTP.
func (s *server) caller(req *mcp.CallToolRequest) string {
	name := "unnamed client"
	if req != nil && req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.ClientInfo != nil && ip.ClientInfo.Name != "" {
			name = strings.TrimSpace(ip.ClientInfo.Name + " " + ip.ClientInfo.Version)
		}
	}
	name = transports.Printable(name)
	if len(name) > maxCallerName {
		name = name[:maxCallerName] + "…"
	}
	how := s.Transport
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		how += ", token"
		if from, _ := req.Extra.TokenInfo.Extra[remoteKey].(string); from != "" {
			how += ", from " + from
		}
	}
	return "mcp " + name + " (" + how + ")"
}

// logCall records a call: acting calls at info, the others at debug.
func (s *server) logCall(ctx context.Context, req *mcp.CallToolRequest, tool string, acting bool, args ...any) {
	level := slog.LevelDebug
	if acting {
		level = slog.LevelInfo
	}
	s.Log.Log(ctx, level, "mcp call", append([]any{"tool", tool, "caller", s.caller(req)}, args...)...)
}

// ErrActionsOff is returned by the acting tools of a server started
// without AllowActions.
var ErrActionsOff = errors.New("acting tools are off on this server: the operator must start it with --allow-actions (contractd mcp --allow-actions, or contractd serve --mcp-allow-actions)")

// ErrNoToken is returned by the acting tools over HTTP to a call the
// bearer token did not admit.
var ErrNoToken = errors.New("acting tools over HTTP need the daemon's API token")

// mayAct says whether an acting call may go ahead.
func (s *server) mayAct(req *mcp.CallToolRequest) error {
	if !s.AllowActions {
		return ErrActionsOff
	}
	if s.Transport != "stdio" && (req == nil || req.Extra == nil || req.Extra.TokenInfo == nil) {
		return ErrNoToken
	}
	return nil
}

// checkName refuses a contract name that no contract can have, before it
// reaches the state or a lookup.
func checkName(name string) error {
	if name == "" {
		return errors.New("contract: a contract name is required")
	}
	if err := store.CheckName(name); err != nil {
		return fmt.Errorf("%w: a contract name is letters, digits, '.', '_' and '-', at most 128 characters", err)
	}
	return nil
}

// textResult is a tool result whose content is text a person reads; the
// SDK adds the structured output beside it.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// stamp renders a time for the tools' outputs, "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
