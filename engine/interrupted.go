package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
)

// A run that does not reach its end still leaves state that agrees with
// itself. Three ways it can stop early:
//
//   - its context is cancelled (SIGTERM, SIGINT, a daemon that stops): the
//     run cancels what is in flight, then records as usual; its history
//     record says why in `interrupted`.
//   - it panics (a bug): the panic is recovered, logged with its stack, and
//     is the run's engine failure (PanicError); the history gets the run as
//     far as it went, `interrupted` naming the panic.
//   - its process dies (kill -9, the host goes down): the ledger's run mark
//     (RunMark), written with the run's first write-ahead record and
//     cleared by its last write, after its history record, outlives it. The
//     next holder of the run lock — the next run, or `contractd status`,
//     `history` or `why` — writes that run's history record from what the
//     ledger holds (recordStopped), so history, status and the ledger agree.

// PanicError is a panic recovered during a run: a bug in contractd (or in a
// notifier it calls), never the agents' doing. The run that hit it ends as
// an engine failure (errors.Is(err, ErrEngine)); the process goes on.
type PanicError struct {
	Where string // what panicked: "run (repair)", "stage pi", "notifier pages"
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack

	logged bool // its stack is in the log already
}

func (p *PanicError) Error() string { return fmt.Sprintf("engine panic in %s: %v", p.Where, p.Value) }

// asPanic returns v (a recovered value) as a PanicError, keeping one a
// goroutine of the run recovered first.
func asPanic(where string, v any) *PanicError {
	if p, ok := v.(*PanicError); ok {
		return p
	}
	return &PanicError{Where: where, Value: v, Stack: debug.Stack()}
}

// catch is deferred at the top of every goroutine a run starts: a panic
// there is kept (the first one) for rethrow, and the goroutine ends.
func (r *run) catch(where string) {
	if v := recover(); v != nil {
		r.panicked.CompareAndSwap(nil, asPanic(where, v))
	}
}

// rethrow panics in the run's own goroutine with what a goroutine of the
// run recovered, once they have all ended: the run then aborts as if it
// had panicked itself.
func (r *run) rethrow() {
	if p := r.panicked.Load(); p != nil {
		panic(p)
	}
}

// notePanic keeps a panic that was already turned into an ordinary failure
// (a notifier's, which fails that delivery only): the run still records
// everything and then returns it as its engine failure.
func (r *run) notePanic(p *PanicError) {
	r.panicked.CompareAndSwap(nil, p)
	r.logPanic(p)
}

// logPanic logs p and its stack, once.
func (r *run) logPanic(p *PanicError) {
	if p.logged {
		return
	}
	p.logged = true
	// The stack is a field of the one record: escaped onto its line, as
	// every record is one line.
	r.event(slog.LevelError, "panic (recovered: this run is an engine failure)", "error", p.Error(), "stack", string(p.Stack))
}

// abort ends a run that panicked. The panic is logged with its stack and is
// the run's engine failure. The history gets the run's record as far as it
// went, `interrupted` naming the panic; the ledger stays as the run last
// wrote it ahead (its intents, incidents and messages), since the guards'
// state in memory may be half changed. Its run mark, if written, names a
// run the history now has, and the next run clears it.
func (r *run) abort(p *PanicError) (*Report, error) {
	rep := r.rep
	if r.saying != nil {
		r.add(*r.saying) // what the phase that panicked had done
	}
	r.logPanic(p)
	rep.OverallSeverity = contracts.SeverityUnknown
	rep.FinishedAt = r.e.opts.Clock.Now()
	rep.DurationMS = rep.FinishedAt.Sub(rep.StartedAt).Milliseconds()
	rep.Errors = append(rep.Errors, r.clean(p.Error()))
	if !r.e.opts.DryRun && r.unshared == "" && r.unwritable == "" {
		if err := r.recordAborted(p); err != nil {
			rep.Errors = append(rep.Errors, "history: "+err.Error())
			r.event(slog.LevelError, "the history record of the run that panicked not written", "error", err)
		}
	}
	return rep, fmt.Errorf("%w: %w", ErrEngine, p)
}

// recordAborted appends the record of a run that panicked. A second panic
// (in the store) is an error, not a crash.
func (r *run) recordAborted(p *PanicError) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic while recording it: %v", v)
		}
	}()
	h := historyRecord(r.rep)
	h.Interrupted = r.clean(p.Error())
	if err := r.st.AppendHistory(r.c.Name, h); err != nil && !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	return nil
}

// interruptedBy is why a run whose context ended did not finish: the
// context's cause (the signal, the daemon's shutdown) or its error.
func interruptedBy(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return ctx.Err().Error()
}

// historyLookback is how many of the newest history records are searched
// for a stopped run's id. Every run that records its end clears the mark,
// so the stopped run, when recorded, is among the last few.
const historyLookback = 20

// stoppedReason is the `interrupted` of a record rebuilt from the ledger.
const stoppedReason = "the run did not record its end (contractd was killed or stopped during it, or could not write its history)"

