package steps

import (
	"fmt"

	"github.com/contractd/contractd/contracts"
)

// Kind is a step kind whole: its contract half (how its block is read,
// linted and explained: contracts.StepKind) and how it runs. An exec kind
// (Shell set) runs its script through the step's target's transport
// (ExecCommand); any other kind is probed by the engine itself, with
// Probe.
type Kind struct {
	contracts.StepKind
	// Probe runs a step of a kind that is not an exec kind; nil for an
	// exec kind.
	Probe ProbeFn
	// Replay turns a recorded answer into the step's observation, as
	// `contractd test` runs a contract: a recorded result is never run
	// against a target. Every kind has one.
	Replay ReplayFn
	// Observe adds an exec kind's own values to the observation of a step
	// that ran (FromResult calls it, for a run and a replay alike): a
	// plugin's status, output and perfdata. Nil for a kind whose values
	// are the exec values.
	Observe func(step *contracts.Step, o *Observation)
	// Judge is the verdict of a kind that judges its own steps
	// (StepKind.Verdict), and only of one: Evaluate makes the step the
	// worst of it and its table's rows (see JudgeFn).
	Judge JudgeFn
}

// JudgeFn judges a step of a kind whose output is its verdict: the
// severity before the step's table is read, and the findings that say
// why, which Evaluate keeps after the rows' own when the step is not
// healthy. It may step aside for a table that judges the same thing
// itself (a row on the exit code), answering healthy.
type JudgeFn func(step *contracts.Step, o *Observation) (contracts.Severity, []string)

// builtin lists the step kinds. The probes are http.go and tcp.go, beside
// their contract halves in contracts (execstep.go, httpstep.go,
// tcpstep.go); the exec kinds share ExecCommand and FromResult; agent.go
// and nagios.go hold their kinds whole. A new kind is one file holding its
// Kind (contract half and probe) and a row here.
var builtin = []Kind{
	{StepKind: contracts.BashStep, Replay: replayExec},
	{StepKind: contracts.ShStep, Replay: replayExec},
	{StepKind: contracts.HTTPStep, Probe: probeHTTP, Replay: replayHTTP},
	{StepKind: contracts.TCPStep, Probe: probeTCP, Replay: replayTCP},
	agentKind,
	nagiosKind,
}

// Kinds is every step kind by name: the rows of builtin, registered when
// the package is initialised, and any kind a test build registers. Read
// it; only Register writes it.
var Kinds = map[string]Kind{}

func init() {
	for _, k := range builtin {
		Register(k)
	}
}

// Register adds a step kind to Kinds and its contract half to the contract
// parser (contracts.RegisterStepKind). Call it from an init function,
// before any contract is read. It panics on a duplicate or empty name, and
// on a kind that is neither an exec kind nor has a probe, or is both, on
// one that declares no Values or has no Replay, and on one whose Verdict
// and Judge disagree.
func Register(k Kind) {
	if k.Exec() == (k.Probe != nil) {
		panic(fmt.Sprintf("steps: step kind %q needs either a Shell (an exec kind) or a Probe", k.Name))
	}
	if len(k.Values) == 0 {
		panic(fmt.Sprintf("steps: step kind %q declares no Values: lint could check no field of its steps", k.Name))
	}
	if k.Replay == nil {
		panic(fmt.Sprintf("steps: step kind %q has no Replay: contractd test could not run its steps from a recording", k.Name))
	}
	if k.Verdict != (k.Judge != nil) {
		panic(fmt.Sprintf("steps: step kind %q: a kind that judges its own steps (Verdict) has a Judge, and only such a kind", k.Name))
	}
	if k.Observe != nil && !k.Exec() {
		panic(fmt.Sprintf("steps: step kind %q: Observe is an exec kind's; a probe makes its values itself", k.Name))
	}
	contracts.RegisterStepKind(k.StepKind)
	Kinds[k.Name] = k
}
