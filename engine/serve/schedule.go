package serve

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
)

// entry is one loaded contract and its schedule. Its loop goroutine owns the
// timing; runs happen in their own goroutines so a long run never stalls the
// loop, and a tick that finds a run still going is recorded as an overlap.
type entry struct {
	name string
	path string

	mu       sync.Mutex
	c        *contracts.Contract // the last good version
	rejected []string            // diagnostics of an edit that failed lint
	state    SchedulerState
	running  bool
	runStart time.Time
	trigger  string
	last     *engine.Report
	next     time.Time
	phase    time.Duration
	// why, when set, is why the next run was brought forward (a
	// dependency changed): its trigger. again is the same for a run that
	// was going then: the one after it comes at once.
	why, again string

	// resendEvery is how often the contract's open incidents are posted
	// again between runs (its alertmanager routes' resend; 0 for none),
	// resendAt when next, resending while a resend is going and
	// resendDone closed when it has ended: a run that falls due meanwhile
	// waits for it, so the two never go side by side.
	resendEvery time.Duration
	resendAt    time.Time
	resending   bool
	resendDone  chan struct{}

	// busySince is when the loop started its current tick (UnixNano), 0
	// while it waits; /healthz and the watchdog read it without locks.
	busySince atomic.Int64

	wake chan struct{} // cap 1: recompute the wait
	stop chan struct{} // closed when the contract is removed
	done chan struct{} // closed when the loop has returned
}

func every(c *contracts.Contract) time.Duration {
	if c.Schedule.Every > 0 {
		return c.Schedule.Every
	}
	return DefaultEvery
}

func (e *entry) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// newEntry builds a contract's schedule from its persisted state: a held
// contract stays held, a failure streak keeps its backoff, on_start runs at
// the random phase, and otherwise the cadence of the last run carries on (a
// contract that never ran waits one interval after its phase), so a daemon
// that restarts often still runs every contract on time.
func (d *Daemon) newEntry(c *contracts.Contract, path, name string) *entry {
	e := &entry{
		name: name, path: path, c: c,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	st, err := ReadState(d.cfg.StateDir, name)
	if err != nil {
		d.log.Error("scheduler state unreadable", "contract", name, "error", err)
	}
	e.state = st
	now := d.clock.Now()
	iv := every(c)
	e.phase = Stagger{Max: d.cfg.Stagger}.Phase(iv)
	switch {
	case st.ConsecutiveFailed > 0 && st.NextRunAt.After(now):
		e.next = st.NextRunAt
	case c.Schedule.OnStart:
		e.next = now.Add(e.phase)
	case !st.LastStartedAt.IsZero():
		e.next = st.LastStartedAt.Add(iv)
		if soonest := now.Add(e.phase); e.next.Before(soonest) {
			e.next = soonest
		}
	default:
		e.next = now.Add(e.phase + iv)
	}
	e.next = d.afterStartDelay(c, e.next, e.phase)
	d.planResend(e, now)
	return e
}

// afterStartDelay holds a run planned for next back until the contract's
// schedule.start_delay has passed since the daemon started (seed 000's
// OnBootSec): the first run, on_start included, comes no earlier, at its
// phase after the delay. A contract loaded long after the start is not
// delayed; on-demand runs never are.
func (d *Daemon) afterStartDelay(c *contracts.Contract, next time.Time, phase time.Duration) time.Time {
	if c.Schedule.StartDelay <= 0 {
		return next
	}
	if floor := d.started.Add(c.Schedule.StartDelay); next.Before(floor) {
		return floor.Add(phase)
	}
	return next
}

// loop waits for the next tick, or polls for a Reset while held down, until
// the daemon stops or the contract is removed.
func (d *Daemon) loop(ctx context.Context, e *entry) {
	defer close(e.done)
	for {
		e.mu.Lock()
		held, next, resendAt := e.state.HeldDown, e.next, e.resendAt
		e.mu.Unlock()
		var wait time.Duration
		if held {
			wait = d.cfg.HeldPoll
		} else {
			wait = max(0, next.Sub(d.clock.Now()))
		}
		if !resendAt.IsZero() {
			wait = min(wait, max(0, resendAt.Sub(d.clock.Now())))
		}
		select {
		case <-ctx.Done():
			return
		case <-e.stop:
			return
		case <-e.wake:
			continue
		case <-d.clock.After(wait):
		}
		e.busySince.Store(d.clock.Now().UnixNano())
		ok := d.protect(e.name, "the scheduler", func() {
			d.resendDue(e)
			if held {
				d.syncReset(e)
			} else {
				d.tick(e)
			}
		})
		e.busySince.Store(0)
		if !ok {
			// A tick that panicked tries again after a pause, not at once.
			select {
			case <-ctx.Done():
				return
			case <-e.stop:
				return
			case <-d.clock.After(d.cfg.HeldPoll):
			}
		}
	}
}

// protect runs f, one piece of the daemon's work on contract-derived input
// (where says which; contract names the contract, "" before one is known):
// a panic in it (a bug that input reached) is logged with its stack,
// counted in contractd_run_panics_total when the contract is known, and
// ends that piece of work, never the daemon. It reports whether f returned.
func (d *Daemon) protect(contract, where string, f func()) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			args := []any{"where", where, "error", fmt.Sprint(v), "stack", string(debug.Stack())}
			if contract != "" {
				args = append([]any{"contract", contract}, args...)
				d.metrics.panics.WithLabelValues(contract).Inc()
			}
			d.log.Error("panic (recovered; the daemon and the other contracts go on)", args...)
			ok = false
		}
	}()
	f()
	return true
}

