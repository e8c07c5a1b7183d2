package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
)

// stateVersion is the schema version of NAME.scheduler.json.
const stateVersion = 1

// Run results recorded in the scheduler state and in contractd_runs_total.
const (
	ResultOK             = "ok"              // the engine finished the run (sick agents included)
	ResultFailed         = "failed"          // the engine itself failed: error, deadline, panic
	ResultSkippedOverlap = "skipped_overlap" // the previous run was still going, or another process held the lock
	ResultCancelled      = "cancelled"       // the daemon stopped and cancelled the run past its shutdown grace
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
	// ResetAt is stamped by Reset; a running daemon that sees a newer
	// ResetAt than the one it knows applies the release.
	ResetAt        time.Time `json:"reset_at,omitzero"`
	SkippedOverlap int64     `json:"skipped_overlap"`
}

// StatePath returns the path of a contract's scheduler state file.
func StatePath(stateDir, name string) string {
	return filepath.Join(stateDir, name+".scheduler.json")
}

// ReadState reads a contract's scheduler state. A missing file is a fresh
// state and no error. A file that does not decode is moved aside to
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
	if err := json.Unmarshal(b, &st); err != nil || st.Version != stateVersion {
		if err == nil {
			err = fmt.Errorf("unknown version %d", st.Version)
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

// ErrCorruptState is wrapped when a scheduler state file did not decode.
var ErrCorruptState = errors.New("corrupt scheduler state")

// writeState writes the state atomically: temp file, fsync, rename, fsync of
// the directory. It returns the first error, wrapped with the path.
func writeState(stateDir string, st SchedulerState) error {
	st.Version = stateVersion
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode scheduler state %s: %w", st.Contract, err)
	}
	b = append(b, '\n')
	return writeFileAtomic(StatePath(stateDir, st.Contract), b)
}

func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after a successful rename
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// Reset releases a contract's hold-down and clears its failure streak: the
// operator's `contractd reset NAME`. A running daemon notices the release on
// its next hold-down poll (HeldPoll) and schedules the contract again. The
// last-run fields are kept. A contract the daemon never scheduled has
// nothing to release: Reset returns nil and writes nothing. It returns an
// error for a name that cannot be a file name, and wrapped read or write
// errors; a corrupt state file is moved aside and replaced by a released one.
func Reset(stateDir, name string) error {
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return fmt.Errorf("reset %q: not a contract name", name)
	}
	if _, err := os.Stat(StatePath(stateDir, name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	st, err := ReadState(stateDir, name)
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return fmt.Errorf("reset %s: %w", name, err)
	}
	guard.Release(&st.Scheduler)
	st.NextRunAt = time.Time{}
	st.ResetAt = time.Now().UTC()
	if err := writeState(stateDir, st); err != nil {
		return fmt.Errorf("reset %s: %w", name, err)
	}
	return nil
}
