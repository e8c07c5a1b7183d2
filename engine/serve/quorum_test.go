package serve

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The watch calls etcd unreachable from silence it found itself: a
// machine so loaded that this process was not scheduled for seconds (its
// questions' deadlines fired late) is not an etcd that went quiet. The
// real quorum loss is TestHAEtcdMemberLossAndQuorumLoss (cmd/contractd).
func TestQuorumWatchDiscountsQuestionsThatEndedLate(t *testing.T) {
	const ttl = 3 * time.Second
	probe, tick, downAfter := ttl/5, ttl/10, ttl*6/10
	silent := context.DeadlineExceeded
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

	type question struct {
		err       error
		at, took  time.Duration // put at t0+at, ended took later
		wantUp    bool
		wantLate  bool
		narration string
	}
	cases := []struct {
		name      string
		questions []question
	}{
		{"a descheduled process's questions never call etcd down", []question{
			{nil, 0, 10 * time.Millisecond, true, false, "answered"},
			// Stopped for 2.5 s mid-question: its deadline fired 2.5 s late.
			{silent, 300 * time.Millisecond, 2500 * time.Millisecond, true, true, "late"},
			{silent, 3 * time.Second, 3 * time.Second, true, true, "late again"},
			{nil, 6300 * time.Millisecond, 20 * time.Millisecond, true, false, "answered"},
		}},
		{"silence found by questions put in time calls it down", []question{
			{nil, 0, 10 * time.Millisecond, true, false, "answered"},
			{silent, 300 * time.Millisecond, probe, true, false, "one unanswered"},
			{silent, 300*time.Millisecond + probe + tick, probe, true, false, "two, silence 1.5 s < downAfter"},
			{silent, 300*time.Millisecond + 2*(probe+tick), probe, false, false, "three, silence 2.1 s"},
			{nil, 5 * time.Second, 10 * time.Millisecond, true, false, "answered again"},
		}},
		{"one slow question after a stall is not enough", []question{
			{nil, 0, 10 * time.Millisecond, true, false, "answered"},
			// Starved between questions (a long sleep), then one question in time fails.
			{silent, 2500 * time.Millisecond, probe, true, false, "one unanswered after 3 s of silence"},
			{nil, 2500*time.Millisecond + probe + tick, 10 * time.Millisecond, true, false, "answered"},
		}},
		{"a leaderless member answers at once and still counts", []question{
			{nil, 0, 10 * time.Millisecond, true, false, "answered"},
			{errors.New("etcdserver: no leader"), downAfter, 5 * time.Millisecond, true, false, "no leader"},
			{errors.New("etcdserver: no leader"), downAfter + tick, 5 * time.Millisecond, false, false, "no leader, twice"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := questions{probe: probe, tick: tick, downAfter: downAfter}
			last := t0
			up := true
			for i, x := range c.questions {
				began := t0.Add(x.at)
				var late bool
				up, late = q.answer(up, last, x.err, began, began.Add(x.took))
				if x.err == nil {
					last = began.Add(x.took)
				}
				if up != x.wantUp || late != x.wantLate {
					t.Fatalf("question %d (%s): reached %v late %v, want reached %v late %v", i, x.narration, up, late, x.wantUp, x.wantLate)
				}
			}
		})
	}
}
