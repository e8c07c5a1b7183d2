// Package transports runs scripts on targets: the engine's host, SSH hosts,
// Proxmox containers through `pct exec`, and Docker containers through
// `docker exec`, composed into chains with `via`.
//
// Scripts always travel over stdin to a fixed argv (`bash -s` / `sh -s`); they
// are never spliced into a command line.
package transports

import (
	"context"
	"errors"
	"time"
)

// ErrUnreachable means the target could not be reached at all: the dial was
// refused, authentication or the host key failed, the container is not
// running, or the VMID is unknown. A probe that ran and failed is a Result.
var ErrUnreachable = errors.New("unreachable")

// ErrTimeout is wrapped when a call's deadline expired before it finished.
var ErrTimeout = errors.New("timeout")

// DefaultOutputCap bounds captured stdout and stderr per command.
const DefaultOutputCap = 1 << 20

// Command is one script to run on a target.
type Command struct {
	Script  string            // sent over stdin
	Shell   string            // "bash" (default) or "sh"
	Timeout time.Duration     // per command; 0 means only the context's deadline
	Env     map[string]string // exported at the top of the stdin script; values are redacted
	Cap     int               // output cap per stream; 0 means DefaultOutputCap
}

// Result is what a command did on a reachable target.
type Result struct {
	Stdout      string
	Stderr      string
	StdoutBytes int64 // total bytes seen, which may exceed len(Stdout) when capped
	StderrBytes int64
	ExitCode    int
	Duration    time.Duration
	TimedOut    bool
	// NotRun marks a batched command whose frame never finished: the
	// batch ran out of time (TimedOut is set too) or its session died
	// (ExecBatch also returns an error). Its ExitCode is -1 and Stderr
	// says so; the commands before it in the batch have their own results.
	NotRun bool
	// Note is set when the command did not run the usual way and the report
	// should say so: a broken resident session, for instance, after which
	// the command ran in a fresh session.
	Note string
}

// Transport runs commands on one target.
type Transport interface {
	// Exec runs one command. It returns an error wrapping ErrUnreachable when
	// the target could not be reached; a command that ran is a Result.
	Exec(ctx context.Context, cmd Command) (Result, error)
	// ExecBatch runs consecutive probe commands in one session where the
	// transport can, each with its own timeout and output. It returns one
	// Result per command, or an error wrapping ErrUnreachable.
	ExecBatch(ctx context.Context, cmds []Command) ([]Result, error)
	// String names the chain, e.g. "ssh root@h:22 → pct 112".
	String() string
}
