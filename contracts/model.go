// Package contracts reads responsibility contracts: Markdown files with YAML
// front matter that a person reads as a runbook and the engine executes as a
// monitor. It owns the format, the cell shorthand, compilation of every
// expression at load time, and diagnostics that point into the original file.
//
// Parsing knows nothing of transports or scheduling: the result of Load is a
// plain model plus compiled expression programs.
package contracts

import (
	"fmt"
	"strings"
	"text/template"
	"time"

	stepfill "github.com/contractd/contractd/contracts/fill"
	"github.com/expr-lang/expr/vm"

	"github.com/contractd/contractd/transports"
)

// Pos is a position in a contract file. Line and Col are 1-based and always
// refer to the original file, front matter included.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// String renders the position as FILE:LINE:COL.
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Severity is the verdict of a cell, row, step, agent or run. The zero value
// is SeverityUnknown, so nothing is healthy by accident.
type Severity int

// Severities in the order the engine escalates them. Unknown and Unreachable
// are reported as themselves and never count as healthy.
const (
	SeverityUnknown Severity = iota
	SeverityHealthy
	SeverityDegraded
	SeverityCritical
	SeverityUnreachable
	SeveritySkipped
	// SeveritySuppressed is a unit that fails while something it depends
	// on fails (depends_on, or a target its via chain goes through): the
	// dependency is the root cause, so the unit is neither repaired nor
	// alerted. Only the engine judges it; no table cell says it.
	SeveritySuppressed
)

var severityNames = map[Severity]string{
	SeverityUnknown:     "unknown",
	SeverityHealthy:     "healthy",
	SeverityDegraded:    "degraded",
	SeverityCritical:    "critical",
	SeverityUnreachable: "unreachable",
	SeveritySkipped:     "skipped",
	SeveritySuppressed:  "suppressed",
}