// syncReset applies a ReleaseHoldDown made by another process (or the HTTP API) since
// the daemon last looked. It reports whether it released anything.
func (d *Daemon) syncReset(e *entry) bool {
	st, err := ReadState(d.cfg.StateDir, e.name)
	if err != nil {
		d.log.Error("scheduler state unreadable", "contract", e.name, "error", err)
		return false
	}
	if d.cfg.HA != nil {
		// A reset made on any host (`contractd reset --etcd`, another
		// instance's API) is in the shared ledger.
		if l, err := engine.ReadLedger(d.view, e.name); err == nil && l.ReleasedAt.After(st.ResetAt) {
			st.ResetAt = l.ReleasedAt
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return d.applyResetLocked(e, st)
}

func (d *Daemon) applyResetLocked(e *entry, onDisk SchedulerState) bool {
	if !onDisk.ResetAt.After(e.state.ResetAt) {
		return false
	}
	wasHeld := e.state.HeldDown
	e.state.ResetAt = onDisk.ResetAt
	guard.Release(&e.state.Scheduler)
	e.next = d.clock.Now()
	d.metrics.setHeld(e.name, false)
	if wasHeld {
		d.log.Info("hold-down released by reset; running now", "contract", e.name)
	} else {
		d.log.Info("failure streak reset", "contract", e.name)
	}
	return true
}

// tick is one scheduled moment: start a run, or record an overlap. With
// HA, a contract another instance owns only keeps its cadence.
func (d *Daemon) tick(e *entry) {
	d.syncReset(e)
	mode := d.mode(e.name)
	now := d.clock.Now()
	e.mu.Lock()
	if e.state.HeldDown || now.Before(e.next) {
		e.mu.Unlock()
		return
	}
	iv := every(e.c)
	// Keep the cadence anchored to the schedule, not to when runs end.
	e.next = e.next.Add(iv)
	if !e.next.After(now) {
		e.next = now.Add(iv)
	}
	if mode == Standby {
		e.mu.Unlock()
		return
	}
	if e.running {
		e.state.SkippedOverlap++
		e.state.LastResult = ResultSkippedOverlap
		started := e.runStart
		e.mu.Unlock()
		d.metrics.record(e.name, ResultSkippedOverlap, 0, nil, d.clock.Now())
		d.log.Warn("skipped_overlap: the last run is still going", "contract", e.name, "running_for", now.Sub(started).Round(time.Millisecond))
		d.save(e)
		return
	}
	e.running, e.runStart, e.trigger = true, now, "schedule"
	if e.why != "" {
		e.trigger, e.why = e.why, ""
	}
	c, resend := e.c, e.resendGoing()
	e.mu.Unlock()
	d.runs.Add(1)
	go func() {
		defer d.runs.Done()
		<-resend
		d.protect(e.name, "a run", func() { d.execute(e, c, "") })
	}()
}

// resendGoing returns a channel closed when the entry's resend under way
// has ended (at once when none is); e.mu is held.
func (e *entry) resendGoing() <-chan struct{} {
	if e.resending && e.resendDone != nil {
		return e.resendDone
	}
	return closed
}

// closed is a channel that is always closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// RunNow runs a contract immediately and waits for its report, as
// POST /contracts/{name}/run does. It returns ErrUnknownContract,
// ErrStopping, or ErrOverlap (recorded as skipped_overlap) when the run could
// not start; otherwise the report and the Runner's error, if any.
func (d *Daemon) RunNow(name string) (*engine.Report, error) {
	return d.RunNowBy(name, "")
}

// RunNowBy is RunNow for a caller that names itself (an MCP client): the
// run's report, history record and log records say who asked for it
// (engine.WithRequester). by "" is RunNow.
func (d *Daemon) RunNowBy(name, by string) (*engine.Report, error) {
	if d.stopping.Load() {
		return nil, ErrStopping
	}
	d.mu.Lock()
	e := d.entries[name]
	d.mu.Unlock()
	if e == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownContract, name)
	}
	if d.mode(name) == Standby {
		return nil, fmt.Errorf("%s: %w %s", name, ErrNotOwner, d.owner(name))
	}
	now := d.clock.Now()
	e.mu.Lock()
	if e.running {
		e.state.SkippedOverlap++
		e.mu.Unlock()
		d.metrics.record(name, ResultSkippedOverlap, 0, nil, d.clock.Now())
		d.save(e)
		return nil, fmt.Errorf("%s: %w", name, ErrOverlap)
	}
	e.running, e.runStart, e.trigger = true, now, "on demand"
	if by != "" {
		e.trigger = "on demand by " + by
	}
	c, resend := e.c, e.resendGoing()
	e.mu.Unlock()
	d.runs.Add(1)
	defer d.runs.Done()
	<-resend
	return d.execute(e, c, by)
}

