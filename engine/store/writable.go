package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrUnwritable is wrapped when the state directory cannot be written
// (read-only, full, owned by someone else): a run then cannot keep its
// exactly-once promise (no lock file, no write-ahead ledger), so it
// probes and reports but repairs nothing and records nothing.
var ErrUnwritable = errors.New("state cannot be written")

// UnwritableError says which directory cannot be written and why.
type UnwritableError struct {
	Dir string
	// Cause is the system's reason, without any file name ("read-only
	// file system", "no space left on device", "permission denied"): the
	// same for every write that fails the same way, so it names the
	// condition.
	Cause string
	Err   error
}

func (e *UnwritableError) Error() string {
	return fmt.Sprintf("state directory %s cannot be written: %s", e.Dir, e.Cause)
}

// Is makes errors.Is(err, ErrUnwritable) true.
func (e *UnwritableError) Is(target error) bool { return target == ErrUnwritable }

// Unwrap returns the failed write's error.
func (e *UnwritableError) Unwrap() error { return e.Err }

// WriteChecker is a Backend that can tell, before a run, whether it can be
// written. The files backend can; etcd says so by failing its writes.
type WriteChecker interface {
	// CheckWritable returns an error wrapping ErrUnwritable (an
	// *UnwritableError) when a small file cannot be created, written,
	// synced and removed in the state, nil when it can.
	CheckWritable() error
}

var _ WriteChecker = (*Store)(nil)

// CheckWritable writes one byte to a temp file in the state directory,
// syncs it and removes it: what every state write needs. It returns an
// *UnwritableError when any of that fails.
func (s *Store) CheckWritable() error {
	f, err := os.CreateTemp(s.dir, ".write-check-*")
	if err == nil {
		_, err = f.Write([]byte{'\n'})
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if rerr := os.Remove(f.Name()); err == nil && rerr != nil && !os.IsNotExist(rerr) {
			err = rerr
		}
	}
	if err != nil {
		return unwritable(s.dir, err)
	}
	return nil
}

// unwritable wraps a failed write of the state directory dir.
func unwritable(dir string, err error) error {
	cause := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		cause = errno.Error()
	}
	return &UnwritableError{Dir: dir, Cause: cause, Err: err}
}

// CannotWrite reports whether err is a write the file system refused for
// good (read-only, full, not ours) rather than a passing failure.
func CannotWrite(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}
