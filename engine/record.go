package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/contractd/contractd/engine/store"
)

// record is the last phase: it ends the report (the units' overall
// severity, the duration, why the run stopped early), then, but in a dry
// run, writes the state (write). It returns the report, and the run's
// engine failure if there was one: the ledger deliver could not write
// (unrecorded), state write could not write, a notifier's panic, the run
// interrupted or past its deadline.
func (r *run) record(ctx, rctx context.Context, seen probed, units []*unit, unrecorded error) (*Report, error) {
	r.enter("record", nil)
	e, rep := r.e, r.rep
	rep.OverallSeverity = overall(units)
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
	if err := r.write(seen); err != nil {
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

// write writes what the run recorded: its lines in the contract's log:
// file, the Maintains snapshot (from the stages as probed and verified),
// its history record (the report), then the ledger, each written
// atomically. The history record comes before the ledger's last write,
// which clears the run's mark: a process stopped between the two leaves a
// mark the history already answers, never a ledger ahead of the history
// with nothing to say so.
func (r *run) write(seen probed) error {
	r.writeRunLog()
	snap := r.snapshot(seen, r.state)
	if err := r.st.WriteSnapshot(r.c.Name, snap); err != nil {
		return err
	}
	r.ledger.PruneWindows(r.e.opts.Clock.Now())
	r.tidyIntents()
	h := historyRecord(r.rep)
	h.Interrupted = r.interrupted
	h.Operator = r.ledger.Operator
	herr := r.st.AppendHistory(r.c.Name, h)
	if herr != nil && !errors.Is(herr, store.ErrCorrupt) {
		// The record is not written: the ledger keeps the run's mark, so
		// the next reader writes one from the ledger.
		if err := r.persist(); err != nil {
			return err
		}
		return herr
	}
	r.ledger.Run = nil
	r.ledger.Operator = nil // the history record has them now
	if err := r.persist(); err != nil {
		return err
	}
	return herr // bad lines of the old history, set aside (ErrCorrupt)
}

// tidyIntents drops the intents whose commands ended: the history keeps them.
func (r *run) tidyIntents() {
	kept := r.ledger.Intents[:0]
	for _, in := range r.ledger.Intents {
		if !in.Done() {
			kept = append(kept, in)
		}
	}
	r.ledger.Intents = kept
}
