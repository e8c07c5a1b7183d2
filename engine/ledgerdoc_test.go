package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
)

var ledgerT0 = time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)

// storeAt opens the state dir dir with clock.
func storeAt(t *testing.T, dir string, c clock.Clock) *store.Store {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s.WithClock(c)
}

// TestGuardsSurviveRestart runs the guards, writes the ledger, "restarts"
// (a new Store on the same dir, a new chain) and checks that debounce,
// incidents and the outbox carry on where they were.
func TestGuardsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(ledgerT0)
	g := contracts.Guards{Debounce: 300 * time.Second}
	const unit, cond = "abiba", "response_pipeline=blocked"
	key := guard.IncidentKey("zulip-health", unit, cond)

	{
		s := storeAt(t, dir, clock)
		l, err := ReadLedger(s, "zulip-health")
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
		l.Outbox.Queue = append(l.Outbox.Queue, notify.Queued{Notifier: "zulip", Message: notify.Message{Contract: "zulip-health", Kind: notify.KindOpen, Text: "abiba critical"}, Attempts: 1, Since: ledgerT0})
		if err := WriteLedger(s, "zulip-health", l); err != nil {
			t.Fatal(err)
		}
	}

	clock.Advance(2 * time.Minute)
	s := storeAt(t, dir, clock)
	l, err := ReadLedger(s, "zulip-health")
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
			s := storeAt(t, dir, clock.NewFake(ledgerT0))
			path := filepath.Join(dir, "zulip-health.ledger.json")
			os.WriteFile(path, []byte(tt.content), 0o600)

			l, err := ReadLedger(s, "zulip-health")
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want store.ErrCorrupt with %q", err, tt.wantErr)
			}
			var ce *store.CorruptError
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
			if _, err := ReadLedger(s, "zulip-health"); err != nil {
				t.Errorf("second read: %v", err)
			}
		})
	}
}

func TestLedgerJSONIsReadable(t *testing.T) {
	dir := t.TempDir()
	s := storeAt(t, dir, clock.NewFake(ledgerT0))
	l := NewLedger("zulip-health")
	l.Unit("abiba").Repairs = []time.Time{ledgerT0}
	l.Unit("abiba").State = guard.StateFailing
	if err := WriteLedger(s, "zulip-health", l); err != nil {
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
	clock := clock.NewFake(ledgerT0)
	s := storeAt(t, dir, clock)
	l := NewLedger("zulip-health")
	l.Unit("abiba").Conditions = map[string]*guard.Condition{"stuck": {Held: 4, FailedRepairs: 3, Escalated: true}}
	l.Unit("abiba").Repairs = []time.Time{ledgerT0}
	l.Unit("koby").Conditions = map[string]*guard.Condition{"stuck": {Held: 4, Escalated: true}}
	WriteLedger(s, "zulip-health", l)

	l, _ = ReadLedger(storeAt(t, dir, clock), "zulip-health")
	if got := l.ClearUnits("abiba"); fmt.Sprint(got) != "[abiba]" {
		t.Fatalf("reset %v", got)
	}
	WriteLedger(s, "zulip-health", l)
	l, _ = ReadLedger(storeAt(t, dir, clock), "zulip-health")

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
		AllAgents: {Since: ledgerT0, Until: ledgerT0.Add(time.Hour), Reason: "all"},
		"abiba":   {Since: ledgerT0, Until: ledgerT0.Add(3 * time.Hour), Reason: "abiba"},
		"koby":    {Since: ledgerT0, Until: ledgerT0.Add(30 * time.Minute), Reason: "koby"},
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
		if w := l.Window(tc.agent, ledgerT0.Add(tc.at)); w != nil {
			got = w.Reason
		}
		if got != tc.want {
			t.Errorf("%s at +%s: window %q, want %q", tc.agent, tc.at, got, tc.want)
		}
	}
	l.PruneWindows(ledgerT0.Add(2 * time.Hour))
	if len(l.Maintenance) != 1 || l.Maintenance["abiba"] == nil {
		t.Errorf("after pruning at +2h: %v, want only abiba's", l.Maintenance)
	}
}

// FuzzLedgerReader writes arbitrary bytes as a contract's ledger and reads
// it back as a run does: the reader never panics, and hands back a ledger
// the guards run on, or says it was corrupt and had it moved aside intact
// (the store's half: store.FuzzStateReaders).
func FuzzLedgerReader(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"contract":"c","units":{"a":{"state":"failing","severity":"critical","repairs":["2026-11-29T19:00:00Z"],"conditions":{"x":{"consecutive_held":2,"since":"2026-11-29T18:00:00Z"}}}},"incidents":{"c/a/x":{"opened_at":"2026-11-29T18:00:00Z","last_sent":"2026-11-29T18:00:00Z"}}}`,
		`{"version":1,"contract":"c","incidents":{"c/zzz/critical":null}}`,
		`{"version":1,"contract":"c","units":{"a":{"conditions":{"x":null}}},"maintenance":{"*":null}}`,
		`{"version":1,"contract":"c","units":{"a":{"restart_counter":{"last":5,"increments":[{"at":"2026-11-29T19:00:00Z","n":-3}]}}}}`,
		"",
		"null",
	} {
		f.Add([]byte(s))
	}
	t0 := ledgerT0
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		clock := clock.NewFake(t0)
		s := storeAt(t, dir, clock)
		path := filepath.Join(dir, "c.ledger.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := ReadLedger(s, "c")
		if err != nil {
			var ce *store.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("ReadLedger: %v, want nil or a CorruptError", err)
			}
			if b, rerr := os.ReadFile(ce.MovedTo); rerr != nil || string(b) != string(data) {
				t.Fatalf("moved-aside ledger %s: %v, content changed", ce.MovedTo, rerr)
			}
		}
		if err == nil {
			if verr := l.Validate(); verr != nil {
				t.Fatalf("ReadLedger accepted a ledger that fails Validate: %v", verr)
			}
		}
		// Whatever came back, the guards run on it.
		chain := guard.NewChain(contracts.Guards{Debounce: time.Minute}, contracts.Schedule{}, clock)
		for key, u := range l.Units {
			set := chain.Observe(u, guard.Observation{Severity: contracts.SeverityCritical, Conditions: []string{"x"}})
			chain.Decide(u, guard.Candidate{Condition: "x", Action: "restart", Severity: set.Severity})
			chain.Incidents(l.Incidents).Observe(guard.IncidentKey("c", key, "x"), set.Failing, "", guard.Incident{})
		}
		chain.Incidents(l.Incidents).Open()
		chain.Incidents(l.Incidents).Prune(time.Hour)
		l.Window("a", t0)
		if err := WriteLedger(s, "c", l); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLedger(s, "c"); err != nil {
			t.Fatalf("a ledger written after the guards ran does not read back: %v", err)
		}

	})
}

// BenchmarkWriteLedger measures one durable ledger write (encode, temp
// file, fsync, rename, directory fsync) for a contract with eight units.
func BenchmarkWriteLedger(b *testing.B) {
	s, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l := NewLedger("a2a-selfheal")
	for i := range 8 {
		u := l.Unit(fmt.Sprintf("lab-a2a-%d", i))
		u.Repairs = []time.Time{ledgerT0, ledgerT0.Add(time.Hour)}
		u.Conditions = map[string]*guard.Condition{"wedged": {Held: 2, Since: ledgerT0}}
	}
	for b.Loop() {
		if err := WriteLedger(s, "a2a-selfheal", l); err != nil {
			b.Fatal(err)
		}
	}
}
