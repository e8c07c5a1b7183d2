package serve

import (
	"testing"
	"time"
)

// A reset that lands while the daemon is saving is never overwritten: the
// save's read-modify-write holds the state lock, so `contractd reset` (here
// started from inside the save, as another process could) waits for it and
// then releases what the daemon wrote.
func TestResetDuringASaveIsKept(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	held := SchedulerState{Contract: "broken"}
	held.ConsecutiveFailed, held.HeldDown, held.Alerted = 3, true, true
	if err := writeState(state, held); err != nil {
		t.Fatal(err)
	}
	resetDone := make(chan error, 1)
	err := updateState(state, "broken", func(st *SchedulerState) {
		go func() { resetDone <- Reset(state, "broken") }()
		// Give the reset every chance to write first; it can only do so
		// if nothing serialises it against this save.
		select {
		case err := <-resetDone:
			resetDone <- err
		case <-time.After(300 * time.Millisecond):
		}
		*st = held // the daemon's view: still held down
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-resetDone; err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(state, "broken")
	if err != nil {
		t.Fatal(err)
	}
	if got.HeldDown || got.Alerted || got.ConsecutiveFailed != 0 || got.ResetAt.IsZero() {
		t.Fatalf("after a reset during a save: %+v, want released with reset_at set", got)
	}
}
