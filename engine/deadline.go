package engine

import (
	"cmp"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// The deadline policy of a run. Every timeout the engine sets comes from
// here: a step's own timeout (from the contract, else Options.StepTimeout),
// plus a named allowance where reaching the target costs time of its own.
const (
	// DefaultStepTimeout bounds a step or a repair command that sets no
	// timeout of its own.
	DefaultStepTimeout = 30 * time.Second
	// DefaultRunTimeout bounds a whole run.
	DefaultRunTimeout = 10 * time.Minute
	// reachAllowance is what reaching a target may add on top of the
	// commands' own timeouts: a dial, a key exchange, a login shell, and the
	// kill grace of `timeout -k` on the target. A batch or a repair whose
	// target stops answering is abandoned after its commands' time plus
	// this, so one hung target cannot hold the run.
	reachAllowance = 15 * time.Second
	// deliverTimeout bounds one run's delivery to every notifier; each
	// notifier's own per-attempt timeout applies within it.
	deliverTimeout = 30 * time.Second
)

// stepTimeout is how long one step may run on its target.
func (e *Engine) stepTimeout(step *contracts.Step) time.Duration {
	if step.Timeout > 0 {
		return step.Timeout
	}
	return e.opts.StepTimeout
}

// batchDeadline is how long a batch of exec commands may take as a whole:
// every command's own timeout, plus reaching the target once.
func batchDeadline(cmds []transports.Command) time.Duration {
	var total time.Duration
	for _, c := range cmds {
		total += c.Timeout
	}
	return total + reachAllowance
}

// actionTimeouts returns a repair command's own timeout (the row's
// timeout=, else Options.StepTimeout) and the deadline of the call that
// runs it (reaching the target included).
func (e *Engine) actionTimeouts(row *contracts.ActionRow) (command, call time.Duration) {
	command = cmp.Or(row.Timeout, e.opts.StepTimeout)
	return command, command + reachAllowance
}

// hostCheckTimeouts are a host check's (depend.go): the step timeout for
// the command, which runs nothing, and the deadline of the call, which
// adds reaching the target.
func (e *Engine) hostCheckTimeouts() (command, call time.Duration) {
	return e.opts.StepTimeout, e.opts.StepTimeout + reachAllowance
}
