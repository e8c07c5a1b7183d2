package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/store"
)

// One run's use of the store: take the run lock, read the ledger (a corrupt
// one is moved aside and reported, and that run repairs nothing), change it
// through the guards, and write everything back atomically.
func Example() {
	dir, _ := os.MkdirTemp("", "contractd-state-")
	defer os.RemoveAll(dir)
	clock := clock.NewFake(time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC))
	st, err := store.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	st = st.WithClock(clock)

	unlock, err := st.Lock(context.Background(), "zulip-health", 30*time.Second)
	if errors.Is(err, store.ErrLocked) {
		fmt.Println("skipped:", err)
		return
	}
	defer unlock()

	ledger, err := engine.ReadLedger(st, "zulip-health")
	repairsAllowed := true
	if errors.Is(err, store.ErrCorrupt) {
		repairsAllowed = false // alert about err; guards were not reset silently
	} else if err != nil {
		fmt.Println(err)
		return
	}
	ledger.Unit("abiba").Repairs = append(ledger.Unit("abiba").Repairs, clock.Now())

	st.WriteSnapshot("zulip-health", map[string]any{"zulip_server_status": "up"})
	engine.WriteLedger(st, "zulip-health", ledger)
	st.AppendHistory("zulip-health", store.RunRecord{RunID: "r1", StartedAt: clock.Now(), OverallSeverity: "critical"})

	again, _ := engine.ReadLedger(st, "zulip-health")
	snap, at, _ := st.ReadSnapshot("zulip-health")
	runs, _ := st.History("zulip-health", 10)
	fmt.Println(repairsAllowed, len(again.Units["abiba"].Repairs), snap["zulip_server_status"], at.Format(time.RFC3339), len(runs))
	// Output: true 1 up 2026-11-29T19:30:00Z 1
}