// execute runs c once under the run deadline and records the outcome; by
// names who asked for the run ("" for the schedule or the API).
func (d *Daemon) execute(e *entry, c *contracts.Contract, by string) (*engine.Report, error) {
	runCtx := engine.WithFleet(d.runCtx, d.fleet())
	if by != "" {
		runCtx = engine.WithRequester(runCtx, by)
	}
	ctx, cancel := context.WithTimeout(runCtx, d.cfg.RunTimeout)
	defer cancel()
	start := d.clock.Now()
	rep, err := d.safeRun(ctx, c)
	if p := (*engine.PanicError)(nil); errors.As(err, &p) {
		// Logged with its stack where it was recovered: by the engine, or
		// by safeRun.
		d.metrics.panics.WithLabelValues(e.name).Inc()
	}
	if err == nil && rep == nil {
		err = errors.New("engine returned no report")
	}
	if err == nil && ctx.Err() != nil && rep.Skipped == "" {
		// The engine returned normally but past its deadline: the run did
		// not finish its job.
		err = fmt.Errorf("run deadline %s exceeded: %w", d.cfg.RunTimeout, ctx.Err())
	}
	d.finish(e, start, rep, err)
	return rep, err
}

// safeRun turns a panic that escapes the Runner into a failed run (an
// *engine.PanicError): the daemon keeps serving the other contracts. The
// engine recovers its own runs' panics (its goroutines' too) and records
// them; this is the boundary for any other Runner.
func (d *Daemon) safeRun(ctx context.Context, c *contracts.Contract) (rep *engine.Report, err error) {
	defer func() {
		if v := recover(); v != nil {
			p := &engine.PanicError{Where: "the runner", Value: v, Stack: debug.Stack()}
			d.log.Error("panic (recovered; the daemon and the other contracts go on)", "contract", c.Name, "error", p.Error(), "stack", string(p.Stack))
			rep, err = nil, p
		}
	}()
	return d.cfg.Runner.Run(ctx, c)
}

