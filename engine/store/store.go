// Package store keeps contractd's state on disk, per contract, under one
// state directory: the Maintains snapshot (NAME.snapshot.json), the ledger
// (NAME.ledger.json), a bounded run history (NAME.history.jsonl) and the run
// lock (NAME.lock).
//
// Every write is atomic: a temp file in the same directory, fsync, rename,
// fsync of the directory, so a crash leaves the old file or the new one,
// never half of either. A file that cannot be read back (bad JSON, a version
// this build does not know, a null or impossible entry) is moved aside as
// NAME.ledger.json.corrupt-TIME and reported with an error wrapping
// ErrCorrupt; it is never silently reset, so guards and incidents are not
// zeroed behind the operator's back. History is read line by line: a line
// that is not a run record is skipped and reported (SkippedError).
//
// One run per contract at a time: Lock takes an flock(2) on NAME.lock, which
// the kernel releases when the holding process dies, so a crash leaves no
// stale lock.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

// ErrCorrupt is wrapped when a state file could not be read back; the file
// has been moved aside (see CorruptError).
var ErrCorrupt = errors.New("corrupt state file")

// ErrLocked is wrapped when another process holds a contract's run lock.
var ErrLocked = errors.New("another run holds the lock")

// ErrName is wrapped when a contract name cannot be a file name.
var ErrName = errors.New("invalid contract name")

// CorruptError says which file was corrupt and where it went.
type CorruptError struct {
	Path    string // the file as it was
	MovedTo string // where it is now
	Err     error  // what was wrong with it
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: %v: moved aside to %s", e.Path, e.Err, filepath.Base(e.MovedTo))
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns what was wrong with the file.
func (e *CorruptError) Unwrap() error { return e.Err }

// DefaultHistory is how many run records History keeps per contract.
const DefaultHistory = 200

// Store is the state directory. Its methods are safe for concurrent use by
// different contracts; one contract's files are guarded by its run lock.
type Store struct {
	dir   string
	clock clock.Clock
	// HistoryLimit bounds NAME.history.jsonl (DefaultHistory when zero).
	HistoryLimit int
}

// DefaultDir returns $XDG_STATE_HOME/contractd, falling back to
// ~/.local/state/contractd. It fails only when neither variable nor the home
// directory is known.
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "contractd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return filepath.Join(home, ".local", "state", "contractd"), nil
}

// Open returns the store rooted at dir, creating it (mode 0700) when
// missing. It fails when dir cannot be created or is not a directory.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open state dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open state dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open state dir %s: not a directory", dir)
	}
	return &Store{dir: dir, clock: clock.UTC{}}, nil
}

// WithClock returns the store using clock for timestamps (snapshot times,
// corrupt-file suffixes).
func (s *Store) WithClock(clock clock.Clock) *Store {
	c := *s
	c.clock = clock
	return &c
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckName returns an error wrapping ErrName when name cannot name a
// contract's state (in any backend), else nil.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	return nil
}

// stateSuffixes are the files a contract's state is kept in.
var stateSuffixes = []string{".history.jsonl", ".snapshot.json", ".ledger.json"}

// Contracts returns the names of the contracts that have state (a run
// history, a snapshot or a ledger) in the directory, sorted. A directory
// that does not exist has none; other read errors are returned.
func (s *Store) Contracts() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state dir: %w", err)
	}
	set := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		for _, suf := range stateSuffixes {
			if n, ok := strings.CutSuffix(e.Name(), suf); ok && n != "" {
				set[n] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// path returns the file for a contract and suffix, or ErrName.
func (s *Store) path(name, suffix string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("%w: %q", ErrName, name)
	}
	return filepath.Join(s.dir, name+suffix), nil
}

// WriteAtomic replaces path with data: temp file in the same directory,
// fsync, rename, fsync the directory.
func WriteAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if errors.Is(err, os.ErrNotExist) {
		// The directory was removed under a running contract: the caller
		// holds the whole state in memory, so writing it into a new
		// directory loses nothing.
		if mkErr := os.MkdirAll(dir, 0o700); mkErr == nil {
			f, err = os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open dir for fsync: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync dir: %w", path, err)
	}
	return nil
}

// moveAside renames a corrupt file to PATH.corrupt-20261129T193000Z (with
// -2, -3 … when that exists) and returns the CorruptError to report.
func (s *Store) moveAside(path string, why error) error {
	stamp := s.clock.Now().UTC().Format("20060102T150405Z")
	dst := path + ".corrupt-" + stamp
	for i := 2; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = fmt.Sprintf("%s.corrupt-%s-%d", path, stamp, i)
	}
	if err := os.Rename(path, dst); err != nil {
		return fmt.Errorf("%s: %v; and moving it aside failed: %w", path, why, err)
	}
	return &CorruptError{Path: path, MovedTo: dst, Err: why}
}

// snapshotFile is the on-disk form of a snapshot.
type snapshotFile struct {
	Version   int            `json:"version"`
	Contract  string         `json:"contract"`
	WrittenAt time.Time      `json:"written_at"`
	Data      map[string]any `json:"data"`
}

const snapshotVersion = 1

// ReadSnapshot returns the contract's Maintains snapshot and when it was
// written. A contract that never wrote one gets a nil map, the zero time and
// no error. A corrupt file (bad JSON, another version or contract, no data
// or time) is moved aside and the error wraps ErrCorrupt.
func (s *Store) ReadSnapshot(name string) (map[string]any, time.Time, error) {
	path, err := s.path(name, ".snapshot.json")
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read snapshot: %w", err)
	}
	data, at, why := DecodeSnapshot(name, b)
	if why != nil {
		return nil, time.Time{}, s.moveAside(path, why)
	}
	return data, at, nil
}

// DecodeSnapshot decodes a snapshot read back from any backend and checks
// it: JSON, this build's version, the contract's own, data and time
// present. It returns what is wrong with it otherwise.
func DecodeSnapshot(name string, b []byte) (map[string]any, time.Time, error) {
	var f snapshotFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, time.Time{}, fmt.Errorf("bad JSON: %w", err)
	}
	switch {
	case f.Version != snapshotVersion:
		return nil, time.Time{}, fmt.Errorf("snapshot version %d, this build reads %d", f.Version, snapshotVersion)
	case f.Contract != name:
		return nil, time.Time{}, fmt.Errorf("snapshot of contract %q", f.Contract)
	case f.Data == nil:
		return nil, time.Time{}, errors.New("data: missing or null")
	case f.WrittenAt.IsZero():
		return nil, time.Time{}, errors.New("written_at: missing")
	}
	return f.Data, f.WrittenAt, nil
}

// WriteSnapshot atomically replaces the contract's snapshot with data. It
// fails when data cannot be encoded as JSON or the file cannot be written.
func (s *Store) WriteSnapshot(name string, data map[string]any) error {
	path, err := s.path(name, ".snapshot.json")
	if err != nil {
		return err
	}
	b, err := EncodeSnapshot(name, data, s.clock.Now())
	if err != nil {
		return err
	}
	return WriteAtomic(path, b)
}

// EncodeSnapshot returns a snapshot written at as every backend stores it.
func EncodeSnapshot(name string, data map[string]any, at time.Time) ([]byte, error) {
	if data == nil {
		data = map[string]any{} // null reads back as corrupt
	}
	b, err := json.MarshalIndent(snapshotFile{Version: snapshotVersion, Contract: name, WrittenAt: at.UTC(), Data: data}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode snapshot %s: %w", name, err)
	}
	return append(b, '\n'), nil
}
