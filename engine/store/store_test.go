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

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/fixtures/owner"
	"io"
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

// TestGuardsSurviveRestart runs the guards, writes the ledger, "restarts"
// (a new Store on the same dir, a new chain) and checks that debounce,
// incidents and the outbox carry on where they were.
func TestGuardsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(t0)
	g := contracts.Guards{Debounce: 300 * time.Second}
	const unit, cond = "abiba", "response_pipeline=blocked"
	key := guard.IncidentKey("zulip-health", unit, cond)

	{
		s := openAt(t, dir, clock)
		l, err := s.ReadLedger("zulip-health")
		if err != nil {
			t.Fatal(err)
		}
		chain := guard.NewChain(g, contracts.Schedule{}, clock)
		u := l.Unit(unit)
		set := chain.Observe(u, guard.Observation{Severity: contracts.SeverityCritical, Conditions: []string{cond}})
		if v := chain.Decide(u, guard.Candidate{Condition: cond, Action: "pm2 restart abiba-zulip", Severity: set.Severity}); !v.Run {
			t.Fatalf("first run: %s", v)
		}
		chain.RecordRepair(u, cond, 0)
		if a := chain.Incidents(l.Incidents).Observe(key, set.Failing, "", guard.Incident{}); a.Send != guard.SendOpen {
			t.Fatalf("incident: %+v", a)
		}
		l.Outbox.Queue = append(l.Outbox.Queue, notify.Queued{Notifier: "zulip", Message: notify.Message{Contract: "zulip-health", Kind: notify.KindOpen, Text: "abiba critical"}, Attempts: 1, Since: t0})
		if err := s.WriteLedger("zulip-health", l); err != nil {
			t.Fatal(err)
		}
	}

	clock.Advance(2 * time.Minute)
	s := openAt(t, dir, clock)
	l, err := s.ReadLedger("zulip-health")
	if err != nil {
		t.Fatal(err)
	}
	chain := guard.NewChain(g, contracts.Schedule{}, clock)
	u := l.Unit(unit)
	set := chain.Observe(u, guard.Observation{Severity: contracts.SeverityCritical, Conditions: []string{cond}})
	v := chain.Decide(u, guard.Candidate{Condition: cond, Action: "pm2 restart abiba-zulip", Severity: set.Severity})
	if v.Status != guard.StatusPending || v.Guard != guard.GuardDebounce {
		t.Errorf("after restart the debounce was forgotten: %s", v)
	}
	if a := chain.Incidents(l.Incidents).Observe(key, set.Failing, "", guard.Incident{}); a.Send != guard.SendNothing {
		t.Errorf("after restart the incident alerted again: %+v", a)
	}
	if len(l.Outbox.Queue) != 1 || l.Outbox.Queue[0].Message.Text != "abiba critical" {
		t.Errorf("outbox = %+v", l.Outbox)
	}
}

func TestCorruptLedgerIsMovedAside(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "bad JSON", content: `{"version": 1, "units": {`, wantErr: "bad JSON"},
		{name: "wrong version", content: `{"version": 7, "contract": "zulip-health"}`, wantErr: "ledger version 7, this build reads 1"},
		{name: "another contract's ledger", content: `{"version": 1, "contract": "a2a-selfheal"}`, wantErr: `ledger of contract "a2a-selfheal"`},
		{name: "empty file", content: ``, wantErr: "bad JSON"},
		{name: "null incident", content: `{"version":1,"contract":"zulip-health","incidents":{"zulip-health/zzz/critical":null}}`, wantErr: `incidents["zulip-health/zzz/critical"]: is null`},
		{name: "null unit", content: `{"version":1,"contract":"zulip-health","units":{"abiba":null}}`, wantErr: `units["abiba"]: is null`},
		{name: "null condition", content: `{"version":1,"contract":"zulip-health","units":{"abiba":{"severity":"critical","conditions":{"stuck":null}}}}`, wantErr: `units["abiba"]: conditions["stuck"]: is null`},
		{name: "null maintenance window", content: `{"version":1,"contract":"zulip-health","maintenance":{"*":null}}`, wantErr: `maintenance["*"]: is null`},
		{name: "negative count", content: `{"version":1,"contract":"zulip-health","units":{"abiba":{"severity":"critical","consecutive_failing":-3}}}`, wantErr: `units["abiba"]: consecutive_failing: negative count -3`},
		{name: "negative restart increment", content: `{"version":1,"contract":"zulip-health","units":{"abiba":{"severity":"critical","restart_counter":{"last":9,"increments":[{"n":-50}]}}}}`, wantErr: `restart_counter.increments[0]: negative increment -50`},
		{name: "unknown unit state", content: `{"version":1,"contract":"zulip-health","units":{"abiba":{"state":"dozing","severity":"critical"}}}`, wantErr: `units["abiba"]: state: unknown state "dozing"`},
		{name: "repairs out of order", content: `{"version":1,"contract":"zulip-health","units":{"abiba":{"severity":"critical","repairs":["2026-11-29T19:30:00Z","2026-11-29T18:00:00Z"]}}}`, wantErr: `units["abiba"]: repairs: times are not oldest first`},
		{name: "incident without open time", content: `{"version":1,"contract":"zulip-health","incidents":{"k":{"reminders":1}}}`, wantErr: `incidents["k"]: opened_at: missing`},
		{name: "unknown severity", content: `{"version":1,"contract":"zulip-health","units":{"abiba":{"severity":"purple"}}}`, wantErr: `unknown severity "purple"`},
		{name: "wrong type", content: `{"version":1,"contract":"zulip-health","units":["abiba"]}`, wantErr: "bad JSON"},
		{name: "null version", content: `{"version":null,"contract":"zulip-health"}`, wantErr: "ledger version 0, this build reads 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openAt(t, dir, clock.NewFake(t0))
			path := filepath.Join(dir, "zulip-health.ledger.json")
			os.WriteFile(path, []byte(tt.content), 0o600)

			l, err := s.ReadLedger("zulip-health")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrCorrupt with %q", err, tt.wantErr)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.MovedTo != path+".corrupt-20261129T193000Z" {
				t.Fatalf("moved to %v", ce)
			}
			if moved, _ := os.ReadFile(ce.MovedTo); string(moved) != tt.content {
				t.Errorf("moved file holds %q, want the original", moved)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("corrupt ledger still in place")
			}
			if l == nil || len(l.Units) != 0 || l.Contract != "zulip-health" {
				t.Errorf("ledger = %+v, want an empty one to run with", l)
			}
			// The next read starts clean and says so no more.
			if _, err := s.ReadLedger("zulip-health"); err != nil {
				t.Errorf("second read: %v", err)
			}
		})
	}
}

