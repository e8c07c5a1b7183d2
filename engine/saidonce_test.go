package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/notify"
)

// TestHeldRepairIsLoggedOnceNotEveryRun: a repair held back run after run
// for the same reason (a report-only agent; a debounced repair) is logged
// once, when the answer changes; the report keeps every run's answer.
func TestHeldRepairIsLoggedOnceNotEveryRun(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var lines []string
	h.w.set(func(w *world) {
		w.sticky = true
		w.pi = map[string]any{"connected": true, "response_pipeline": "blocked"}
		w.koby = map[string]any{"stuck": true}
	})
	for i := 0; i < 4; i++ {
		eng, err := New(Options{
			StateDir: h.dir, Opener: h.w.opener, Clock: h.clock,
			Getenv:    func(k string) string { return "" },
			Notifiers: []notify.Notifier{h.rec},
			Sleep:     func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil },
			Logf: func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, fmt.Sprintf(format, args...))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := eng.Run(context.Background(), h.c)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && len(actionsWith(rep, "report-only")) != 1 {
			t.Fatalf("run %d: the report lost the report-only answer: %+v", i, rep.Actions)
		}
		h.clock.Advance(time.Minute)
	}
	count := func(fields ...string) int {
		n := 0
		for _, l := range lines {
			if hasEvent([]string{l}, "mesh: repair held", fields...) {
				n++
			}
		}
		return n
	}
	if n := count("agent=koby", "status=report-only"); n != 1 {
		t.Errorf("the report-only agent's held repair was logged %d times over 4 runs, want once:\n%s", n, strings.Join(lines, "\n"))
	}
	if n := count("agent=abiba", "status=pending"); n != 1 {
		t.Errorf("the debounced repair was logged %d times over 3 held runs, want once:\n%s", n, strings.Join(lines, "\n"))
	}
}