// recordStopped writes the history record of the run the ledger's mark
// names, when the history does not have it: that run was stopped before
// its end. by says who writes it, for the record. It returns the record it
// wrote, or nil when there was none to write; it fails when the history
// cannot be read or written. The caller holds the contract's run lock and
// clears the mark in its next ledger write.
func recordStopped(st store.Backend, name string, l *Ledger, now time.Time, by string) (*HistoryRecord, error) {
	m := l.Run
	if m == nil {
		return nil, nil
	}
	raw, err := st.History(name, historyLookback)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return nil, fmt.Errorf("history of %s: %w", name, err)
	}
	for _, h := range raw {
		if h.RunID == m.RunID {
			return nil, nil // recorded, and stopped before it cleared the mark
		}
	}
	h := stoppedRecord(l, now, by)
	if err := st.AppendHistory(name, h); err != nil && !errors.Is(err, store.ErrCorrupt) {
		return nil, fmt.Errorf("history of %s: %w", name, err)
	}
	return &h, nil
}

// stoppedRecord is the history record of the run l.Run names, from what
// the ledger holds of it: the repairs it started (its intents) and the
// messages it decided. Its severity is unknown: the run never finished
// judging what it saw.
func stoppedRecord(l *Ledger, now time.Time, by string) HistoryRecord {
	m := l.Run
	h := HistoryRecord{
		RunID: m.RunID, StartedAt: m.StartedAt, OverallSeverity: contracts.SeverityUnknown.String(),
		Agents: map[string]string{}, Interrupted: stoppedReason,
		Errors: []string{fmt.Sprintf("interrupted: %s; this record was written at %s by %s from what the ledger holds",
			stoppedReason, now.UTC().Format(time.RFC3339), by)},
	}
	for _, in := range l.Intents {
		if in.RunID != m.RunID {
			continue
		}
		ar := &ActionReport{Agent: in.Unit, Condition: in.Condition, Kind: KindRepair, Action: in.Command}
		started := in.Started.UTC().Format(time.RFC3339)
		switch {
		case !in.Done():
			ar.Status = ActionInterrupted
			ar.Reason = "started at " + started + " and never recorded as ended: counted as a repair; the next run verifies it, never runs it again inside the guards"
		default:
			code := in.ExitCode
			ar.ExitCode = &code
			ar.Status = ActionRan
			if code != 0 {
				ar.Status = ActionFailed
			}
			ar.Reason = fmt.Sprintf("started at %s, exit code %d at %s; not verified: the run stopped first", started, code, in.Ended.UTC().Format(time.RFC3339))
		}
		h.Actions = append(h.Actions, ar)
	}
	pending := map[notify.Message]bool{}
	for _, msg := range l.Sending {
		pending[msg] = true
	}
	for _, msg := range m.Messages {
		ar := &AlertReport{Key: guard.IncidentKey(msg.Contract, msg.Agent, msg.Condition), Agent: msg.Agent, Condition: msg.Condition,
			Kind: msg.Kind, Severity: msg.Severity, Text: msg.Text, Time: msg.Time, Routes: []RouteDelivery{}}
		if pending[msg] {
			ar.Error = "not handed to the routes: the run stopped first; the next run queues it for every route"
		} else {
			ar.Error = "handed to the routes; what each did was not recorded (a route that failed keeps it in the outbox)"
		}
		h.Alerts = append(h.Alerts, ar)
	}
	return h
}

// ErrRunning is wrapped by RecordStopped when a run holds the contract's
// lock: the run the ledger names is still going and records its own end.
var ErrRunning = errors.New("a run is in progress")

// RecordStopped settles a contract's state before it is read (`contractd
// status`, `history`, `why`, a daemon loading the contract): when the
// ledger names a run that wrote ahead and never recorded its end, and no
// run holds the contract's lock, it writes that run's history record from
// the ledger (interrupted) and clears the mark, so the history and the
// ledger agree. It returns the record it wrote, nil when there was none to
// write. It fails with an error wrapping ErrRunning when a run holds the
// lock (that run records its own end), and with the store's error when the
// ledger, the history or the lock cannot be read or written.
func RecordStopped(ctx context.Context, s store.Backend, name string, now time.Time) (*HistoryRecord, error) {
	l, err := ReadLedger(s, name)
	if err != nil || l.Run == nil {
		return nil, nil // a ledger that cannot be read is reported by whoever reads it next
	}
	unlock, err := s.Lock(ctx, name, 0)
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("%s: %w (run %s, started %s)", name, ErrRunning, l.Run.RunID, l.Run.StartedAt.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	if l, err = ReadLedger(s, name); err != nil || l.Run == nil {
		return nil, err // the run ended meanwhile
	}
	h, err := recordStopped(s, name, l, now, "a reader of the state")
	if err != nil {
		return nil, err
	}
	l.Run = nil
	if err := WriteLedger(s, name, l); err != nil {
		return h, fmt.Errorf("ledger of %s: %w", name, err)
	}
	return h, nil
}
