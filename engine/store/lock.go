package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often Lock retries a held lock while it waits.
const lockPoll = 20 * time.Millisecond

// Lock takes the contract's run lock (flock on NAME.lock, see LockFile),
// waiting up to wait for another holder to let go. It returns a function
// that releases the lock (safe to call more than once). It fails with an
// error wrapping ErrLocked (naming the holder's pid when known) when the
// lock is still held after wait, with ctx's error when ctx ends first,
// with an error wrapping ErrUnwritable when the lock file cannot be made
// (the state directory is read-only or full), and with the underlying
// error when the lock file cannot be opened otherwise. The
// kernel releases the lock when the holding process dies, so a crash
// leaves no stale lock.
func (s *Store) Lock(ctx context.Context, name string, wait time.Duration) (unlock func(), err error) {
	path, err := s.path(name, ".lock")
	if err != nil {
		return nil, err
	}
	unlock, err = LockFile(ctx, path, wait)
	var held *HeldError
	if errors.As(err, &held) {
		holder := ""
		if held.PID != "" {
			holder = " (held by pid " + held.PID + ")"
		}
		return nil, fmt.Errorf("lock %s%s after %s: %w", name, holder, wait, ErrLocked)
	}
	if err != nil && CannotWrite(err) {
		return nil, fmt.Errorf("lock %s: %w", name, unwritable(s.dir, err))
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return unlock, nil
}

// HeldError is LockFile's error when another process still holds the lock
// after the wait. It wraps ErrLocked.
type HeldError struct {
	Path string
	PID  string        // the holder's pid as it wrote it in the file; "" when unknown
	Wait time.Duration // how long LockFile waited
}

func (e *HeldError) Error() string {
	holder := ""
	if e.PID != "" {
		holder = " (held by pid " + e.PID + ")"
	}
	return fmt.Sprintf("lock %s%s after %s: %v", e.Path, holder, e.Wait, ErrLocked)
}

func (e *HeldError) Unwrap() error { return ErrLocked }

// LockFile takes an exclusive flock on the file at path, creating it (mode
// 0600) if need be, and polls every lockPoll for up to wait while another
// process holds it. Once it has the lock it writes this process's pid into
// the file, for the next one's error message; the lock itself is the
// flock, not this content. A lock file that exists on a read-only or
// full file system is locked all the same, with no pid written. It returns the function that releases the lock
// (safe to call more than once). It fails with a *HeldError when the lock
// is still held after wait, with ctx's error when ctx ends first, and with
// the error of opening the file or of flock(2) otherwise. The kernel
// releases the lock when the holding process dies, so a crash leaves no
// stale lock.
func LockFile(ctx context.Context, path string, wait time.Duration) (unlock func(), err error) {
	// The lock is held on a read-only descriptor, which flock allows: a
	// descriptor open for writing would keep the file system from being
	// remounted read-only for as long as the lock is held (a daemon's,
	// for its whole life). The pid is written through one of its own.
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		c, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		c.Close()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("flock: %w", err)
		}
		if !time.Now().Before(deadline) {
			pid := readHolder(path)
			f.Close()
			return nil, &HeldError{Path: path, PID: pid, Wait: wait}
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	// Best effort: a read-only or full file system keeps the lock and
	// loses only the pid.
	if w, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
		w.Write([]byte(strconv.Itoa(os.Getpid()) + "\n"))
		w.Close()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
		})
	}, nil
}

// readHolder returns the pid written in the lock file at path, or "" when
// there is none.
func readHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return ""
	}
	return pid
}
