package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"io"

	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/fixtures/owner"
)

var t0 = time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)

// TestMain doubles as the lock-holding child process of TestLockReleasedWhenHolderDies.
func TestMain(m *testing.M) {
	if spec := os.Getenv("CONTRACTD_STORE_TEST_HOLD"); spec != "" {
		dir, name, _ := strings.Cut(spec, "|")
		s, err := Open(dir)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if _, err := s.Lock(context.Background(), name, 0); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("locked")
		// Hold the lock until killed, or until the test's end closes stdin.
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func openAt(t *testing.T, dir string, clock clock.Clock) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s.WithClock(clock)
}

func TestCorruptTwiceInOneSecondKeepsBoth(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	path := filepath.Join(dir, "zulip-health.ledger.json")
	for i := range 2 {
		os.WriteFile(path, []byte(fmt.Sprintf("garbage %d", i)), 0o600)
		s.ReadLedger("zulip-health", jsonOnly)
	}
	a, _ := os.ReadFile(path + ".corrupt-20261129T193000Z")
	b, _ := os.ReadFile(path + ".corrupt-20261129T193000Z-2")
	if string(a) != "garbage 0" || string(b) != "garbage 1" {
		t.Errorf("kept %q and %q", a, b)
	}
}

func TestSnapshot(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(t0)
	s := openAt(t, dir, clock)
	data, at, err := s.ReadSnapshot("zulip-health")
	if data != nil || !at.IsZero() || err != nil {
		t.Fatalf("missing snapshot: %v %v %v", data, at, err)
	}
	want := map[string]any{
		"zulip_server_status": "up",
		"agents":              map[string]any{"abiba": map[string]any{"status": "healthy", "retry_count": float64(0)}},
	}
	if err := s.WriteSnapshot("zulip-health", want); err != nil {
		t.Fatal(err)
	}
	data, at, err = openAt(t, dir, clock).ReadSnapshot("zulip-health")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(data) != fmt.Sprint(want) || !at.Equal(t0) {
		t.Errorf("read back %v at %s", data, at)
	}

}

func TestCorruptSnapshotIsMovedAside(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "wrong version", content: `{"version":2,"contract":"zulip-health","written_at":"2026-11-29T19:30:00Z","data":{}}`, wantErr: "snapshot version 2, this build reads 1"},
		{name: "bad JSON", content: `{"version":1,`, wantErr: "bad JSON"},
		{name: "null data", content: `{"version":1,"contract":"zulip-health","written_at":"2026-11-29T19:30:00Z","data":null}`, wantErr: "data: missing or null"},
		{name: "data not a mapping", content: `{"version":1,"contract":"zulip-health","written_at":"2026-11-29T19:30:00Z","data":[1]}`, wantErr: "bad JSON"},
		{name: "another contract's snapshot", content: `{"version":1,"contract":"a2a-selfheal","written_at":"2026-11-29T19:30:00Z","data":{}}`, wantErr: `snapshot of contract "a2a-selfheal"`},
		{name: "no time", content: `{"version":1,"contract":"zulip-health","data":{"x":1}}`, wantErr: "written_at: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openAt(t, dir, clock.NewFake(t0))
			path := filepath.Join(dir, "zulip-health.snapshot.json")
			os.WriteFile(path, []byte(tt.content), 0o600)
			data, _, err := s.ReadSnapshot("zulip-health")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "moved aside to zulip-health.snapshot.json.corrupt-20261129T193000Z") {
				t.Fatalf("err = %v, want ErrCorrupt with %q and where it went", err, tt.wantErr)
			}
			if data != nil {
				t.Errorf("data = %v", data)
			}
			if moved, _ := os.ReadFile(path + ".corrupt-20261129T193000Z"); string(moved) != tt.content {
				t.Errorf("moved file holds %q, want the original", moved)
			}
		})
	}
}

func TestNilSnapshotReadsBackEmpty(t *testing.T) {
	s := openAt(t, t.TempDir(), clock.NewFake(t0))
	if err := s.WriteSnapshot("c", nil); err != nil {
		t.Fatal(err)
	}
	data, at, err := s.ReadSnapshot("c")
	if err != nil || data == nil || len(data) != 0 || !at.Equal(t0) {
		t.Errorf("read back %v at %s: %v", data, at, err)
	}
}

