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

// run is one Run of one contract: what every phase of it reads, and the
// one piece of state they share. Its phases are listed in do.
//
// Expressions see environments built by env (env.go) only; every timeout
// comes from deadline.go.
type run struct {
	// Set by Run and open; no phase changes them.
	ctx       context.Context // the run's, for its log records (event); phases take their own
	e         *Engine
	c         *contracts.Contract
	rep       *Report // filled by do from what the phases return
	st        store.Backend
	log       *slog.Logger // with the contract and run_id; see event
	chain     *guard.Chain
	secrets   map[string]string // the contract's secrets that are set
	redact    []string          // their values, removed from everything kept
	state     map[string]any    // the previous snapshot, `state` in expressions
	notifiers []notify.Notifier
	// fleet is the contracts that run beside this one (WithFleet): who
	// watches which target, who depends on what. Nil for a contract run
	// alone.
	fleet     *Fleet
	recurring guard.Recurring // the contract's own maintenance windows
	logRoute  bool            // a log route writes every message to the engine's log
	noRepair  string          // non-empty: repairs are off for this run, and why
	// noRepairBy is the guard the report names for noRepair.
	noRepairBy string
	// unshared is set when the shared state cannot be reached (etcd
	// without quorum): the run probes and reports, and records nothing,
	// so it repairs nothing and sends nothing.
	unshared string
	// unwritable is set when the state directory cannot be written
	// (read-only, full): the run probes and reports, repairs nothing,
	// and records and sends nothing; the daemon tells the routes once.
	unwritable string

	// gateValues are the gates' steps by id, seen by every expression
	// after them: probe fills it from the gates, one at a time, before any
	// other stage starts; from then on it is only read.
	gateValues map[string]any

	// ledger is the contract's guard state, incidents and outbox, read by
	// open and changed by the phases in turn: repair and deliver write it
	// ahead, record writes it last.
	ledger *Ledger
	// mu guards the units' guard state in the ledger (ledger.Units) while
	// verify's goroutines run, one per repaired unit: each records its
	// repairs' outcomes (verify.go) while another's probe may read any
	// unit's repairs through restarts() (below). Every other phase runs in
	// the run's own goroutine, or its goroutines do not touch the ledger,
	// and takes no lock.
	mu sync.Mutex

	phase       string                     // the phase under way, for a panic's report
	saying      *said                      // what it has said so far, for the record of a run that panics in it (abort)
	panicked    atomic.Pointer[PanicError] // the first panic a goroutine of the run recovered
	interrupted string                     // why the run stopped early (its context ended), for its record
}

// said is what a phase says besides its own results, in the order it met
// it: errors, action and alert decisions for the report, and messages for
// deliver. do adds each phase's to the report when the phase returns.
type said struct {
	errors   []string
	actions  []*ActionReport
	alerts   []*AlertReport
	outgoing []outgoing // queued messages, to deliver
}

func (s *said) error(line string) { s.errors = append(s.errors, line) }

// enter marks the phase under way and what it says so far (nil: it says
// nothing), so that a run that panics in it records it as far as it went.
func (r *run) enter(phase string, s *said) { r.phase, r.saying = phase, s }

