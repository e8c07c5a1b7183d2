package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
)

// runLogged runs the harness's contract once, as h.run does, and returns
// the report with the log lines the engine wrote.
func (h *harness) runLogged() (*Report, []string) {
	h.t.Helper()
	var mu sync.Mutex
	var logs []string
	eng, err := New(Options{
		StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, DryRun: h.dry,
		Getenv:    func(k string) string { return map[string]string{"API_KEY": "hunter2-secret"}[k] },
		Notifiers: []notify.Notifier{h.rec},
		Sleep:     func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil },
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(format, args...))
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	rep, err := eng.Run(context.Background(), h.c)
	if err != nil {
		h.t.Fatalf("run: %v", err)
	}
	return rep, logs
}

// A null where the ledger holds an entry is a corrupt ledger like bad JSON:
// moved aside and said so, no panic, and no repair in that run, so the
// debounce (taken back from the snapshot) still holds.
func TestNullsInTheLedgerAreACorruptLedger(t *testing.T) {
	for _, tc := range []struct {
		name, ledger, want string
	}{
		{"null incident", `{"version":1,"contract":"mesh","incidents":{"mesh/abiba/critical":null}}`, `incidents["mesh/abiba/critical"]: is null`},
		{"null condition", `{"version":1,"contract":"mesh","units":{"abiba":{"severity":"critical","state":"failing","conditions":{"response_pipeline: blocked":null}}}}`, `units["abiba"]: conditions["response_pipeline: blocked"]: is null`},
		{"null unit", `{"version":1,"contract":"mesh","units":{"abiba":null}}`, `units["abiba"]: is null`},
		{"null window", `{"version":1,"contract":"mesh","maintenance":{"abiba":null}}`, `maintenance["abiba"]: is null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
			h.run() // one restart, recorded in the ledger and the snapshot
			path := filepath.Join(h.dir, "mesh.ledger.json")
			if err := os.WriteFile(path, []byte(tc.ledger), 0o600); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Minute)
			h.w.set(func(w *world) { w.pi["response_pipeline"] = "blocked" })
			rep, logs := h.runLogged()
			if n := h.w.restartCount("abiba"); n != 1 {
				t.Errorf("restarts = %d, want 1: no repair in a run whose ledger was corrupt", n)
			}
			errs := strings.Join(rep.Errors, "\n")
			if !strings.Contains(errs, "ledger was corrupt and moved aside") || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "moved aside to mesh.ledger.json.corrupt-") {
				t.Errorf("report errors %q, want the corrupt ledger named with %q", errs, tc.want)
			}
			if !strings.Contains(strings.Join(logs, "\n"), tc.want) {
				t.Errorf("log %q does not say what was wrong", logs)
			}
			if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
				t.Errorf("corrupt ledger not moved aside: %v", aside)
			}
			if _, err := store.Open(h.dir); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCorruptSnapshotIsReportedAndLogged(t *testing.T) {
	h := newHarness(t)
	h.run()
	path := filepath.Join(h.dir, "mesh.snapshot.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"contract":"mesh","written_at":"2026-11-29T12:00:00Z","data":null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	rep, logs := h.runLogged()
	want := "data: missing or null: moved aside to mesh.snapshot.json.corrupt-20261129T120100Z"
	if errs := strings.Join(rep.Errors, "\n"); !strings.Contains(errs, "snapshot: ") || !strings.Contains(errs, want) {
		t.Errorf("report errors %q, want %q", errs, want)
	}
	if !strings.Contains(strings.Join(logs, "\n"), want) {
		t.Errorf("log %q, want %q", logs, want)
	}
	st, err := ReadStatus(dirStore(t, h.dir), "mesh", h.clock.Now())
	if err != nil || st.Snapshot["overall_severity"] != "healthy" {
		t.Errorf("the run did not write a new snapshot: %+v %v", st, err)
	}
}

func TestReadHistorySkipsRecordsOfTheWrongShape(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.clock.Advance(time.Minute)
	h.run()
	path := filepath.Join(h.dir, "mesh.history.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	bad := []string{`{"run_id":7,"started_at":"2026-11-29T12:00:00Z"}` + "\n", `{"agents":"abiba"}` + "\n", `{"run_id":"x","started_at":"2026-11-29T12:00:00Z","actions":[null]}` + "\n", "{}\n"}
	mixed := lines[0] + strings.Join(bad, "") + lines[1] + "\n"
	if err := os.WriteFile(path, []byte(mixed), 0o600); err != nil {
		t.Fatal(err)
	}
	hist, err := dirStore(t, h.dir).History("mesh", 0)
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("err = %v, want the bad lines reported", err)
	}
	for _, want := range []string{"skipped 4 bad lines", "line 2: not a run record: json: cannot unmarshal number", "line 4: actions[0] is null", "and 1 more"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(hist) != 2 || hist[0].RunID == "" || hist[1].RunID == "" {
		t.Fatalf("history = %+v, want the two good runs", hist)
	}
	// The next run drops the bad lines, keeps the file as it was aside, and
	// says so; history reads clean afterwards.
	h.clock.Advance(time.Minute)
	eng, _ := New(Options{StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, Notifiers: []notify.Notifier{h.rec}})
	rep, err := eng.Run(context.Background(), h.c)
	if err == nil || !strings.Contains(strings.Join(rep.Errors, "\n"), "kept as mesh.history.jsonl.corrupt-") {
		t.Fatalf("run over bad history: err %v, report errors %q", err, rep.Errors)
	}
	if hist, err := dirStore(t, h.dir).History("mesh", 0); err != nil || len(hist) != 3 {
		t.Errorf("after the run: %d records, %v", len(hist), err)
	}
}
