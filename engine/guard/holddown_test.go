package guard

import (
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

func TestBackoffAndHoldDown(t *testing.T) {
	for _, tt := range []struct {
		failures int
		want     time.Duration
	}{{0, 15 * time.Minute}, {1, 15 * time.Minute}, {2, 30 * time.Minute}, {3, time.Hour}, {9, time.Hour}} {
		if got := Backoff(15*time.Minute, tt.failures, 0); got != tt.want {
			t.Errorf("Backoff(15m, %d) = %s, want %s", tt.failures, got, tt.want)
		}
	}

	h := HoldDown{Clock: clock.NewFake(t0)}
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
