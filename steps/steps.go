// Package steps turns a contract step into something that runs and a result
// into a judged observation: exec steps become transport commands, http and
// tcp steps are probes the engine runs itself, and health tables are
// evaluated here. Kinds lists the step kinds, one file each.
//
// Steps know nothing of scheduling, stages or repairs; the engine decides.
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// Observation is what one step saw and how its health table judged it.
type Observation struct {
	StepID     string
	Kind       string
	Values     map[string]any // fields visible to expressions: builtins plus JSON fields
	Severity   contracts.Severity
	Findings   []string
	Result     transports.Result
	HTTPStatus string // http steps; "000" when nothing answered
	Err        error  // the target was unreachable
	// Invalid says why the step's answer cannot be judged (an agent's
	// report that is late, missing or not as declared): the step is
	// unknown whatever its table says. "" for an answer to judge.
	Invalid  string
	Duration time.Duration
}

// Unreachable reports whether the step could not reach its target.
func (o *Observation) Unreachable() bool { return o.Err != nil }

// Dialer opens network connections from a vantage point (the engine's host,
// or the loopback of an SSH target).
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// ProbeFn runs a step of a kind the engine probes itself (Kind.Probe).
type ProbeFn func(ctx context.Context, step *contracts.Step, vars map[string]string, d Dialer) *Observation

// IsExec reports whether the step kind runs a script through a transport.
func IsExec(kind string) bool {
	k, ok := Kinds[kind]
	return ok && k.Exec()
}

// ExecCommand builds the transport command for an exec step: the script
// with the contract's vars (and the item's keys in a for_each stage) set as
// shell variables at its top (see Script); the named secrets travel in Env,
// exported and redacted by the transport. A sudo=true step is its one
// command run as `sudo -n -- COMMAND ARGS…` instead (SudoScript), with no
// secrets: sudo would not pass them on.
func ExecCommand(step *contracts.Step, vars map[string]string, secrets map[string]string, timeout time.Duration) transports.Command {
	shell := Kinds[step.Kind].Shell
	if shell == "" {
		shell = "bash" // an exec kind names its shell; bash is the default
	}
	if step.Sudo {
		// Lint made sure the words fill literally; a secret is never one.
		names := make([]string, 0, len(secrets))
		for k := range secrets {
			names = append(names, k)
		}
		argv, err := contracts.SudoArgv(strings.TrimSpace(step.Script), vars, names)
		if err != nil {
			return transports.Command{Script: "echo " + ShellQuote("contractd: step "+step.ID+" cannot run through sudo: "+err.Error()) + " >&2\nexit 126\n", Shell: "sh", Timeout: timeout}
		}
		return transports.Command{Script: SudoScript(argv), Shell: "sh", Timeout: timeout}
	}
	return transports.Command{Script: Script(step.Script, vars), Shell: shell, Timeout: timeout, Env: secrets}
}

// FromResult builds the observation of an exec step that ran (or could not
// reach its target, when err is non-nil).
func FromResult(step *contracts.Step, res transports.Result, err error) *Observation {
	o := &Observation{StepID: step.ID, Kind: step.Kind, Result: res, Err: err, Duration: res.Duration}
	o.Values = map[string]any{
		"stdout":    strings.TrimRight(res.Stdout, "\r\n"),
		"stderr":    strings.TrimRight(res.Stderr, "\r\n"),
		"exit_code": res.ExitCode,
		"timed_out": res.TimedOut,
		"duration":  res.Duration.Seconds(),
	}
	if err != nil {
		unseen(o, err)
		return o
	}
	o.Values["unreachable"] = false
	switch step.As {
	case contracts.AsJSON.Name:
		mergeJSON(o, []byte(res.Stdout))
	case contracts.AsLines.Name:
		o.Values["lines"] = splitLines(res.Stdout)
	}
	return o
}

// splitLines is as=lines: stdout's non-empty lines, each trimmed of
// spaces at its ends.
func splitLines(s string) []any {
	out := []any{}
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// unseen marks o as a step whose target could not be reached: it saw
// nothing, so it keeps only the values that say so (unreachable,
// timed_out, duration). Its output values are absent, never empty: a
// Maintains key read from them keeps its last value, and a later step's
// stdout is not overwritten in its stage's merged values by one nobody
// saw.
func unseen(o *Observation, err error) {
	o.Err, o.Invalid = err, ""
	for k := range o.Values {
		switch k {
		case "unreachable", "timed_out", "duration":
		default:
			delete(o.Values, k)
		}
	}
	o.Values["unreachable"] = true
}

// mergeJSON puts the fields of a JSON object at the top level of Values. A
// body that is not a JSON object is recorded as a finding, and the fields
// stay absent (so rows over them are unknown, never healthy).
func mergeJSON(o *Observation, body []byte) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		o.Findings = append(o.Findings, fmt.Sprintf("output is not JSON: %v", err))
		return
	}
	o.Values["json"] = v
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, val := range m {
		if _, builtin := o.Values[k]; builtin {
			continue
		}
		o.Values[k] = normalizeNumber(val)
	}
}

// normalizeNumber turns whole JSON numbers into ints so `retry_count == 0`
// and `0–2` compare as an author expects.
func normalizeNumber(v any) any {
	switch x := v.(type) {
	case float64:
		if x == float64(int64(x)) && x < 1<<53 && x > -(1<<53) {
			return int(x)
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumber(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeNumber(e)
		}
		return x
	default:
		return v
	}
}
