package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// errNotCompiled is what evaluating a row that failed to compile gives.
var errNotCompiled = errors.New("condition not compiled")

// run is one Run of one contract. Its phases, in order, each in a file of
// its own:
//
//	probe   (probe.go)   every stage's steps through the transports, judged by the health tables
//	judge   (judge.go)   stages → units, hysteresis → settled severities
//	repair  (repair.go)  action rows through the guard chain; repairs run
//	verify  (verify.go)  repaired stages probed again; units settle at their state after repair
//	alert   (alert.go)   incidents open, remind and resolve; the escalation table
//	deliver (deliver.go) messages to the notifiers, the outbox retried
//	record  (record.go)  snapshot (snapshot.go), ledger and history written
//
// Expressions see environments built by env (env.go) only; every timeout
// comes from deadline.go.
type run struct {
	e       *Engine
	c       *contracts.Contract
	rep     *Report
	st      store.Backend
	log     *slog.Logger // with the contract and run_id; see event
	ledger  *store.Ledger
	chain   *guard.Chain
	secrets map[string]string // the contract's secrets that are set
	redact  []string          // their values, removed from everything kept
	state   map[string]any    // the previous snapshot, `state` in expressions

	stages     []*stageRun
	gateValues map[string]any // the gates' steps by id, seen by every later expression
	gateOK     bool
	downGate   string
	units      []*unit
	fleet      guard.Fleet // the contract's units this run, for the blast-radius guard
	noRepair   string      // non-empty: repairs are off for this run, and why
	noRepairBy string      // the guard the report names for it
	// unshared is set when the shared state cannot be reached (etcd
	// without quorum): the run probes and reports, and records nothing,
	// so it repairs nothing and sends nothing.
	unshared string

	intents   map[string]*intent // incidents raised this run, by key
	outgoing  []outgoing
	notifiers []notify.Notifier
	logRoute  bool // a log route writes every message to the engine's log
	mu        sync.Mutex

	phase       string                     // the phase under way, for a panic's report
	panicked    atomic.Pointer[PanicError] // the first panic a goroutine of the run recovered
	interrupted string                     // why the run stopped early (its context ended), for its record
}

// Run runs contract c once: probe, judge, repair and verify, alert,
// deliver, record. It returns an error wrapping ErrEngine only when the
// engine itself failed (state store, lock, deadline, a panic: then also a
// *PanicError); sick or unreachable agents are results in the Report. A
// run whose ctx ends (a signal, a daemon stopping) cancels what is in
// flight, records what it did with the reason in its history record, and
// returns an engine failure. When another process holds the contract's run
// lock past LockWait, the report says so in Skipped and the error is nil.
func (e *Engine) Run(ctx context.Context, c *contracts.Contract) (rep *Report, err error) {
	now := e.opts.Clock.Now()
	rep = &Report{
		Contract: c.Name, Version: c.Version, RunID: newRunID(now), StartedAt: now,
		DryRun: e.opts.DryRun, Stages: []*StageReport{}, Agents: map[string]*AgentReport{},
		Actions: []*ActionReport{}, Alerts: []*AlertReport{},
	}
	log := e.opts.Log.With("contract", transports.Printable(c.Name), "run_id", rep.RunID)
	// Deferred first, so it runs last: the run's end as it was returned.
	defer func() { logEnd(log, rep, err) }()
	// A panic before the run holds its lock has nothing to record.
	defer func() {
		if v := recover(); v != nil {
			p := asPanic("run (start)", v)
			log.Error("panic (recovered: this run is an engine failure)", "error", transports.Printable(p.Error()), "stack", string(p.Stack))
			rep, err = e.fail(rep, p)
		}
	}()
	st, err := e.openStore()
	if err != nil {
		return e.fail(rep, err)
	}
	unlock, err := st.Lock(ctx, c.Name, e.opts.LockWait)
	if errors.Is(err, store.ErrLocked) {
		rep.Skipped = "another run holds the lock"
		rep.FinishedAt = e.opts.Clock.Now()
		return rep, nil
	}
	if err != nil {
		return e.fail(rep, err)
	}
	defer unlock()

	r := &run{e: e, c: c, rep: rep, st: st, log: log, secrets: e.secrets(c), gateValues: map[string]any{}, intents: map[string]*intent{}, phase: "open"}
	r.redact = secretValues(r.secrets)
	// One recover boundary for the whole run, its goroutines included
	// (they hand their panic over, see catch): a panic is this run's engine
	// failure, recorded under the lock, never the process's end.
	defer func() {
		if v := recover(); v != nil {
			rep, err = r.abort(asPanic("run ("+r.phase+")", v))
		}
	}()
	return r.do(ctx)
}

