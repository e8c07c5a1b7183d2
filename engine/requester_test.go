package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/guard"
)

// A caller that names itself is kept: in the window it sets, in the
// reason of the repair that window blocks, in the ledger's operator events
// until the next run's history record takes them, and as requested_by of
// the run it asks for.
func TestRequesterIsRecordedWithWhatItChanged(t *testing.T) {
	h := newHarness(t)
	st := dirStore(t, h.dir)
	who := "mcp agent 1.0 (stdio)"
	ctx := WithRequester(context.Background(), who)
	ws, err := SetMaintenance(ctx, st, "mesh", "abiba", time.Hour, "pi upgrade", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w := ws["abiba"]; w == nil || w.By != who || !strings.Contains(w.String(), "(set by "+who+")") {
		t.Fatalf("window %+v", w)
	}
	if err := ReleaseLedger(ctx, st, "mesh", "", h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	l, err := ReadLedger(st, "mesh")
	if err != nil || len(l.Operator) != 2 || l.Operator[0].By != who || !strings.Contains(l.Operator[0].What, "maintenance of agent abiba for 1h: pi upgrade") || !strings.HasPrefix(l.Operator[1].What, "released") {
		t.Fatalf("operator events %+v, %v", l.Operator, err)
	}

	h.w.set(func(w *world) { w.pi = map[string]any{"connected": true, "response_pipeline": "blocked"} })
	rep := h.run()
	if rep.RequestedBy != "" {
		t.Fatalf("a run nobody asked for says requested by %q", rep.RequestedBy)
	}
	blocked := actionsWith(rep, guard.StatusBlocked)
	if len(blocked) != 1 || !strings.Contains(blocked[0].Reason, "set by "+who) {
		t.Fatalf("blocked actions %+v", blocked)
	}
	hist, err := st.History("mesh", 1)
	if err != nil || len(hist) != 1 || len(hist[0].Operator) != 2 {
		t.Fatalf("the run's record does not take the operator events: %+v, %v", hist, err)
	}
	if l, _ := ReadLedger(st, "mesh"); len(l.Operator) != 0 {
		t.Fatalf("the ledger keeps operator events the history has: %+v", l.Operator)
	}

	eng, err := New(Options{StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	rep, err = eng.Run(ctx, h.c)
	if err != nil || rep.RequestedBy != who {
		t.Fatalf("asked-for run: requested_by %q, %v", rep.RequestedBy, err)
	}
	hist, _ = st.History("mesh", 1)
	if hist[0].RequestedBy != who || len(hist[0].Operator) != 0 {
		t.Fatalf("asked-for run's record: %+v", hist[0])
	}
}