// add puts what a phase said into the report, after what the phases
// before it said. Its outgoing messages are the caller's to deliver.
func (r *run) add(s said) {
	r.saying = nil
	r.rep.Errors = append(r.rep.Errors, s.errors...)
	r.rep.Actions = append(r.rep.Actions, s.actions...)
	r.rep.Alerts = append(r.rep.Alerts, s.alerts...)
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
		Actions: []*ActionReport{}, Alerts: []*AlertReport{}, RequestedBy: Requester(ctx),
	}
	log := e.opts.Log.With("contract", transports.Printable(c.Name), "run_id", rep.RunID)
	if rep.RequestedBy != "" {
		log = log.With("requested_by", transports.Printable(rep.RequestedBy))
	}
	// Deferred first, so it runs last: the run's end as it was returned.
	defer func() { logEnd(ctx, log, rep, err) }()
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
	// A state that cannot be written cannot keep the exactly-once promise
	// (no write-ahead intent, no record): the run then probes and
	// reports, repairs nothing and writes nothing (see reportOnly).
	var unwritable error
	if wc, ok := st.(store.WriteChecker); ok {
		if err := wc.CheckWritable(); errors.Is(err, store.ErrUnwritable) {
			unwritable = err
		}
	}
	unlock, err := st.Lock(ctx, c.Name, e.opts.LockWait)
	if errors.Is(err, store.ErrLocked) {
		rep.Skipped = "another run holds the lock"
		rep.FinishedAt = e.opts.Clock.Now()
		return rep, nil
	}
	if errors.Is(err, store.ErrUnwritable) {
		// No lock file can be made. Two such runs at once are harmless:
		// neither repairs nor writes anything.
		if unwritable == nil {
			unwritable = err
		}
		unlock, err = func() {}, nil
	}
	if err != nil {
		return e.fail(rep, err)
	}
	defer unlock()

	r := &run{ctx: ctx, e: e, c: c, rep: rep, st: st, log: log, secrets: e.secrets(c), gateValues: map[string]any{}, phase: "open",
		fleet: fleetOf(ctx), recurring: guard.Recurring{Windows: c.Maintenance, Clock: e.opts.Clock}}
	if unwritable != nil {
		var ue *store.UnwritableError
		rep.StateUnwritable = unwritable.Error()
		if errors.As(unwritable, &ue) {
			rep.StateUnwritable = ue.Error()
		}
		r.unwritable = rep.StateUnwritable
	}
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

// do is the run once it holds the lock: open (below), then its phases in
// order, each in a file of its own, each taking what the one before it
// produced and returning what it produced:
//
//	probe   (probe.go)   the contract's stages → what each step saw, judged by the health tables; the gates' verdict
//	judge   (judge.go)   stages → units, their severities settled by hysteresis
//	depend  (depend.go)  units → those a failing dependency suppresses; the targets found down
//	repair  (repair.go)  units → action rows through the guard chain; repairs run, incidents raised
//	verify  (verify.go)  repairs → their units probed again; each repair's outcome, the units' final severities
//	alert   (alert.go)   units, incidents raised → incidents opened, reminded, resolved; messages
//	deliver (deliver.go) messages → the routes, the outbox retried; what each route did
//	record  (record.go)  → the report's end; the run log, snapshot, history and ledger written
//
// Each phase marks itself under way (enter), for a panic's report. What a phase says
// (errors, actions, alerts) goes into the report here, after what the
// phases before it said.
func (r *run) do(ctx context.Context) (*Report, error) {
	e, rep := r.e, r.rep
	opened, err := r.open()
	r.add(opened)
	if err != nil {
		return e.fail(rep, err)
	}
	if e.opts.CheckOnly != "" && r.noRepair == "" {
		r.noRepair, r.noRepairBy = e.opts.CheckOnly, "check-only"
	}
	rctx, cancel := context.WithTimeout(ctx, e.opts.RunTimeout)
	defer cancel()

	seen := r.probe(rctx, expandStages(r.c))
	rep.Stages, rep.GateOK = seen.reports(), seen.gateOK
	units, judged := r.judge(seen.stages)
	r.add(judged)
	down, depended := r.depend(rctx, units)
	r.add(depended)
	repaired := r.repair(rctx, units)
	r.add(repaired.said)
	r.verify(rctx, repaired.jobs).settle()
	rep.Agents = agentReports(units)
	if r.unshared != "" || r.unwritable != "" {
		return r.reportOnly(units) // nothing can be recorded: no alerts, nothing sent or written
	}
	alerted := r.alert(seen, units, repaired.raised, down)
	r.add(alerted)
	delivered, unrecorded := r.deliver(ctx, append(opened.outgoing, alerted.outgoing...))
	r.add(delivered)
	return r.record(ctx, rctx, seen, units, unrecorded)
}