// do is the run's phases in order, once it holds the lock.
func (r *run) do(ctx context.Context) (*Report, error) {
	e, rep := r.e, r.rep
	if err := r.open(); err != nil {
		return e.fail(rep, err)
	}
	if e.opts.CheckOnly != "" && r.noRepair == "" {
		r.noRepair, r.noRepairBy = e.opts.CheckOnly, "check-only"
	}

	rctx, cancel := context.WithTimeout(ctx, e.opts.RunTimeout)
	defer cancel()
	r.phase = "probe"
	r.probe(rctx)
	r.phase = "judge"
	r.judge()
	r.phase = "repair"
	r.verifyInterrupted()
	r.repair(rctx)
	r.agentReports()
	if r.unshared != "" {
		return r.reportOnly()
	}
	r.phase = "alert"
	r.alert()
	r.phase = "deliver"
	unrecorded := r.deliver(ctx)

	r.phase = "record"
	rep.OverallSeverity = r.overall()
	rep.FinishedAt = e.opts.Clock.Now()
	rep.DurationMS = rep.FinishedAt.Sub(rep.StartedAt).Milliseconds()
	if rctx.Err() != nil && ctx.Err() == nil {
		rep.Errors = append(rep.Errors, "run deadline exceeded")
	}
	if ctx.Err() != nil {
		r.interrupted = interruptedBy(ctx)
		rep.Errors = append(rep.Errors, "interrupted: "+r.interrupted)
		r.event(slog.LevelWarn, "run interrupted; recording what the run did", "reason", r.interrupted)
	}
	if e.opts.DryRun {
		return rep, nil
	}
	if unrecorded != nil {
		return e.fail(rep, unrecorded)
	}
	if err := r.save(); err != nil {
		return e.fail(rep, err)
	}
	if p := r.panicked.Load(); p != nil {
		// A notifier's panic failed its delivery only; the run recorded
		// everything, and is an engine failure all the same.
		return rep, fmt.Errorf("%w: %w", ErrEngine, p)
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("%w: interrupted: %w", ErrEngine, context.Cause(ctx))
	}
	if rctx.Err() != nil {
		return rep, fmt.Errorf("%w: run deadline exceeded", ErrEngine)
	}
	return rep, nil
}

// open reads what the run starts from: the notifiers, the guard chain, the
// ledger and the previous snapshot. Only a store that cannot be read fails
// it; a corrupt ledger is moved aside and the run repairs nothing.
func (r *run) open() error {
	c, rep, now := r.c, r.rep, r.e.opts.Clock.Now()
	r.notifiers = r.buildNotifiers()
	r.chain = guard.NewChain(c.Guards, c.Schedule, r.e.opts.Clock)
	var err error
	r.ledger, err = r.st.ReadLedger(c.Name)
	if errors.Is(err, store.ErrUnavailable) {
		r.unshared = err.Error()
		r.noRepair = "nothing can be recorded: " + err.Error()
		r.ledger = store.NewLedger(c.Name)
		r.stages = expandStages(c)
		r.state = map[string]any{}
		return nil
	}
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return err
		}
		// Guards are never silently reset to zero: this run repairs nothing
		// and says why, loudly.
		r.noRepair, r.noRepairBy = "ledger was corrupt and moved aside: "+err.Error(), "ledger"
		rep.Errors = append(rep.Errors, r.noRepair)
		r.ledger = store.NewLedger(c.Name)
		r.queue(notify.Message{Contract: c.Name, Kind: notify.KindEscalate, Severity: "critical",
			Text: "state ledger was corrupt and has been moved aside; this run repairs nothing, and the last repair is taken from the snapshot so the debounce still holds: " + err.Error()},
			&AlertReport{Key: guard.IncidentKey(c.Name, guard.AllUnits, "ledger"), Agent: guard.AllUnits, Condition: "ledger corrupt", Kind: notify.KindEscalate, Severity: "critical"})
	}
	for agent, w := range r.ledger.Maintenance {
		if w.Active(now) {
			if rep.Maintenance == nil {
				rep.Maintenance = map[string]*guard.Window{}
			}
			rep.Maintenance[agent] = w
		}
	}
	if !r.e.opts.DryRun {
		r.recordStopped(now)
		// From this run's first write-ahead record on, the ledger names
		// it until its history record is written.
		r.ledger.Run = &store.RunMark{RunID: rep.RunID, StartedAt: rep.StartedAt}
	}
	r.recoverLedger()
	prev, _, err := r.st.ReadSnapshot(c.Name)
	if err != nil {
		// A snapshot is rebuilt by this run; a corrupt one is moved aside
		// and said so, never dropped in silence.
		rep.Errors = append(rep.Errors, "snapshot: "+err.Error())
		r.event(slog.LevelError, "snapshot unreadable", "error", err)
	}
	r.stages = expandStages(c)
	if r.noRepair != "" {
		r.seedFromSnapshot(prev)
	}
	r.state = prev
	if r.state == nil {
		r.state = map[string]any{}
	}
	return nil
}

// fail ends a run that the engine could not finish. The error wraps
// ErrEngine and err, so a caller can tell store.ErrFenced (this instance
// lost the contract to another) from other failures.
func (e *Engine) fail(rep *Report, err error) (*Report, error) {
	rep.Errors = append(rep.Errors, err.Error())
	rep.FinishedAt = e.opts.Clock.Now()
	return rep, fmt.Errorf("%w: %w", ErrEngine, err)
}

// reportOnly ends a run whose state could not be reached: the probes and
// the severities are reported, nothing was repaired, no incident is decided
// and nothing is sent or written, and the run is not an engine failure.
func (r *run) reportOnly() (*Report, error) {
	rep := r.rep
	line := "no repairs and no alerts this run, state is not shared: " + r.unshared
	rep.Errors = append(rep.Errors, line)
	r.event(slog.LevelWarn, "no repairs and no alerts this run, state is not shared", "error", r.unshared)
	rep.OverallSeverity = r.overall()
	rep.FinishedAt = r.e.opts.Clock.Now()
	rep.DurationMS = rep.FinishedAt.Sub(rep.StartedAt).Milliseconds()
	return rep, nil
}

// restarts is the expression function restarts(agent, window): repairs
// the ledger recorded for agent within window (e.g. "1h"); 0 for a window
// that does not parse.
func (r *run) restarts(agent, window string) int {
	d, err := contracts.ParseDuration(window)
	if err != nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.ledger.Units[agent]
	if !ok || u == nil {
		return 0
	}
	// Counted as the crash-loop guard counts: the repairs contractd made or
	// the increase of a restart counter read from the target (pm2
	// `restarts`), whichever is larger.
	n, _ := guard.CrashLoop{Per: d, Clock: r.e.opts.Clock}.Count(u)
	return n
}
