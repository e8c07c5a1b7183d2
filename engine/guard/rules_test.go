package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
)

var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// at returns t0 plus d, to keep tables readable.
func at(d time.Duration) time.Time { return t0.Add(d) }

func repairsAt(ds ...time.Duration) []time.Time {
	var ts []time.Time
	for _, d := range ds {
		ts = append(ts, at(d))
	}
	return ts
}

func TestDebounce(t *testing.T) {
	tests := []struct {
		name        string
		window      time.Duration
		repairs     []time.Time
		pending     time.Time
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "no repair yet", window: 5 * time.Minute, now: 0, wantAllowed: true},
		{name: "inside window is pending since now", window: 5 * time.Minute, repairs: repairsAt(0), now: 2 * time.Minute,
			wantReason: "pending restart since 2026-11-29T19:02:00Z"},
		{name: "inside window keeps the first pending time", window: 5 * time.Minute, repairs: repairsAt(0), pending: at(time.Minute), now: 4 * time.Minute,
			wantReason: "pending restart since 2026-11-29T19:01:00Z"},
		{name: "window says when it may run", window: 5 * time.Minute, repairs: repairsAt(0), now: 4 * time.Minute,
			wantReason: "runs after 2026-11-29T19:05:00Z"},
		{name: "exactly at the end of the window", window: 5 * time.Minute, repairs: repairsAt(0), now: 5 * time.Minute, wantAllowed: true},
		{name: "after the window", window: 5 * time.Minute, repairs: repairsAt(0), now: 6 * time.Minute, wantAllowed: true},
		{name: "last repair counts, not the first", window: 5 * time.Minute, repairs: repairsAt(0, 10*time.Minute), now: 12 * time.Minute},
		{name: "zero window allows", window: 0, repairs: repairsAt(0), now: time.Second, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{Repairs: tt.repairs}
			if !tt.pending.IsZero() {
				u.Conditions = map[string]*Condition{"stuck": {PendingSince: tt.pending}}
			}
			s := Debounce{Window: tt.window, Clock: NewFakeClock(at(tt.now))}.Check(u, "stuck")
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusPending {
				t.Errorf("status = %q, want pending", s.Status)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	tests := []struct {
		name        string
		count       int
		window      time.Duration
		repairs     []time.Time
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "1 per 10m unused", count: 1, window: 10 * time.Minute, now: 0, wantAllowed: true},
		{name: "1 per 10m used 9m ago", count: 1, window: 10 * time.Minute, repairs: repairsAt(0), now: 9 * time.Minute,
			wantReason: "next allowed at 2026-11-29T19:10:00Z"},
		{name: "1 per 10m used exactly 10m ago slides out", count: 1, window: 10 * time.Minute, repairs: repairsAt(0), now: 10 * time.Minute, wantAllowed: true},
		{name: "3 per 1h with 2 inside", count: 3, window: time.Hour, repairs: repairsAt(0, 10*time.Minute), now: 20 * time.Minute, wantAllowed: true},
		{name: "3 per 1h with 3 inside", count: 3, window: time.Hour, repairs: repairsAt(0, 10*time.Minute, 20*time.Minute), now: 30 * time.Minute,
			wantReason: "3 of 3 per 1h used"},
		{name: "sliding: oldest left the window", count: 3, window: time.Hour, repairs: repairsAt(0, 10*time.Minute, 20*time.Minute), now: 61 * time.Minute, wantAllowed: true},
		{name: "no budget", count: 0, repairs: repairsAt(0, time.Second), now: 2 * time.Second, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Budget{Count: tt.count, Window: tt.window, Clock: NewFakeClock(at(tt.now))}.Check(&Unit{Repairs: tt.repairs})
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusBlocked {
				t.Errorf("status = %q, want blocked", s.Status)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestCrashLoop(t *testing.T) {
	every := func(n int, step time.Duration) []time.Time {
		var ts []time.Time
		for i := range n {
			ts = append(ts, at(time.Duration(i)*step))
		}
		return ts
	}
	tests := []struct {
		name        string
		repairs     []time.Time
		counter     *Counter
		now         time.Duration
		wantAllowed bool
		wantReason  string
	}{
		{name: "few repairs", repairs: every(2, time.Minute), now: 10 * time.Minute, wantAllowed: true},
		{name: "at the limit: the next would exceed it", repairs: every(3, time.Minute), now: 3 * time.Minute,
			wantReason: "3 restarts in the last 1h (repairs), max 3"},
		{name: "old repairs left the window", repairs: every(3, time.Minute), now: 62 * time.Minute, wantAllowed: true},
		{name: "external counter crashes count", counter: &Counter{Last: 7, Increments: []Sample{{At: at(10 * time.Minute), N: 2}, {At: at(20 * time.Minute), N: 1}}},
			now: 30 * time.Minute, wantReason: "3 restarts in the last 1h (restart counter)"},
		{name: "external increments outside the window", counter: &Counter{Last: 7, Increments: []Sample{{At: at(0), N: 5}}},
			now: 61 * time.Minute, wantAllowed: true},
		{name: "own repairs and counter are not added", repairs: every(2, time.Minute),
			counter: &Counter{Last: 2, Increments: []Sample{{At: at(0), N: 1}, {At: at(time.Minute), N: 1}}}, now: 5 * time.Minute, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{Repairs: tt.repairs, Restarts: tt.counter}
			s := CrashLoop{MaxRestarts: 3, Per: time.Hour, Clock: NewFakeClock(at(tt.now))}.Check(u)
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusAlert {
				t.Errorf("status = %q, want alert", s.Status)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestRestartCounterDeltas(t *testing.T) {
	clock := NewFakeClock(t0)
	c := NewChain(contracts.Guards{CrashLoop: contracts.CrashLoop{MaxRestarts: 5, Per: time.Hour}}, contracts.Schedule{}, clock)
	u := &Unit{}
	// pm2 restarts read each run: baseline 40, then +2, +0, a reset to 1, +3.
	for _, v := range []int64{40, 42, 42, 1, 4} {
		c.RecordRestartCounter(u, v)
		clock.Advance(10 * time.Minute)
	}
	crash := CrashLoop{MaxRestarts: 5, Per: time.Hour, Clock: clock}
	if n, src := crash.Count(u); n != 6 || src != "restart counter" {
		t.Fatalf("count = %d (%s), want 6 from the restart counter (2 + reset to 1 + 3)", n, src)
	}
	if s := crash.Check(u); s.Allowed {
		t.Errorf("6 restarts with max 5 allowed: %s", s)
	}
	clock.Advance(time.Hour)
	c.RecordRestartCounter(u, 4)
	if n, _ := crash.Count(u); n != 0 {
		t.Errorf("an hour later count = %d, want 0", n)
	}
}

func TestTiers(t *testing.T) {
	tests := []struct {
		name        string
		cond        *Condition
		after       int
		wantAllowed bool
		wantReason  string
	}{
		{name: "never repaired", after: 3, wantAllowed: true, wantReason: "no failed repairs"},
		{name: "two failed repairs of three", cond: &Condition{FailedRepairs: 2}, after: 3, wantAllowed: true, wantReason: "2 of 3 failed repairs before escalating"},
		{name: "three failed repairs", cond: &Condition{FailedRepairs: 3}, after: 3, wantReason: "escalate: 3 repairs did not clear stuck (limit 3)"},
		{name: "escalated stays escalated", cond: &Condition{Escalated: true}, after: 3},
		{name: "zero never escalates by count", cond: &Condition{FailedRepairs: 50}, after: 0, wantAllowed: true, wantReason: "50 failed repairs; no escalation limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Unit{}
			if tt.cond != nil {
				u.Conditions = map[string]*Condition{"stuck": tt.cond}
			}
			s := Tiers{EscalateAfter: tt.after, Clock: NewFakeClock(t0)}.Check(u, "stuck")
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != StatusEscalate {
				t.Errorf("status = %q, want escalate", s.Status)
			}
			if tt.wantReason != "" && s.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestPickTier(t *testing.T) {
	tests := []struct {
		name     string
		tiers    []int
		attempts int
		want     int
	}{
		{name: "first attempt takes tier 1", tiers: []int{1, 2, 3}, attempts: 0, want: 0},
		{name: "second attempt takes tier 2", tiers: []int{1, 2, 3}, attempts: 1, want: 1},
		{name: "past the last tier stays on it", tiers: []int{1, 2, 3}, attempts: 7, want: 2},
		{name: "order of rows does not matter", tiers: []int{3, 1, 2}, attempts: 1, want: 2},
		{name: "a gap in the numbering is only an order", tiers: []int{1, 3}, attempts: 1, want: 1},
		{name: "untiered single row", tiers: []int{0}, attempts: 4, want: 0},
		{name: "no rows", tiers: nil, attempts: 0, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PickTier(tt.tiers, tt.attempts); got != tt.want {
				t.Errorf("PickTier(%v, %d) = %d, want %d", tt.tiers, tt.attempts, got, tt.want)
			}
		})
	}
}

func TestGrace(t *testing.T) {
	tests := []struct {
		name        string
		until       time.Time
		now         time.Duration
		wantAllowed bool
	}{
		{name: "no grace", now: 0, wantAllowed: true},
		{name: "inside grace", until: at(30 * time.Second), now: 10 * time.Second},
		{name: "grace over", until: at(30 * time.Second), now: 30 * time.Second, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Grace{Clock: NewFakeClock(at(tt.now))}.Check(&Unit{GraceUntil: tt.until})
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
		})
	}
}

func TestSeverityGuard(t *testing.T) {
	for _, tt := range []struct {
		sev  contracts.Severity
		want bool
	}{
		{contracts.SeverityUnknown, false},
		{contracts.SeveritySkipped, false},
		{contracts.SeverityHealthy, true},
		{contracts.SeverityDegraded, true},
		{contracts.SeverityCritical, true},
		{contracts.SeverityUnreachable, true},
	} {
		t.Run(tt.sev.String(), func(t *testing.T) {
			if got := (KnownSeverity{}).Check(tt.sev).Allowed; got != tt.want {
				t.Errorf("allowed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoffAndHoldDown(t *testing.T) {
	for _, tt := range []struct {
		failures int
		want     time.Duration
	}{{0, 15 * time.Minute}, {1, 15 * time.Minute}, {2, 30 * time.Minute}, {3, time.Hour}, {9, time.Hour}} {
		if got := Backoff(15*time.Minute, tt.failures, 0); got != tt.want {
			t.Errorf("Backoff(15m, %d) = %s, want %s", tt.failures, got, tt.want)
		}
	}

	h := HoldDown{Clock: NewFakeClock(t0)}
	s := &Scheduler{}
	var alerts []int
	errRun := errorString("engine: run past its deadline")
	for i, err := range []error{errRun, nil, errRun, errRun, errRun, errRun, nil, errRun} {
		if h.Record(s, err) {
			alerts = append(alerts, i)
		}
	}
	if len(alerts) != 1 || alerts[0] != 4 {
		t.Fatalf("hold-down alerts at runs %v, want exactly one at run 4 (third consecutive failure)", alerts)
	}
	if !s.HeldDown || s.HeldSince != t0 {
		t.Fatalf("not held down: %+v", s)
	}
	Release(s)
	if s.HeldDown || s.Alerted || s.ConsecutiveFailed != 0 {
		t.Fatalf("release left %+v", s)
	}
	for range 3 {
		h.Record(s, errRun)
	}
	if !s.HeldDown || !s.Alerted {
		t.Errorf("a new hold-down after release did not alert: %+v", s)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestBlastRadius(t *testing.T) {
	tests := []struct {
		name        string
		b           BlastRadius
		fleet       Fleet
		wantAllowed bool
		wantStatus  string
		wantReason  string
	}{
		{name: "zero allows everything", fleet: Fleet{Units: 8, Failing: 8, Repairs: 50}, wantAllowed: true},
		{name: "under the cap", b: BlastRadius{MaxRepairs: 2}, fleet: Fleet{Units: 8, Failing: 3, Repairs: 1}, wantAllowed: true},
		{name: "cap reached waits for the next run", b: BlastRadius{MaxRepairs: 2}, fleet: Fleet{Units: 8, Failing: 3, Repairs: 2},
			wantStatus: StatusPending, wantReason: "2 repairs already ran this run (max 2 per run)"},
		{name: "every unit failing at once opens the breaker", b: BlastRadius{Trip: 1}, fleet: Fleet{Units: 4, Failing: 4},
			wantStatus: StatusAlert, wantReason: "circuit open: 4 of 4 units failing at once"},
		{name: "three of four is below a full trip", b: BlastRadius{Trip: 1}, fleet: Fleet{Units: 4, Failing: 3}, wantAllowed: true},
		{name: "half trips at half", b: BlastRadius{Trip: 0.5}, fleet: Fleet{Units: 8, Failing: 4}, wantStatus: StatusAlert},
		{name: "a single unit never trips", b: BlastRadius{Trip: 1}, fleet: Fleet{Units: 1, Failing: 1}, wantAllowed: true},
		{name: "min units respected", b: BlastRadius{Trip: 1, MinUnits: 5}, fleet: Fleet{Units: 4, Failing: 4}, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.Clock = NewFakeClock(t0)
			s := tt.b.Check(tt.fleet)
			if s.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%s)", s.Allowed, tt.wantAllowed, s)
			}
			if !s.Allowed && s.Status != tt.wantStatus {
				t.Errorf("status = %q, want %q", s.Status, tt.wantStatus)
			}
			if !strings.Contains(s.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", s.Reason, tt.wantReason)
			}
		})
	}
}