func TestCorruptTwiceInOneSecondKeepsBoth(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	path := filepath.Join(dir, "zulip-health.ledger.json")
	for i := range 2 {
		os.WriteFile(path, []byte(fmt.Sprintf("garbage %d", i)), 0o600)
		s.ReadLedger("zulip-health")
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
		if err := s.WriteLedger("c", NewLedger("c")); err != nil {
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
			if _, err := s.ReadLedger(name); !errors.Is(err, ErrName) {
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

func TestLedgerJSONIsReadable(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	l := NewLedger("zulip-health")
	l.Unit("abiba").Repairs = []time.Time{t0}
	l.Unit("abiba").State = guard.StateFailing
	if err := s.WriteLedger("zulip-health", l); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "zulip-health.ledger.json"))
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"version": 1`, `"contract": "zulip-health"`, `"repairs": [`, `"2026-11-29T19:30:00Z"`, `"state": "failing"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("ledger JSON lacks %s:\n%s", want, b)
		}
	}
}

func TestOperatorResetSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(t0)
	s := openAt(t, dir, clock)
	l := NewLedger("zulip-health")
	l.Unit("abiba").Conditions = map[string]*guard.Condition{"stuck": {Held: 4, FailedRepairs: 3, Escalated: true}}
	l.Unit("abiba").Repairs = []time.Time{t0}
	l.Unit("koby").Conditions = map[string]*guard.Condition{"stuck": {Held: 4, Escalated: true}}
	s.WriteLedger("zulip-health", l)

	l, _ = openAt(t, dir, clock).ReadLedger("zulip-health")
	if got := l.ClearUnits("abiba"); fmt.Sprint(got) != "[abiba]" {
		t.Fatalf("reset %v", got)
	}
	s.WriteLedger("zulip-health", l)
	l, _ = openAt(t, dir, clock).ReadLedger("zulip-health")

	clock.Advance(time.Hour)
	chain := guard.NewChain(contracts.Guards{}, contracts.Schedule{}, clock)
	for unit, wantRun := range map[string]bool{"abiba": true, "koby": false} {
		v := chain.Decide(l.Unit(unit), guard.Candidate{Condition: "stuck", Action: "pm2 restart", Severity: contracts.SeverityCritical})
		if v.Run != wantRun {
			t.Errorf("%s after reset of abiba: %s", unit, v)
		}
	}
	if len(l.Unit("abiba").Repairs) != 1 {
		t.Errorf("reset forgot repair times, which budgets still need")
	}
}

func TestLedgerWindowCoversAgentOrWholeContract(t *testing.T) {
	l := NewLedger("zulip-health")
	l.Maintenance = map[string]*guard.Window{
		AllAgents: {Since: t0, Until: t0.Add(time.Hour), Reason: "all"},
		"abiba":   {Since: t0, Until: t0.Add(3 * time.Hour), Reason: "abiba"},
		"koby":    {Since: t0, Until: t0.Add(30 * time.Minute), Reason: "koby"},
	}
	for _, tc := range []struct {
		agent string
		at    time.Duration
		want  string // reason of the covering window, "" for none
	}{
		{"abiba", 10 * time.Minute, "abiba"}, // its own ends later than the contract's
		{"koby", 10 * time.Minute, "all"},    // the contract's ends later than its own
		{"tanko", 10 * time.Minute, "all"},   // no window of its own
		{"tanko", 2 * time.Hour, ""},         // the contract's is over
		{"abiba", 2 * time.Hour, "abiba"},
		{"abiba", -time.Minute, ""}, // not begun
	} {
		got := ""
		if w := l.Window(tc.agent, t0.Add(tc.at)); w != nil {
			got = w.Reason
		}
		if got != tc.want {
			t.Errorf("%s at +%s: window %q, want %q", tc.agent, tc.at, got, tc.want)
		}
	}
	l.PruneWindows(t0.Add(2 * time.Hour))
	if len(l.Maintenance) != 1 || l.Maintenance["abiba"] == nil {
		t.Errorf("after pruning at +2h: %v, want only abiba's", l.Maintenance)
	}
}

func TestContractsAreThoseWithState(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, clock.NewFake(t0))
	if err := s.WriteLedger("b", NewLedger("b")); err != nil {
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
