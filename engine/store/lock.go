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

// Lock takes the contract's run lock (flock on NAME.lock), waiting up to
// wait for another holder to let go. It returns a function that releases
// the lock (safe to call more than once). It fails with an error wrapping
// ErrLocked (naming the holder's pid when known) when the lock is still
// held after wait, with ctx's error when ctx ends first, and with the
// underlying error when the lock file cannot be opened. The kernel releases
// the lock when the holding process dies, so a crash leaves no stale lock.
func (s *Store) Lock(ctx context.Context, name string, wait time.Duration) (unlock func(), err error) {
	path, err := s.path(name, ".lock")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: flock: %w", name, err)
		}
		if !time.Now().Before(deadline) {
			holder := readHolder(path)
			f.Close()
			return nil, fmt.Errorf("lock %s%s after %s: %w", name, holder, wait, ErrLocked)
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
	// Record the holder for the next one's error message; the lock itself
	// is the flock, not this content.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
		})
	}, nil
}

// readHolder returns " (held by pid N)" from the lock file, or "".
func readHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return ""
	}
	return " (held by pid " + pid + ")"
}
