package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
)

// stateVersion is the schema version of NAME.scheduler.json.
const stateVersion = 1

// Run results recorded in the scheduler state and in contractd_runs_total.
const (
	ResultOK             = "ok"              // the engine finished the run (sick agents included)
	ResultFailed         = "failed"          // the engine itself failed: error, deadline, panic
	ResultSkippedOverlap = "skipped_overlap" // the previous run was still going, or another process held the lock
	ResultCancelled      = "cancelled"       // the daemon stopped and cancelled the run past its shutdown grace
	ResultFenced         = "fenced"          // serve --etcd: the contract moved to another instance, etcd went away, or an operator changed the ledger, during the run
)

// SchedulerState is what the daemon keeps per contract across restarts, in
// STATE_DIR/NAME.scheduler.json: the failure streak that drives backoff, the
// hold-down, and a summary of the last run.
type SchedulerState struct {
	Version  int    `json:"version"`
	Contract string `json:"contract"`
	// Scheduler is the failure streak and the hold-down, kept by the
	// guard.HoldDown rule (its fields are inlined in the JSON).
	guard.Scheduler
	LastResult     string             `json:"last_result,omitempty"`
	LastStartedAt  time.Time          `json:"last_started_at,omitzero"`
	LastDurationMS int64              `json:"last_duration_ms,omitempty"`
	LastSeverity   contracts.Severity `json:"last_severity"`
	NextRunAt      time.Time          `json:"next_run_at,omitzero"`
	// ResetAt is stamped by ReleaseHoldDown; a running daemon that sees a newer
	// ResetAt than the one it knows applies the release.
	ResetAt        time.Time `json:"reset_at,omitzero"`
	SkippedOverlap int64     `json:"skipped_overlap"`
}

// StatePath returns the path of a contract's scheduler state file.
func StatePath(stateDir, name string) string {
	return filepath.Join(stateDir, name+".scheduler.json")
}

// ReadState reads a contract's scheduler state. A missing file is a fresh
// state and no error. A file that does not decode or validate (another
// version or contract, a negative count, an unknown result) is moved aside to
// NAME.scheduler.json.corrupt-TIMESTAMP and the error (wrapping
// ErrCorruptState) says where it went; the caller starts from a fresh state.
// Other read errors are returned wrapped.
func ReadState(stateDir, name string) (SchedulerState, error) {
	fresh := SchedulerState{Version: stateVersion, Contract: name}
	path := StatePath(stateDir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return fresh, fmt.Errorf("read scheduler state %s: %w", path, err)
	}
	var st SchedulerState
	if err := json.Unmarshal(b, &st); err != nil || st.validate(name) != nil {
		if err == nil {
			err = st.validate(name)
		}
		aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405.000000000"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return fresh, fmt.Errorf("scheduler state %s: %w: %v (and moving it aside failed: %v)", path, ErrCorruptState, err, rerr)
		}
		return fresh, fmt.Errorf("scheduler state %s: %w: %v; moved aside to %s", path, ErrCorruptState, err, aside)
	}
	st.Contract = name
	return st, nil
}

// validate checks a state read back for contract name: this build's
// version, the contract's own file, no negative count, a known result.
func (st *SchedulerState) validate(name string) error {
	switch {
	case st.Version != stateVersion:
		return fmt.Errorf("unknown version %d", st.Version)
	case st.Contract != "" && st.Contract != name:
		return fmt.Errorf("scheduler state of contract %q", st.Contract)
	case st.ConsecutiveFailed < 0:
		return fmt.Errorf("consecutive_failed: negative count %d", st.ConsecutiveFailed)
	case st.SkippedOverlap < 0:
		return fmt.Errorf("skipped_overlap: negative count %d", st.SkippedOverlap)
	}
	switch st.LastResult {
	case "", ResultOK, ResultFailed, ResultSkippedOverlap, ResultCancelled, ResultFenced:
	default:
		return fmt.Errorf("last_result: unknown result %q", st.LastResult)
	}
	return nil
}

// ErrCorruptState is wrapped when a scheduler state file did not decode or
// failed validation.
var ErrCorruptState = errors.New("corrupt scheduler state")

// writeState writes the state atomically (store.WriteAtomic: temp file,
// fsync, rename, fsync of the directory). Callers other than updateState
// must be the only writer.
func writeState(stateDir string, st SchedulerState) error {
	st.Version = stateVersion
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode scheduler state %s: %w", st.Contract, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir %s: %w", stateDir, err)
	}
	return store.WriteAtomic(StatePath(stateDir, st.Contract), append(b, '\n'))
}

// stateLockWait bounds how long an update of a scheduler state file waits
// for another one; the critical section is one small read and write.
const stateLockWait = 10 * time.Second

// updateState is the one read-modify-write of NAME.scheduler.json. It holds
// NAME.scheduler.lock (store.Lock, a flock that other processes honour too)
// while it reads the file, lets change edit the state and writes it back,
// so the daemon's saves and `contractd reset` never overwrite each other.
// A corrupt file is moved aside and change sees a fresh state; that error
// is returned after the write succeeds.
func updateState(ctx context.Context, stateDir, name string, change func(*SchedulerState)) error {
	s, err := store.Open(stateDir)
	if err != nil {
		return err
	}
	unlock, err := s.Lock(ctx, name+".scheduler", stateLockWait)
	if err != nil {
		return fmt.Errorf("scheduler state %s: %w", name, err)
	}
	defer unlock()
	st, readErr := ReadState(stateDir, name)
	if readErr != nil && !errors.Is(readErr, ErrCorruptState) {
		return readErr
	}
	change(&st)
	st.Contract = name
	if err := writeState(stateDir, st); err != nil {
		return err
	}
	return readErr
}

// ReleaseHoldDown releases a contract's hold-down and clears its failure
// streak: the operator's `contractd reset NAME`. A running daemon notices
// the release on its next hold-down poll (HeldPoll) and schedules the
// contract again. The last-run fields are kept. A contract the daemon never
// scheduled has nothing to release: ReleaseHoldDown returns nil and writes
// nothing. It returns an error for a name that cannot be a file name, and wrapped read or write
// errors; a corrupt state file is moved aside and replaced by a released one.
func ReleaseHoldDown(ctx context.Context, stateDir, name string) error {
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return fmt.Errorf("reset %q: not a contract name", name)
	}
	if _, err := os.Stat(StatePath(stateDir, name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	err := updateState(ctx, stateDir, name, func(st *SchedulerState) {
		guard.Release(&st.Scheduler)
		st.NextRunAt = time.Time{}
		st.ResetAt = time.Now().UTC()
	})
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return fmt.Errorf("reset %s: %w", name, err)
	}
	return nil
}
