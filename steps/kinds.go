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
}

// builtin lists the step kinds. The probes are http.go and tcp.go, beside
// their contract halves in contracts (execstep.go, httpstep.go,
// tcpstep.go); the exec kinds share ExecCommand and FromResult; agent.go
// holds its kind whole. A new kind is one file holding its Kind (contract
// half and probe) and a row here.
var builtin = []Kind{
	{contracts.BashStep, nil, replayExec},
	{contracts.ShStep, nil, replayExec},
	{contracts.HTTPStep, probeHTTP, replayHTTP},
	{contracts.TCPStep, probeTCP, replayTCP},
	agentKind,
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
// on a kind that is neither an exec kind nor has a probe, or is both, and
// on one that declares no Values or has no Replay.
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
	contracts.RegisterStepKind(k.StepKind)
	Kinds[k.Name] = k
}