func TestWritesLeaveNoTempFiles(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	for i := range 5 {
		if err := s.WriteLedger("c", []byte(`{"i": 1}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteSnapshot("c", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendHistory("c", run(i)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	if got := strings.Join(names, " "); got != "c.history.jsonl c.ledger.json c.snapshot.json" {
		t.Errorf("state dir holds %s", got)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	for i := 1; i <= DefaultHistory+5; i++ {
		if err := s.AppendHistory("zulip-health", run(i)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := openAt(t, dir, clock.NewFake(t0)).History("zulip-health", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != DefaultHistory || all[0].RunID != "r6" {
		t.Fatalf("kept %d records starting %+v, want %d starting with run 6", len(all), all[0], DefaultHistory)
	}
	last, _ := s.History("zulip-health", 2)
	if len(last) != 2 || last[1].RunID != "r205" || last[1].OverallSeverity != "healthy" {
		t.Errorf("last two = %+v", last)
	}
	none, err := s.History("never-ran", 10)
	if len(none) != 0 || err != nil {
		t.Errorf("no history: %v %v", none, err)
	}
}

func TestHistorySkipsAndReportsBadLines(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	path := filepath.Join(dir, "c.history.jsonl")
	good := func(i int) string { b, _ := EncodeRecord(run(i)); return string(b) }
	content := good(1) + "\n{\"run_id\":\"r2\"\n[3]\n{\"run_id\":4}\nnull\n" + good(6) + "\n"
	os.WriteFile(path, []byte(content), 0o600)
	for range 2 { // reading changes nothing: the second read says the same
		recs, err := s.History("c", 0)
		var se *SkippedError
		if !errors.As(err, &se) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want a SkippedError", err)
		}
		for _, want := range []string{"skipped 4 bad lines", "line 2: not JSON", "line 3: not a JSON object", "line 4: not a run record", "and 1 more"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if len(recs) != 2 || recs[0].RunID != "r1" || recs[1].RunID != "r6" {
			t.Errorf("records %+v, want runs 1 and 6", recs)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Fatalf("History changed the file: %q", b)
		}
	}
	last, _ := s.History("c", 1)
	if len(last) != 1 || last[0].RunID != "r6" {
		t.Errorf("last good record = %+v", last)
	}

	// The next append keeps the good records and moves the old file aside.
	err := s.AppendHistory("c", run(7))
	var se *SkippedError
	if !errors.As(err, &se) || se.MovedTo != path+".corrupt-20261129T193000Z" || !strings.Contains(err.Error(), "kept as c.history.jsonl.corrupt-20261129T193000Z") {
		t.Fatalf("append over bad lines: err = %v", err)
	}
	if moved, _ := os.ReadFile(se.MovedTo); string(moved) != content {
		t.Errorf("moved file holds %q", moved)
	}
	recs, err := s.History("c", 0)
	if err != nil || len(recs) != 3 || recs[2].RunID != "r7" {
		t.Errorf("after append: %+v %v", recs, err)
	}
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), good(1)+"\n"+good(6)+"\n") {
		t.Errorf("the good lines were not kept as they were: %q", b)
	}
}

func TestAppendRefusesWhatIsNotARunRecord(t *testing.T) {
	s := openAt(t, t.TempDir(), clock.NewFake(t0))
	for _, tc := range []struct {
		name string
		rec  RunRecord
		want string
	}{
		{"no run id", RunRecord{StartedAt: t0}, "run_id missing"},
		{"no start", RunRecord{RunID: "r1"}, "started_at missing"},
		{"a null action", RunRecord{RunID: "r1", StartedAt: t0, Actions: []*Action{nil}}, "actions[0] is null"},
		{"a null alert", RunRecord{RunID: "r1", StartedAt: t0, Alerts: []*Alert{nil}}, "alerts[0] is null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.AppendHistory("c", tc.rec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if recs, err := s.History("c", 0); len(recs) != 0 || err != nil {
		t.Errorf("refused records were kept: %+v %v", recs, err)
	}
}

// run is a run record numbered i.
func run(i int) RunRecord {
	return RunRecord{RunID: fmt.Sprintf("r%d", i), StartedAt: t0.Add(time.Duration(i) * time.Minute), OverallSeverity: "healthy", Agents: map[string]string{"a": "healthy"}}
}

func TestNamesCannotEscapeTheDir(t *testing.T) {
	s := openAt(t, t.TempDir(), clock.NewFake(t0))
	for _, name := range []string{"", "../etc/passwd", "a/b", ".hidden", "..", strings.Repeat("x", 200)} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			if err := s.ReadLedger(name, anyBytes); !errors.Is(err, ErrName) {
				t.Errorf("ReadLedger: %v", err)
			}
			if err := s.WriteSnapshot(name, nil); !errors.Is(err, ErrName) {
				t.Errorf("WriteSnapshot: %v", err)
			}
			if _, err := s.Lock(t.Context(), name, 0); !errors.Is(err, ErrName) {
				t.Errorf("Lock: %v", err)
			}
		})
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/lib/x")
	if d, _ := DefaultDir(); d != "/var/lib/x/contractd" {
		t.Errorf("with XDG_STATE_HOME: %s", d)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/lab")
	if d, _ := DefaultDir(); d != "/home/lab/.local/state/contractd" {
		t.Errorf("fallback: %s", d)
	}
}

func TestLock(t *testing.T) {
	s := openAt(t, t.TempDir(), clock.NewFake(t0))
	unlock, err := s.Lock(t.Context(), "zulip-health", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Lock(t.Context(), "zulip-health", 50*time.Millisecond)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("held by pid %d", os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	if u2, err := s.Lock(t.Context(), "other-contract", 0); err != nil {
		t.Errorf("another contract's lock: %v", err)
	} else {
		u2()
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Lock(ctx, "zulip-health", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	unlock()
	unlock()
	u3, err := s.Lock(t.Context(), "zulip-health", 0)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	u3()
}

func TestLockWaitsForTheHolder(t *testing.T) {
	s := openAt(t, t.TempDir(), clock.NewFake(t0))
	unlock, err := s.Lock(t.Context(), "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Held: a lock that does not wait is refused.
	if _, err := s.Lock(t.Context(), "c", 0); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock while held: %v, want ErrLocked", err)
	}
	var released atomic.Bool
	got := make(chan bool, 1)
	go func() {
		u, err := s.Lock(t.Context(), "c", time.Minute)
		if err != nil {
			t.Errorf("waiting lock: %v", err)
			got <- false
			return
		}
		got <- released.Load() // the holder had released it by now
		u()
	}()
	select {
	case <-got:
		t.Fatal("the waiter has the lock while the holder holds it")
	default:
	}
	released.Store(true)
	unlock()
	if !<-got {
		t.Fatal("the waiter got the lock before the holder released it")
	}
}

// TestLockReleasedWhenHolderDies holds the lock in a child process (this
// test binary re-executed), kills it with SIGKILL, and takes the lock.
func TestLockReleasedWhenHolderDies(t *testing.T) {
	dir := t.TempDir()
	cmd := owner.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CONTRACTD_STORE_TEST_HOLD="+dir+"|zulip-health")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil { // open while the test runs
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q", line)
	}

	s := openAt(t, dir, clock.NewFake(t0))
	_, err = s.Lock(t.Context(), "zulip-health", 100*time.Millisecond)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "held by pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("lock held by a live child: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	unlock, err := s.Lock(t.Context(), "zulip-health", 5*time.Second)
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	unlock()
}

func TestContractsAreThoseWithState(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	if err := s.WriteLedger("b", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendHistory("a", run(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSnapshot("a", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// Neither a lock, a scheduler file nor a file moved aside is state.
	for _, f := range []string{"c.lock", "d.scheduler.json", "e.ledger.json.corrupt-20261129T193000Z", ".contractd-serve.lock"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o600)
	}
	got, err := s.Contracts()
	if err != nil || strings.Join(got, " ") != "a b" {
		t.Fatalf("Contracts() = %v, %v; want a b", got, err)
	}
}

// anyBytes is a ledger decoder that accepts whatever is stored.
func anyBytes([]byte) error { return nil }

// jsonOnly is a ledger decoder that refuses what is not JSON: the store
// sets aside whatever its decoder refuses (the engine's checks much more).
func jsonOnly(b []byte) error {
	if !json.Valid(b) {
		return errors.New("bad JSON")
	}
	return nil
}

// TestStoreSetsAsideWhatItsDecoderRefuses: the store keeps a ledger as
// bytes; what the decoder refuses is moved aside (never reset in place),
// and the next read starts clean. The ledger's own checks are the
// engine's (engine.TestCorruptLedgerIsMovedAside).
func TestStoreSetsAsideWhatItsDecoderRefuses(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	path := filepath.Join(dir, "c.ledger.json")
	os.WriteFile(path, []byte("{not json"), 0o600)
	err := s.ReadLedger("c", jsonOnly)
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.MovedTo != path+".corrupt-20261129T193000Z" {
		t.Fatalf("ReadLedger = %v, want a CorruptError moving the file aside", err)
	}
	if moved, _ := os.ReadFile(ce.MovedTo); string(moved) != "{not json" {
		t.Errorf("moved file holds %q, want the original", moved)
	}
	called := false
	if err := s.ReadLedger("c", func([]byte) error { called = true; return nil }); err != nil || called {
		t.Errorf("second read: %v, decoder called %v; want no ledger, nothing decoded", err, called)
	}
	if err := s.WriteLedger("c", []byte(`{"ok": true}`)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := s.ReadLedger("c", func(b []byte) error { got = b; return nil }); err != nil || string(got) != `{"ok": true}` {
		t.Errorf("read back %q, %v", got, err)
	}
}