// open reads what the run starts from: the notifiers, the guard chain, the
// ledger and the previous snapshot. Only a store that cannot be read fails
// it; a corrupt ledger is moved aside and the run repairs nothing. What it
// says: a route that cannot be built, the corrupt ledger (and the message
// that escalates it), a stopped run it could not record, an unreadable
// snapshot.
func (r *run) open() (said, error) {
	var s said
	r.enter("open", &s)
	c, rep, now := r.c, r.rep, r.e.opts.Clock.Now()
	r.notifiers = r.buildNotifiers(&s)
	r.chain = guard.NewChain(c.Guards, c.Schedule, r.e.opts.Clock)
	var err error
	r.ledger, err = ReadLedger(r.st, c.Name)
	if r.unwritable != "" {
		// Read what can be read (hysteresis, maintenance windows); a
		// ledger that cannot be is not an engine failure here: nothing
		// will be decided from it.
		r.noRepair, r.noRepairBy = r.unwritable, "state"
		if err != nil {
			r.ledger = NewLedger(c.Name)
		}
		r.state, _, _ = r.st.ReadSnapshot(c.Name)
		if r.state == nil {
			r.state = map[string]any{}
		}
		return s, nil
	}
	if errors.Is(err, store.ErrUnavailable) {
		r.unshared = err.Error()
		r.noRepair = "nothing can be recorded: " + err.Error()
		r.ledger = NewLedger(c.Name)
		r.state = map[string]any{}
		return s, nil
	}
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return s, err
		}
		// Guards are never silently reset to zero: this run repairs nothing
		// and says why, loudly.
		r.noRepair, r.noRepairBy = "ledger was corrupt and moved aside: "+err.Error(), "ledger"
		s.error(r.noRepair)
		r.ledger = NewLedger(c.Name)
		r.queue(&s, notify.Message{Contract: c.Name, Kind: notify.KindEscalate, Severity: "critical",
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
	rep.Maintenance = AddDeclaredWindows(rep.Maintenance, r.c, now)
	if !r.e.opts.DryRun {
		r.recordStopped(now, &s)
		// From this run's first write-ahead record on, the ledger names
		// it until its history record is written.
		r.ledger.Run = &RunMark{RunID: rep.RunID, StartedAt: rep.StartedAt}
	}
	r.recoverLedger()
	prev, _, err := r.st.ReadSnapshot(c.Name)
	if err != nil {
		// A snapshot is rebuilt by this run; a corrupt one is moved aside
		// and said so, never dropped in silence.
		s.error("snapshot: " + err.Error())
		r.event(slog.LevelError, "snapshot unreadable", "error", err)
	}
	if r.noRepair != "" {
		r.seedFromSnapshot(prev)
	}
	r.state = prev
	if r.state == nil {
		r.state = map[string]any{}
	}
	return s, nil
}

// fail ends a run that the engine could not finish. The error wraps
// ErrEngine and err, so a caller can tell store.ErrFenced (this instance
// lost the contract to another) from other failures.
func (e *Engine) fail(rep *Report, err error) (*Report, error) {
	rep.Errors = append(rep.Errors, err.Error())
	rep.FinishedAt = e.opts.Clock.Now()
	return rep, fmt.Errorf("%w: %w", ErrEngine, err)
}

// reportOnly ends a run whose state could not be reached or written: the
// probes and the severities are reported, nothing was repaired, no
// incident is decided and nothing is sent or written, and the run is not
// an engine failure (Report.StateUnwritable says why, for the caller).
func (r *run) reportOnly(units []*unit) (*Report, error) {
	rep := r.rep
	if r.unwritable != "" {
		rep.Errors = append(rep.Errors, "no repairs, no alerts and nothing recorded this run: "+r.unwritable)
		r.event(slog.LevelError, "no repairs, no alerts and nothing recorded this run: the state cannot be written", "error", r.unwritable)
	} else {
		line := "no repairs and no alerts this run, state is not shared: " + r.unshared
		rep.Errors = append(rep.Errors, line)
		r.event(slog.LevelWarn, "no repairs and no alerts this run, state is not shared", "error", r.unshared)
	}
	rep.OverallSeverity = overall(units)
	rep.FinishedAt = r.e.opts.Clock.Now()
	rep.DurationMS = rep.FinishedAt.Sub(rep.StartedAt).Milliseconds()
	return rep, nil
}

// window is the maintenance window covering unit now: an operator's (the
// ledger's, its own or the whole contract's) or one the contract declares,
// whichever ends later; nil when none.
func (r *run) window(unit string) *guard.Window {
	return guard.Later(r.ledger.Window(unit, r.e.opts.Clock.Now()), r.recurring.Active(unit))
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