// finish records a run: result, failure streak, backoff, hold-down, metrics,
// persisted state, and the one hold-down alert.
func (d *Daemon) finish(e *entry, start time.Time, rep *engine.Report, runErr error) {
	now := d.clock.Now()
	onDisk, rerr := ReadState(d.cfg.StateDir, e.name)
	if rerr != nil {
		d.log.Error("scheduler state unreadable", "contract", e.name, "error", rerr)
	}

	e.mu.Lock()
	d.applyResetLocked(e, onDisk)
	e.running = false
	trigger := e.trigger
	iv := every(e.c)
	result := ResultOK
	switch {
	case runErr != nil && d.runCtx.Err() != nil:
		// Cancelled by our own shutdown: not the engine's failure, so it
		// never counts toward backoff or hold-down.
		result = ResultCancelled
	case runErr != nil && d.cfg.HA != nil && (errors.Is(runErr, store.ErrFenced) || errors.Is(runErr, store.ErrUnavailable) || errors.Is(runErr, store.ErrConflict)):
		// Another instance took the contract over, etcd went away, or an
		// operator changed the ledger during the run: what could not be
		// recorded was not done, and it is not this contract's failure.
		result = ResultFenced
	case runErr != nil:
		result = ResultFailed
	case rep.Skipped != "":
		result = ResultSkippedOverlap
	}
	e.state.LastResult = result
	e.state.LastStartedAt = start
	e.state.LastDurationMS = now.Sub(start).Milliseconds()
	alert := false
	switch result {
	case ResultFailed:
		alert = guard.HoldDown{After: HoldDownAfter, Clock: d.clock}.Record(&e.state.Scheduler, runErr)
		// Back off from when this run started; never sooner than the
		// cadence already planned.
		if n := start.Add(backoff(iv, e.state.ConsecutiveFailed)); n.After(e.next) {
			e.next = n
		}
	case ResultSkippedOverlap:
		e.state.SkippedOverlap++
		e.state.LastRun = now
	case ResultCancelled, ResultFenced:
		e.state.LastRun = now
	default:
		guard.HoldDown{After: HoldDownAfter, Clock: d.clock}.Record(&e.state.Scheduler, nil)
		e.state.LastSeverity = rep.OverallSeverity
	}
	if rep != nil {
		e.last = rep
	}
	if e.again != "" && !e.state.HeldDown {
		// A dependency changed during the run: judged again at once.
		e.next, e.why, e.again = now, e.again, ""
	}
	e.state.NextRunAt = e.next
	if e.state.HeldDown {
		e.state.NextRunAt = time.Time{}
	}
	if !e.resendAt.IsZero() && result == ResultOK {
		// The run resent the open incidents at its end.
		e.resendAt = now.Add(e.resendEvery)
	}
	st, c := e.state, e.c
	e.mu.Unlock()

	d.metrics.record(e.name, result, now.Sub(start).Seconds(), rep, now)
	d.metrics.setHeld(e.name, st.HeldDown)
	if result == ResultOK {
		d.watchState(c, rep.StateUnwritable)
	}
	switch result {
	case ResultCancelled:
		d.log.Info("run cancelled at shutdown", "contract", e.name, "trigger", trigger, "error", runErr)
	case ResultFenced:
		d.log.Warn("run stopped, its writes refused", "contract", e.name, "trigger", trigger, "error", runErr)
		if errors.Is(runErr, store.ErrFenced) {
			d.cfg.HA.Fenced(e.name)
		}
	case ResultFailed:
		d.log.Error("run failed", "contract", e.name, "trigger", trigger, "failed_in_a_row", st.ConsecutiveFailed, "error", runErr)
	case ResultSkippedOverlap:
		d.log.Warn("skipped_overlap: "+rep.Skipped, "contract", e.name)
	}
	if alert {
		d.log.Error("held down after consecutive failed runs; `contractd reset "+e.name+"` releases it", "contract", e.name, "failed_in_a_row", st.ConsecutiveFailed)
	}
	d.save(e)
	if alert {
		d.holdDownAlert(e)
	}
	if result == ResultOK {
		d.judged(e.name)
		d.waits(e.name, rep)
	}
	e.poke()
}

