package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/fixtures/wait"
)

// schedule.start_delay (seed 000: OnBootSec=3min): no run, on_start
// included, before the delay has passed since the daemon started; the
// schedule carries on from there.
func TestStartDelayHoldsTheFirstRunBack(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := clock.NewFake(t0)
	dir := t.TempDir()
	writeContractSchedule(t, dir, "delayed", "{every: 1m, on_start: true, start_delay: 3m}")
	writeContractSchedule(t, dir, "plain", "{every: 1m, start_delay: 3m}")
	writeContractSchedule(t, dir, "undelayed", "{every: 1m, on_start: true}")
	log := newRunLog()
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Clock: clock, Heartbeat: time.Hour, StuckAfter: 24 * time.Hour,
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
			log.begin(c)
			defer log.end(c)
			return report(c), nil
		}}})

	// The contract without a delay runs on start, at once.
	wait.For(h.t, "the undelayed on_start run", func() bool { return log.count("undelayed") == 1 })
	for _, name := range []string{"delayed", "plain"} {
		st := h.status(name)
		if st.NextRunAt == nil || !st.NextRunAt.Equal(t0.Add(3*time.Minute)) || st.Schedule.StartDelay != "3m" {
			t.Fatalf("%s: next run %v, start_delay %q; want %s and 3m", name, st.NextRunAt, st.Schedule.StartDelay, t0.Add(3*time.Minute))
		}
	}
	// Time passes up to a second before the delay ends: no timer of the
	// delayed contracts is due, so nothing of theirs can have run.
	for i := 0; i < 2; i++ {
		clock.Advance(time.Minute)
		wait.For(h.t, "the undelayed contract's minute", func() bool { return log.count("undelayed") == i+2 })
	}
	clock.Advance(59 * time.Second)
	if n, m := log.count("delayed"), log.count("plain"); n != 0 || m != 0 {
		t.Fatalf("runs before the start delay ended: delayed %d, plain %d", n, m)
	}
	clock.Advance(time.Second)
	wait.For(h.t, "the first runs at the end of the start delay", func() bool {
		return log.count("delayed") == 1 && log.count("plain") == 1
	})
	// The undelayed contract's third minute is due at the same instant: wait
	// for its run too rather than racing it.
	wait.For(h.t, "undelayed: on start and each of 3 minutes", func() bool { return log.count("undelayed") == 4 })
	if got := log.count("undelayed"); got != 4 {
		t.Errorf("undelayed ran %d times in 3 minutes, want 4 (on start and each minute)", got)
	}
	// From there on the schedule is every minute.
	wait.For(h.t, "next run planned", func() bool {
		st := h.status("delayed")
		return st.NextRunAt != nil && st.NextRunAt.Equal(t0.Add(4*time.Minute))
	})
	clock.Advance(time.Minute)
	wait.For(h.t, "the run a minute later", func() bool { return log.count("delayed") == 2 && log.count("plain") == 2 })
}

// writeContractSchedule writes NAME.md with the given schedule mapping.
func writeContractSchedule(t *testing.T, dir, name, schedule string) {
	t.Helper()
	body := fmt.Sprintf(contractTemplate, name, "1", "1m", false, "", name)
	body = strings.Replace(body, "schedule: {every: 1m, on_start: false}", "schedule: "+schedule, 1)
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
