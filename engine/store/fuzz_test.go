package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

// FuzzStateReaders writes arbitrary bytes as a contract's ledger, snapshot
// and history and reads them back as a run does. A reader never panics; it
// hands back what it read, or says the file was corrupt and moved it aside
// intact; history keeps its good lines and names the rest, and the next
// append leaves a history that reads clean. What a ledger holds is the
// engine's: engine.FuzzLedgerReader runs the guards on it.
func FuzzStateReaders(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"contract":"c","units":{"a":{"state":"failing","severity":"critical","repairs":["2026-11-29T19:00:00Z"],"conditions":{"x":{"consecutive_held":2,"since":"2026-11-29T18:00:00Z"}}}},"incidents":{"c/a/x":{"opened_at":"2026-11-29T18:00:00Z","last_sent":"2026-11-29T18:00:00Z"}}}`,
		`{"version":1,"contract":"c","incidents":{"c/zzz/critical":null}}`,
		`{"version":1,"contract":"c","units":{"a":{"conditions":{"x":null}}},"maintenance":{"*":null}}`,
		`{"version":1,"contract":"c","written_at":"2026-11-29T19:00:00Z","data":{"agents":{"a":null}}}`,
		`{"version":1,"contract":"c","written_at":"2026-11-29T19:00:00Z","data":null}`,
		"{\"run_id\":\"r1\",\"started_at\":\"2026-11-29T19:00:00Z\"}\n[1]\n{\"run_id\":2}\nnot json\n",
		`{"version":1,"contract":"c","units":{"a":{"restart_counter":{"last":5,"increments":[{"at":"2026-11-29T19:00:00Z","n":-3}]}}}}`,
		"",
		"null",
	} {
		f.Add([]byte(s))
	}
	t0 := time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		clock := clock.NewFake(t0)
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		s = s.WithClock(clock)
		for _, suffix := range []string{".ledger.json", ".snapshot.json", ".history.jsonl"} {
			if err := os.WriteFile(filepath.Join(dir, "c"+suffix), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}

		// The ledger is bytes here: a decoder that refuses has them set
		// aside intact (the engine's own reader: engine.FuzzLedgerReader).
		err = s.ReadLedger("c", func(b []byte) error {
			if !json.Valid(b) {
				return errors.New("bad JSON")
			}
			return nil
		})
		movedAside(t, err, filepath.Join(dir, "c.ledger.json"), data)

		snap, _, err := s.ReadSnapshot("c")
		movedAside(t, err, filepath.Join(dir, "c.snapshot.json"), data)
		if err == nil && snap == nil {
			t.Fatal("a snapshot file read back as no snapshot, without an error")
		}

		recs, err := s.History("c", 0)
		var se *SkippedError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("History: %v", err)
		}
		for _, r := range recs {
			if err := r.Check(); err != nil {
				t.Fatalf("History returned a bad record %+v: %v", r, err)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "c.history.jsonl")); !bytes.Equal(got, data) {
			t.Fatal("History changed the file")
		}
		if err := s.AppendHistory("c", RunRecord{RunID: "new", StartedAt: t0}); err != nil && !errors.As(err, &se) {
			t.Fatalf("AppendHistory: %v", err)
		}
		after, err := s.History("c", 0)
		if err != nil || len(after) != len(recs)+1 && len(recs) < DefaultHistory {
			t.Fatalf("after append: %d records (had %d good), %v", len(after), len(recs), err)
		}
	})
}

// movedAside checks a reader's error: nil, or a CorruptError whose file
// holds the original bytes and whose original is gone.
func movedAside(t *testing.T, err error, path string, data []byte) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read %s: %v, want nil or a CorruptError", filepath.Base(path), err)
	}
	if b, rerr := os.ReadFile(ce.MovedTo); rerr != nil || !bytes.Equal(b, data) {
		t.Fatalf("moved-aside file %s: %v, content changed", ce.MovedTo, rerr)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("%s still in place after being moved aside", path)
	}
}
