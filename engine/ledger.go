package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/contractd/contractd/engine/notify"
)

// The write-ahead ledger. A repair is recorded before its command starts
// (its intent, and the repair itself for the debounce, budget and crash-loop
// guards) and again when it ends; a run's messages are recorded with their
// incidents before any route gets them. Each record is an atomic, fsynced
// ledger write, so a process killed at any point leaves a ledger that says
// at least as much as happened: never a repair the guards do not count,
// never an incident or a message the next run does not know about.

// persist writes the ledger now. It does nothing in a dry run.
func (r *run) persist() error {
	if r.e.opts.DryRun {
		return nil
	}
	if err := WriteLedger(r.st, r.c.Name, r.ledger); err != nil {
		return fmt.Errorf("state cannot be written: %w", err)
	}
	return nil
}

// intend records a repair before its command runs: the guards count it from
// now on, whatever happens to this process. It fails when the ledger cannot
// be written; then the repair must not run.
func (r *repairing) intend(u *unit, key, cmd, target string, grace time.Duration) (*Intent, error) {
	in := &Intent{RunID: r.rep.RunID, Unit: u.key, Condition: key, Command: cmd, Target: target, Started: r.e.opts.Clock.Now()}
	r.chain.RecordRepair(u.state, key, grace)
	r.ledger.Intents = append(r.ledger.Intents, in)
	return in, r.persist()
}

// ended records that a repair's command returned (exit code -1: its target
// was unreachable). A ledger that cannot be written now is an error of the
// phase and a log line: the repair is already counted.
func (r *repairing) ended(in *Intent, code int) {
	in.Ended, in.ExitCode = r.e.opts.Clock.Now(), code
	if err := r.persist(); err != nil {
		r.error("ledger after repair: " + err.Error())
		r.event(slog.LevelError, "ledger not written after repair", "agent", in.Unit, "error", err)
	}
}

// What open takes over from the runs before this one: a killed run's
// messages and repairs, a stopped run's record, a lost ledger's last
// repair.

// recoverLedger takes over what a run that was killed left in the ledger:
// messages it had decided but not handed to the routes are queued for every
// route, and repairs it started but never saw end are kept to be verified
// by this run (verifyInterrupted).
func (r *run) recoverLedger() {
	now := r.e.opts.Clock.Now()
	for _, m := range r.ledger.Sending {
		for _, n := range r.notifiers {
			r.ledger.Outbox.Queue = append(r.ledger.Outbox.Queue, notify.Queued{Notifier: n.Name(), Message: m, Since: now})
		}
		r.event(slog.LevelInfo, "a message a stopped run had not sent is queued", "kind", m.Kind, "agent", m.Agent, "text", m.Text)
	}
	r.ledger.Sending = nil
	kept := r.ledger.Intents[:0]
	for _, in := range r.ledger.Intents {
		if in.Done() {
			continue // ended, and the run that ran it was stopped before it tidied up
		}
		kept = append(kept, in)
	}
	r.ledger.Intents = kept
}

// recordStopped writes the history record of a run that wrote this ledger
// ahead and was stopped before its end (see interrupted.go), before this
// run takes the ledger over. A record that cannot be written is this run's
// error; the stopped run's effects are in the ledger all the same.
func (r *run) recordStopped(now time.Time, s *said) {
	stopped := r.ledger.Run
	h, err := recordStopped(r.st, r.c.Name, r.ledger, now, "run "+r.rep.RunID)
	switch {
	case err != nil:
		s.error(fmt.Sprintf("the record of run %s, stopped before its end: %v", stopped.RunID, err))
		r.event(slog.LevelError, "the record of a run stopped before its end not written", "stopped_run", stopped.RunID, "error", err)
	case h != nil:
		r.event(slog.LevelWarn, "a run was stopped before it recorded its end; its history record is written from the ledger",
			"stopped_run", h.RunID, "started", h.StartedAt.UTC().Format(time.RFC3339))
	}
}

// seedFromSnapshot rebuilds the one guard fact the snapshot may keep when
// the ledger was lost: the last repair (any key the Maintains rule fills
// with `last_repair`), recorded on every agent the snapshot names, so
// "never restart more than once per debounce window" holds across the
// loss. It over-counts rather than forgets.
func (r *run) seedFromSnapshot(snap map[string]any) {
	var last time.Time
	for _, k := range r.c.Maintains.KeysFilledBy("last_repair") {
		if s, ok := snap[k.Name].(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(last) {
				last = t
			}
		}
	}
	if last.IsZero() {
		return
	}
	agents, _ := snap["agents"].(map[string]any)
	for name := range agents {
		u := r.ledger.Unit(name)
		u.Repairs = append(u.Repairs, last)
	}
	for _, agent := range Agents(r.c) {
		u := r.ledger.Unit(agent)
		if len(u.Repairs) == 0 {
			u.Repairs = append(u.Repairs, last)
		}
	}
}
