// Package engine runs a compiled contract: it probes every stage through the
// transports, judges the results with the health tables, decides severity,
// passes every candidate repair through the guard chain, raises and resolves
// alerts, and writes the Maintains snapshot, the ledger and the run history.
//
// The engine is the only place that decides; contracts only describe and
// steps only observe.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// Opener reaches a contract's named targets.
type Opener interface {
	// Open returns the transport for target (a name from the contract's
	// targets, or "local"). It fails only for a target that cannot be
	// described; an unreachable one fails later, in Exec.
	Open(c *contracts.Contract, target string) (transports.Transport, error)
	// Dialer returns a dialer from target's vantage point for http and tcp
	// steps, or nil for the engine's own host.
	Dialer(c *contracts.Contract, target string) (steps.Dialer, error)
}

// Releaser is an Opener that can close a target's connection early.
type Releaser interface {
	Release(c *contracts.Contract, target string)
}

// Event is live progress for a terminal: a step finished (Status ""), or
// a repaired stage waits Duration before it is probed again
// (EventVerifyWait).
type Event struct {
	Stage    string
	Step     string
	Severity contracts.Severity
	Status   string
	Duration time.Duration
}

// EventVerifyWait is the Status of the event sent when a repaired stage
// starts its grace period before verification.
const EventVerifyWait = "verify-wait"

// Options configure an Engine. The zero value of each field has a default.
type Options struct {
	StateDir string // where snapshots, ledgers and history live
	// Store keeps the state instead of files in StateDir (etcdstore for
	// `serve --etcd`); nil means StateDir.
	Store         store.Backend
	Parallel      int           // stages in flight at once (default 8)
	DryRun        bool          // evaluate every guard, run no repair, send no alert
	StepTimeout   time.Duration // default per-step timeout when a step sets none (30s)
	RunTimeout    time.Duration // deadline for a whole run (default 10m)
	LockWait      time.Duration // how long to wait for another run's lock
	GraceOverride time.Duration // replaces every verify-after-repair grace (demos and tests)
	Opener        Opener
	// Clock is the run's time: timestamps, guard windows, the store's
	// times. Nil means clock.UTC{}, the system clock in UTC.
	Clock  clock.Clock
	Getenv func(string) string // reads secrets named by a contract
	// Log receives the run's events, one record each at its level with
	// its fields (see log.go). Nil means Logf's lines, or nothing.
	Log *slog.Logger
	// Logf, when Log is nil, receives each event as one line (LogfLogger).
	Logf       func(format string, args ...any)
	Progress   func(Event)
	Notifiers  []notify.Notifier // added to every contract's own notify routes
	NotifyDeps notify.Deps       // what the contract's notifiers are built with
	Sleep      func(ctx context.Context, d time.Duration) error
	// ReleaseTargets closes each target's connection after the last stage
	// that uses it (one-shot runs over many hosts); a daemon keeps them.
	ReleaseTargets bool
	// CheckOnly, when set, says why this run repairs nothing (a Nagios
	// check without --repair): every repair is blocked by the guard
	// "check-only" with this reason; probes, alerts and state are as usual.
	CheckOnly string
	// Recordings, when set, answers every step from a recording through
	// its kind's Replay instead of probing (`contractd test`): nothing is
	// sent to a target but the repairs, through Opener.
	Recordings Recordings
}

// Recordings are recorded step answers: the one for step of the probe p
// describes (its stage, and whether it is the probe after a repair), or
// nil when none is recorded (the step is then unreachable).
type Recordings interface {
	Recording(p Probe, step string) *steps.Recording
}

// Engine runs contracts. It is safe for concurrent use on different contracts.
type Engine struct {
	opts Options
}

// ErrEngine marks failures of the engine itself (store, lock, deadline), as
// opposed to sick agents, which are results.
var ErrEngine = errors.New("engine failure")

// New returns an Engine; it fails when no Opener is given.
func New(opts Options) (*Engine, error) {
	if opts.Opener == nil {
		return nil, errors.New("engine: no transport opener")
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = 30 * time.Second
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = 10 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.UTC{}
	}
	if opts.NotifyDeps.Clock == nil {
		opts.NotifyDeps.Clock = opts.Clock
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Log == nil {
		opts.Log = discardLogger
		if opts.Logf != nil {
			opts.Log = LogfLogger(opts.Logf)
		}
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	return &Engine{opts: opts}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func newRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", now.UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:]))
}

// secrets returns the values of the contract's named secrets that are set.
func (e *Engine) secrets(c *contracts.Contract) map[string]string {
	m := map[string]string{}
	for _, name := range c.Secrets {
		if v := e.opts.Getenv(name); v != "" {
			m[name] = v
		}
	}
	return m
}

func secretValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
