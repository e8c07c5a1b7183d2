package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	err := updateState(context.Background(), state, "broken", func(st *SchedulerState) {
		go func() { resetDone <- ReleaseHoldDown(context.Background(), state, "broken") }()
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

// A scheduler state that decodes but is not this contract's, or holds
// impossible values, is moved aside and said so like one that does not
// decode.
func TestSchedulerStateIsValidatedOnRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, content, want string }{
		{"another contract's", `{"version":1,"contract":"other","held_down":true}`, `scheduler state of contract "other"`},
		{"negative streak", `{"version":1,"contract":"x","consecutive_failed":-4}`, "consecutive_failed: negative count -4"},
		{"unknown result", `{"version":1,"contract":"x","last_result":"meh"}`, `last_result: unknown result "meh"`},
		{"null version", `{"version":null,"contract":"x"}`, "unknown version 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			path := StatePath(state, "x")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadState(state, "x")
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "moved aside to "+path+".corrupt-") {
				t.Fatalf("ReadState = %v, want ErrCorruptState with %q", err, tc.want)
			}
			if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
				t.Errorf("not moved aside: %v", aside)
			}
		})
	}
}
