package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool is one tool of the table: its name and how it is added.
type tool struct {
	name string
	kind string // read, author, act
	add  func(*mcp.Server)
}

// Tool kinds: what a tool may do, which its annotations say.
const (
	kindRead   = "read"   // reads state and contracts; changes nothing
	kindAuthor = "author" // works on a draft or dry-runs; changes nothing
	kindAct    = "act"    // changes state or runs repairs; off without AllowActions
)

// def makes a table row from a typed handler: the SDK infers the input and
// output schemas from In's and Out's fields and jsonschema tags, checks
// the arguments against the input schema before h sees them, and puts
// Out in the result's structured content.
func def[In, Out any](kind string, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) tool {
	no, yes := false, true
	switch kind {
	case kindRead, kindAuthor:
		t.Annotations.ReadOnlyHint = true
		t.Annotations.DestructiveHint = &no
		t.Annotations.IdempotentHint = true
	case kindAct:
		// ReadOnlyHint is always sent: false here. DestructiveHint is
		// set by each acting tool, never left to the default (true).
		if t.Annotations.DestructiveHint == nil {
			t.Annotations.DestructiveHint = &yes
		}
	}
	// Every tool works on the contracts and state of this host (or
	// group); only a dry run and a run reach the contracts' targets.
	if t.Annotations.OpenWorldHint == nil {
		t.Annotations.OpenWorldHint = &no
	}
	return tool{name: t.Name, kind: kind, add: func(s *mcp.Server) { mcp.AddTool(s, t, h) }}
}

// annotations returns a fresh annotations value for a tool's title.
func annotations(title string) *mcp.ToolAnnotations { return &mcp.ToolAnnotations{Title: title} }

// tools is the table of every tool, read, authoring and acting, in the
// order clients list them. Tool names say whether they read or write, so
// a client can allow one kind and not the other.
func (s *server) tools() []tool {
	yes, no := true, false
	return []tool{
		def(kindRead, &mcp.Tool{Name: "list_contracts", Annotations: annotations("List contracts"),
			Description: "Every contract known here with its state: last run's severity, agents healthy of all, last run, open incidents, maintenance windows; on a daemon also idle/running/held_down/standby and the owner."},
			s.listContracts),
		def(kindRead, &mcp.Tool{Name: "get_status", Annotations: annotations("Contract status"),
			Description: "One contract's state and its last Maintains snapshot (the keys and values the contract declares under ## Maintains) with its age."},
			s.getStatus),
		def(kindRead, &mcp.Tool{Name: "why", Annotations: annotations("Why the last run did what it did"),
			Description: "The last run of a contract: its findings, every candidate action with each guard's answer (ran, blocked, pending, report-only, dry-run…), who asked for it, and what operators changed since."},
			s.why),
		def(kindRead, &mcp.Tool{Name: "get_history", Annotations: annotations("Run history"),
			Description: "A contract's recent runs, oldest first: severity per agent, actions, messages, who asked for each run."},
			s.history),
		def(kindRead, &mcp.Tool{Name: "explain_contract", Annotations: annotations("Explain a contract"),
			Description: "The plan of a loaded contract in the order the engine runs it: targets, stages, steps, health rows as compiled, the only actions it may run and the guards in force (contractd explain)."},
			s.explainContract),
		def(kindRead, &mcp.Tool{Name: "list_incidents", Annotations: annotations("Open incidents and maintenance"),
			Description: "Open incidents (already alerted: do not report them again) and maintenance windows, of one contract or of all."},
			s.listIncidents),
		def(kindRead, &mcp.Tool{Name: "get_health", Annotations: annotations("Daemon health"),
			Description: "The daemon's health: whether its scheduler ticks, contracts loaded and rejected, runs going; with --etcd the node, etcd reachability and the nodes seen. Use it as the health check of this server."},
			s.health),
		def(kindRead, &mcp.Tool{Name: "brief", Annotations: annotations("Briefing for a watchdog agent"),
			Description: "The briefing an agent needs to watch a contract or one stage of it (contractd brief): the steps, health tables and allowed repairs, open incidents and recent messages (do not report them again), maintenance windows, and the fields its report must carry. Markdown in the text, the same as JSON in the structured content."},
			s.brief),

		def(kindAuthor, &mcp.Tool{Name: "lint_draft", Annotations: annotations("Lint a contract draft"),
			Description: "Check a contract draft given as text, as contractd lint does: every diagnostic with line:col, severity and message (file:line:col: severity: message in the text). Nothing is written or run."},
			s.lintDraft),
		def(kindAuthor, &mcp.Tool{Name: "explain_draft", Annotations: annotations("Explain a contract draft"),
			Description: "The plan of a contract draft given as text (contractd explain), or its diagnostics when it does not load. Nothing is written or run."},
			s.explainDraft),
		def(kindAuthor, &mcp.Tool{Name: "test_draft", Annotations: annotations("Test a contract draft"),
			Description: "Run a contract draft against a test file (recorded outputs in, expected verdicts and actions out), both given as text, through the real engine with a fake clock and no targets (contractd test). Nothing is written, run or sent."},
			s.testDraft),
		def(kindAuthor, &mcp.Tool{Name: "dry_run", Annotations: &mcp.ToolAnnotations{Title: "Dry-run a contract", OpenWorldHint: &yes},
			Description: "Run a loaded contract's probes and ask every guard what it would allow (contractd run --dry-run): no repair runs, no message is sent, no state is written. The probes are the contract's own, declared read-only checks."},
			s.dryRun),

		def(kindAct, &mcp.Tool{Name: "run_contract", Annotations: &mcp.ToolAnnotations{Title: "Run a contract now", DestructiveHint: &yes, OpenWorldHint: &yes},
			Description: "Run a contract now, as its schedule would: probes, then only the repairs its action tables declare, inside its guards (debounce, budget, crash loop, maintenance, report-only). The run records who asked for it. Off unless the server allows actions."},
			s.runContract),
		def(kindAct, &mcp.Tool{Name: "set_maintenance", Annotations: &mcp.ToolAnnotations{Title: "Start or end maintenance", DestructiveHint: &no, IdempotentHint: true},
			Description: "Start a maintenance window (repairs paused, new alerts held) for a duration with a reason, for one agent or the whole contract, or end it. The window records who set it. Off unless the server allows actions."},
			s.setMaintenance),
		def(kindAct, &mcp.Tool{Name: "release_hold_down", Annotations: &mcp.ToolAnnotations{Title: "Release a hold-down", DestructiveHint: &yes, IdempotentHint: true},
			Description: "Release a contract's hold-down, escalations and pending repairs (contractd reset); repair times stay, so budgets and the crash-loop guard still hold. Recorded with who asked. Off unless the server allows actions."},
			s.releaseHoldDown),
	}
}