// holdDownAlert sends the one alert of a hold-down; guard.HoldDown has
// already marked it sent, and that mark survives restarts. A failed
// delivery clears the mark again, so the daemon retries when it next starts.
func (d *Daemon) holdDownAlert(e *entry) {
	e.mu.Lock()
	if !e.state.HeldDown {
		e.mu.Unlock()
		return
	}
	text := fmt.Sprintf("held down after %d consecutive failed runs (last error: %s); scheduled runs are paused until `contractd reset %s`",
		e.state.ConsecutiveFailed, e.state.LastError, e.name)
	c := e.c
	e.mu.Unlock()

	ctx, cancel := context.WithTimeout(d.runCtx, 30*time.Second)
	err := d.notify(ctx, c, text)
	cancel()
	if err != nil {
		d.log.Error("hold-down alert not delivered (retried at next start)", "contract", e.name, "error", err)
		e.mu.Lock()
		e.state.Alerted = false
		e.mu.Unlock()
		d.save(e)
		return
	}
	d.metrics.alerts.WithLabelValues(e.name).Inc()
	d.save(e) // the sent mark, which a restart must see
}

// notify is Config.Notify with a panic in it (a route's bug) made a
// failed delivery: logged with its stack, counted, retried like any other.
func (d *Daemon) notify(ctx context.Context, c *contracts.Contract, text string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("panic in the hold-down alert (recovered)", "contract", c.Name, "error", fmt.Sprint(v), "stack", string(debug.Stack()))
			d.metrics.panics.WithLabelValues(c.Name).Inc()
			err = fmt.Errorf("hold-down alert panicked: %v", v)
		}
	}()
	return d.cfg.Notify(ctx, c, text)
}

// notifyRoutes is the default Notify: the hold-down alert goes to the
// contract's own notify routes as a "holddown" message. It succeeds when at
// least one route delivered it (the others are logged); without routes the
// alert is logged and counts as delivered.
func (d *Daemon) notifyRoutes(ctx context.Context, c *contracts.Contract, text string) error {
	ns, buildErrs := notify.NewAll(c.Notify, d.cfg.NotifyDeps)
	for _, err := range buildErrs {
		d.log.Error("hold-down alert: notify route cannot be built", "contract", c.Name, "error", err)
	}
	if len(ns) == 0 {
		d.log.Warn(text, "contract", c.Name, "kind", notify.KindHoldDown)
		return nil
	}
	msg := notify.Message{Contract: c.Name, Kind: notify.KindHoldDown, Severity: contracts.SeverityCritical.String(), Text: text, Time: d.clock.Now().UTC()}
	var errs []error
	for _, n := range ns {
		if err := notify.Deliver(ctx, n, msg); err != nil {
			d.metrics.failures.WithLabelValues(c.Name, n.Name()).Inc()
			errs = append(errs, fmt.Errorf("%s: %w", n.Name(), err))
			continue
		}
		d.metrics.delivered.WithLabelValues(c.Name, n.Name()).Inc()
	}
	if len(errs) == len(ns) {
		return errors.Join(errs...)
	}
	for _, err := range errs {
		d.log.Warn("hold-down alert not delivered", "contract", c.Name, "error", err)
	}
	return nil
}

// save writes the entry's state, first applying a Reset that landed on disk
// meanwhile; updateState's lock keeps a Reset from landing between the read
// and the write, so the daemon never overwrites an operator's release.
func (d *Daemon) save(e *entry) {
	if d.stateWatch.current() != nil {
		return // said once, by watchState; the next run that can write saves it
	}
	err := updateState(d.runCtx, d.cfg.StateDir, e.name, func(onDisk *SchedulerState) {
		e.mu.Lock()
		defer e.mu.Unlock()
		d.applyResetLocked(e, *onDisk)
		*onDisk = e.state
	})
	if err != nil {
		d.log.Error("scheduler state not written", "contract", e.name, "error", err)
	}
}