// String returns the severity's name, or severity(N) for an unknown value.
func (s Severity) String() string {
	if n, ok := severityNames[s]; ok {
		return n
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalText renders the severity by name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a severity name; it fails on an unknown name.
func (s *Severity) UnmarshalText(b []byte) error {
	for k, v := range severityNames {
		if v == string(b) {
			*s = k
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", b)
}

// Contract is one loaded, validated and compiled responsibility contract.
type Contract struct {
	Path             string
	Kind             string
	Name             string
	Title            string
	Description      string
	Version          string
	RuntimeContract  int
	Agent            string   // the agent this contract runs as (front matter `agent`)
	ReportOnlyAgents []string // detect and report, never repair
	Schedule         Schedule
	Commands         []string // on-demand command names, e.g. zulip-status
	Guards           Guards
	Targets          map[string]*Target
	Notify           []NotifyRoute
	// Vars are each var's text: what scripts, commands, URLs, addresses and
	// notifier options read. VarValues are the same vars typed as declared
	// (int, float64, bool or string): what expressions read as vars.NAME.
	Vars       map[string]string
	VarValues  map[string]any
	Secrets    []string // environment variable names exported to scripts and redacted
	ForEach    map[string][]map[string]any
	AlertOn    string // "change" (default), "repair" (alert only on repair), "critical"
	Maintains  Maintains
	Stages     []*Stage
	Escalation []*EscalationRule
	Log        string // optional log file for one line per run and per action
	// Messages shape the contract's messages by kind (open, reminder,
	// resolved, repair); a kind without a template gets the engine's text.
	Messages map[string]*template.Template
	// DependsOn are what every unit of the contract depends on (besides
	// the targets its stages reach through via, which each unit depends
	// on by itself): while one fails, a unit that fails too is suppressed.
	DependsOn []*DepRef
	// Maintenance are the contract's recurring maintenance windows.
	Maintenance []*MaintenanceWindow
	// Defs are where the names the contract declares are written.
	Defs Defs

	declared map[string]bool // the var names the contract reads (DeclaresVar)
	own      []string        // the keys of its own vars, sorted
}

// Defs say where a contract's declared names are written, for an
// editor's go to definition; a target's and a step's own Pos say theirs.
type Defs struct {
	// Vars are the vars by name: the front matter's key, or the
	// inventory's that declares a var the contract does not.
	Vars map[string]Pos
	// Lists are the for_each lists by name, and Items each list's item
	// keys where an item first has them.
	Lists map[string]Pos
	Items map[string]map[string]Pos
}

// IsReportOnly reports whether agent is listed in report_only_agents.
func (c *Contract) IsReportOnly(agent string) bool {
	for _, a := range c.ReportOnlyAgents {
		if a == agent {
			return true
		}
	}
	return false
}

// Schedule says when a contract runs under `contractd serve`.
type Schedule struct {
	Every   time.Duration
	OnStart bool
	// StartDelay holds the first run back until this long after the
	// daemon started (systemd's OnBootSec): on_start runs then, and no
	// scheduled run comes earlier. Zero runs at once.
	StartDelay time.Duration
}

// Guards are the contract-wide repair guards; action rows may override some.
type Guards struct {
	Debounce         time.Duration // per agent, between repairs (default 300s)
	CrashLoop        CrashLoop
	UnreachableAfter int           // consecutive unreachable runs before it counts critical
	UnknownAfter     int           // consecutive unknown runs before that is an incident (default 3)
	RecoverAfter     int           // consecutive healthy runs before a unit counts healthy again
	After            int           // consecutive failing runs before a repair fires (default 1)
	Budget           *Budget       // N repairs per window per unit
	Grace            time.Duration // verify-after-repair grace (default 30s)
	EscalateAfter    int           // failed repairs before escalating instead of repairing
	Repeat           time.Duration // alert reminder interval (default 4h)
	BlastRadius      *BlastRadius  // repairs across the contract's units per run; nil = no limit
	SlowRetry        *SlowRetry    // slow down after consecutive failed repairs; nil = off
	Flapping         *Flapping     // flap detection; nil = off
	// Settings are the settings of guards registered beyond the built-in
	// ones (RegisterGuardSetting), by key, as guards: sets them: read
	// them with Setting, which knows their defaults.
	Settings map[string]any
}

// Flapping is flap detection, as Icinga's: a unit whose state changed in
// more than High percent of its last Runs runs is flapping, until the
// share falls to Low percent or below. Every change counts the same (no
// weighting). While it flaps, messages about the unit are held (one says
// it started, one that it stopped) and so are its repairs, unless Repair.
type Flapping struct {
	Low    float64 // percent
	High   float64 // percent
	Runs   int
	Repair bool
}

// Flap detection's defaults, Icinga 2's: 20 runs, flapping above 30%,
// settled again at 25% or below.
const (
	DefaultFlapRuns = 20
	DefaultFlapLow  = 25.0
	DefaultFlapHigh = 30.0
)

// SlowRetry slows a unit's repairs after After consecutive repairs whose
// verification failed: from then on a repair runs only every Factor times
// the schedule interval, for as long as it takes, until the unit is seen
// healthy again. The zero value (a row's `slow_retry=off`) is off.
type SlowRetry struct {
	After  int
	Factor int
}

// On reports whether s slows anything.
func (s *SlowRetry) On() bool { return s != nil && s.After > 0 && s.Factor > 1 }

// String renders s as written in a row: "3 then 5x", or "off".
func (s *SlowRetry) String() string {
	if !s.On() {
		return "off"
	}
	return fmt.Sprintf("%d then %dx", s.After, s.Factor)
}

// BlastRadius caps repairs in one run: at most MaxRepairs (0: no cap), and
// none at all when the fraction Trip of at least MinUnits units fails at
// once (a network or a shared dependency, not the agents).
type BlastRadius struct {
	MaxRepairs int
	Trip       float64
	MinUnits   int
}

// AlertOn values.
const (
	AlertOnChange   = "change"   // every incident message and every repair (the default)
	AlertOnRepair   = "repair"   // repairs and escalations only
	AlertOnCritical = "critical" // incidents below critical are recorded, not sent
)

// CrashLoop.Then values.
const (
	CrashLoopAlert    = "alert"
	CrashLoopEscalate = "escalate"
)

// Escalation-table actions: the first word of the Action cell.
const (
	EscalateLog      = "log"      // record only
	EscalateRelay    = "relay"    // one incident per critical agent (per degraded agent when none is critical)
	EscalateAlert    = "alert"    // one incident for the row
	EscalatePage     = "page"     // as alert
	EscalateEscalate = "escalate" // as alert
	EscalateRecover  = "recover"  // record only: the run's repairs are the answer
)

// CrashLoop turns repairs into alerts when a unit restarts too often.
type CrashLoop struct {
	MaxRestarts int
	Per         time.Duration
	Then        string // "alert"
}

// Budget allows Count repairs per Window.
type Budget struct {
	Count  int
	Window time.Duration
}

// String renders the budget as "N per WINDOW".
func (b Budget) String() string { return fmt.Sprintf("%d per %s", b.Count, b.Window) }

// Target is one link of a transport chain: a transport kind (one of
// transports.Kinds) and its address as written; Via names the parent
// target (empty means the engine's host).
type Target struct {
	Name string
	// Kind is the transport kind ("local", "ssh", "pct", "docker"), the
	// target's key in the contract.
	Kind string
	// Address is the kind's value as written: "root@h:22", "112",
	// "agent-zero"; "" for local.
	Address string
	Via     string
	// Options for ssh targets.
	KnownHosts     string // known_hosts file (default ~/.ssh/known_hosts)
	HostKey        string // "strict" (default) or "accept-new"
	Identity       []string
	ConnectTimeout time.Duration
	// Sudo says the login on this link is not root. On a local or ssh
	// target, its repairs (and the steps marked sudo=true) run as `sudo
	// -n -- COMMAND ARGS…`, the declared command split into words without
	// a shell (SudoArgv), so that a sudoers line can allow exactly it;
	// every other step runs as the login user. On a pct or docker
	// target, the `pct exec`/`docker exec` on its parent runs through
	// `sudo -n --`, for every step and repair.
	Sudo bool
	Pos  Pos
}

// SudoCommands reports whether the target's own repairs and sudo=true
// steps run through sudo: a local or ssh target with sudo: true. A pct or
// docker target's sudo is its parent's command (SudoHop).
func (t *Target) SudoCommands() bool {
	return t != nil && t.Sudo && !t.kind().SudoHop
}

// SudoHop reports whether the target is a container whose wrapper runs
// through sudo on its parent (`sudo -n -- pct exec`, `sudo -n -- docker
// exec`): a kind whose transports.Kind.SudoHop is set.
func (t *Target) SudoHop() bool {
	return t != nil && t.Sudo && t.kind().SudoHop
}

// kind is the target's transport kind; the zero Kind for an unknown one.
func (t *Target) kind() transports.Kind {
	k, _ := transports.KindOf(t.Kind)
	return k
}

// Maintains is the schema of the snapshot the contract keeps.
type Maintains struct {
	Keys  []*MaintainedKey
	Agent []*MaintainedKey // per-agent snapshot schema: the union of every agent's keys (from the JSON example)
	// PerAgent holds each agent's own keys from the JSON example, in order,
	// with that agent's example value in Example (a constant such as
	// "platform": "dsh" is the value to report). Value and Program are
	// shared with the union's key of the same name.
	PerAgent map[string][]*MaintainedKey
	// Agents lists the agents of the example in file order.
	Agents []string
}

// MaintainedKey is one `key: type` bullet (or one field of the per-agent schema).
type MaintainedKey struct {
	Name string
	Type string   // "string", "enum", "timestamp", "map", "bool", "int", "number"
	Enum []string // allowed values when Type is "enum"
	Doc  string
	Pos  Pos
	// Example is the per-agent example's value (PerAgent keys only): a
	// string, bool, int64, float64 or nil; nil for objects and lists.
	Example any
	// Value is the expression from the `Key | Value` table under the
	// per-agent schema that fills this key from the agent's steps
	// (`service.stdout`); "" when the engine finds the key by name.
	Value string
	// Program is Value compiled (any-valued); nil when Value is "".
	Program *vm.Program
}

// Stage is an H3 section of `## Execution`: one agent or platform, run
// independently of the others. A critical gate stage skips the stages after it.
type Stage struct {
	ID      string
	Title   string
	Agent   string
	On      string // target name; "" or "local" is the engine's host
	Gate    bool
	ForEach string // name of a for_each list; the stage is expanded per item
	Steps   []*Step
	Actions []*ActionRow
	Pos     Pos
}

// Step kinds.
const (
	KindBash = "bash"
	KindSh   = "sh"
	KindHTTP = "http"
	KindTCP  = "tcp"
)

// Step is one probe: a fenced code block with `{id=… }` attributes.
type Step struct {
	ID      string
	Title   string
	Kind    string // bash, sh, http, tcp
	Script  string // exec steps: the script; http: the request text; tcp: host:port
	On      string // overrides the stage's target
	Timeout time.Duration
	As      string // as=: "json", "lines", "text", or "" (the kind's default)
	Via     string // http/tcp: tunnel through this ssh target
	// Sudo runs the step through `sudo -n --` on a target with sudo:
	// true: its script is one command, split into words without a shell
	// (SudoArgv), as a repair's is.
	Sudo bool
	// CmdPos is where the script's first word is, for diagnostics about
	// a sudo step's words.
	CmdPos Pos
	HTTP   *HTTPRequest
	Health []*HealthRow
	// Fields are the fields of the step's JSON output its author declared
	// (fields=, or an example block), by dotted path; nil when none are.
	Fields map[string]Type
	Pos    Pos
}

// HTTPRequest is a parsed `http` block.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers map[string]string
	Body    string
}

// HealthRow is one row of a health table, or the row an `Expected:` line makes.
type HealthRow struct {
	Field string // the row's subject; "stdout" for Expected lines
	Cells []*Cell
	Pos   Pos
	// Export marks a field whose numeric value the report keeps in the
	// step's metrics: /metrics and Nagios perfdata show it
	// (`` `used_pct` {export=true} `` in the field cell).
	Export bool
	// Expected marks the row an `Expected:` line makes: its finding says
	// "expected", since the cell shows only the value.
	Expected bool
}

// Cell is one health-table cell compiled to an expression with the row's
// field as subject (`it`).
type Cell struct {
	Severity Severity
	Source   string // as written, backticks removed
	Expr     string // the expr-lang expression it compiled to
	Program  *vm.Program
	Pos      Pos
}

// Built-in actions that run nothing on a target.
const (
	ActionLog      = "log"
	ActionAlert    = "alert"
	ActionMonitor  = "monitor"
	ActionEscalate = "escalate"
)

// ActionRow is one row of an action table: a condition and the literal action.
type ActionRow struct {
	Condition string // as written
	Expr      string
	Program   *vm.Program
	Action    string // literal command, or a built-in name
	Builtin   string // "" for a command, else one of the Action* built-ins
	Message   string // text for log/alert/escalate rows
	// Template shapes the messages this row causes (its repairs, its
	// alert's incident); nil means the contract's, else the engine's text.
	Template *template.Template
	On       string // target the command runs on (defaults to the stage's)
	// Timeout bounds the command (`timeout=D` in the Guards column); 0
	// means the engine's step timeout (DefaultStepTimeout, 30s). Built-in
	// actions run nothing and have none.
	Timeout time.Duration
	Guard   ActionGuard
	Tier    int // 0 = no tier; rows of one condition key ordered by occurrence
	// CallsRestarts is set when the condition calls restarts(): the row
	// watches for a crash loop itself, so the crash-loop guard's own alert
	// would say the same thing twice.
	CallsRestarts bool
	// Reads are the values the condition reads, as dotted paths
	// (`probe.stdout`), so a report can say what was seen.
	Reads []string
	Pos   Pos
	// CmdPos is where the command starts in the Action cell, for
	// diagnostics about its words (a cell is one line).
	CmdPos Pos
}

// ActionGuard overrides contract guards for one action row. Zero means inherit.
type ActionGuard struct {
	After         int
	Budget        *Budget
	Grace         time.Duration
	EscalateAfter int
	RestartCount  string // expression reading a restart count from the target's probes (e.g. pm2.restarts)
	// SlowRetry overrides the contract's slow_retry for the row; nil
	// inherits, a zero SlowRetry turns it off (`slow_retry=off`).
	SlowRetry *SlowRetry
	// RestartCountProgram is RestartCount compiled (any-valued); nil when unset.
	RestartCountProgram *vm.Program
	// Settings are the row's settings of guards registered beyond the
	// built-in ones, by key; a key absent inherits the contract's
	// (Guards.Setting).
	Settings map[string]any
}

// EscalationRule is a row of the escalation table, evaluated over aggregates
// (critical_count, degraded_count, unreachable_count, agents, gate_ok).
type EscalationRule struct {
	Condition string
	Expr      string
	Program   *vm.Program
	Action    string // alert, relay, recover, log
	Message   string
	Pos       Pos
}

// KeysFor returns the per-agent snapshot keys of agent: its own keys from
// the example when it has an entry there, otherwise the union of all
// agents' keys. It never fails; with no schema it returns nil.
func (m Maintains) KeysFor(agent string) []*MaintainedKey {
	if keys, ok := m.PerAgent[agent]; ok {
		return keys
	}
	return m.Agent
}

// TargetLink renders one link of a chain: "local", "ssh root@h", "pct 112" or
// "docker NAME" (transports.Link).
func (t *Target) TargetLink() string { return transports.Link(t.Kind, t.Address) }

// Chain renders the transport chain of the named target, outermost first,
// e.g. "ssh root@192.168.68.15 → pct 112". It returns "local" for "" or
// "local", and the bare name in angle brackets for an undefined target.
func (c *Contract) Chain(name string) string {
	if name == "" || name == "local" {
		return "local"
	}
	if strings.HasPrefix(name, "$") {
		return name + " (chosen per item at run time)"
	}
	var links []string
	seen := map[string]bool{}
	for cur := name; cur != ""; {
		t, ok := c.Targets[cur]
		if !ok {
			links = append(links, "<"+cur+">")
			break
		}
		if seen[cur] {
			links = append(links, "<cycle>")
			break
		}
		seen[cur] = true
		links = append(links, t.TargetLink())
		cur = t.Via
	}
	for i, j := 0, len(links)-1; i < j; i, j = i+1, j-1 {
		links[i], links[j] = links[j], links[i]
	}
	return strings.Join(links, " → ")
}

// ExpandAttr fills a stage's agent= or on= (or a step's on= or via=) from
// a stage's values (StageVars): `$key`, which heading attributes need since
// a brace ends them, or `${key}`. A name with no value is left as written.
func ExpandAttr(s string, vars map[string]string) string {
	if rest, ok := strings.CutPrefix(s, "$"); ok && !strings.HasPrefix(rest, "{") {
		if v, ok := vars[strings.TrimPrefix(rest, "item.")]; ok {
			return v
		}
	}
	return stepfill.Expand(s, vars)
}

// ItemName names a for_each item in a stage run's id (`lanes[alpha]`): its
// name, id, unit or agent key, else its index.
func ItemName(item map[string]any, i int) string {
	for _, k := range []string{"name", "id", "unit", "agent"} {
		if v, ok := item[k]; ok {
			return fmt.Sprint(v)
		}
	}
	return fmt.Sprint(i)
}

// StepTarget is the target a step runs on: its own on=, else the stage's.
// A step the engine probes itself (http, tcp) has no on= and probes from
// the engine's host ("local").
func (st *Stage) StepTarget(s *Step) string {
	if s.On != "" {
		return s.On
	}
	if isProbeKind(s.Kind) {
		return "local"
	}
	if st.On == "" {
		return "local"
	}
	return st.On
}
