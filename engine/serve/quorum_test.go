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

// The watch's questions, simulated against a cluster given by when it
// answers, with the watch's own decision (answer) and pacing (next): a
// question put at t is answered at the first moment in [t, t+probe] the
// cluster answers, else it fails at t+probe.
func simulateWatch(ttl, length time.Duration, answers func(at time.Duration) bool) (downAt time.Duration, down bool) {
	probe, tick, downAfter := ttl/5, ttl/10, ttl*6/10
	q := questions{probe: probe, tick: tick, downAfter: downAfter}
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	last, up := t0, true
	for at := time.Duration(0); at < length; {
		var err error = context.DeadlineExceeded
		took := probe
		for d := time.Duration(0); d <= probe; d += 10 * time.Millisecond {
			if answers(at + d) {
				err, took = nil, d
				break
			}
		}
		began := t0.Add(at)
		ended := began.Add(took)
		var late bool
		up, late = q.answer(up, last, err, began, ended)
		if err == nil {
			last = ended
		}
		if !up {
			return at + took, true
		}
		at += took + q.next(err, late, began, ended)
	}
	return 0, false
}

// A cluster whose leader is killed over and over (an election of 0.9 s,
// then 0.3 s of answers, again and again) is reachable: the watch's
// questions follow one another while it is silent, so two of them cannot
// both fall into elections while it answers in between (spaced a tick
// apart, they did, at TTL 4 s: TestHAEtcdLeaderKilledTenTimesFencesNoRun
// saw an instance call it unreachable while etcd answered others). Quorum
// lost is still said within 0.9 × TTL.
func TestQuorumWatchCallsAFlappingClusterReachable(t *testing.T) {
	const ttl = 4 * time.Second
	for _, phase := range []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond, 400 * time.Millisecond, 700 * time.Millisecond, 1100 * time.Millisecond} {
		flapping := func(at time.Duration) bool {
			return (at+phase)%(1200*time.Millisecond) >= 900*time.Millisecond
		}
		if at, down := simulateWatch(ttl, time.Minute, flapping); down {
			t.Errorf("phase %s: called unreachable at %s, though the cluster answers 0.3 s of every 1.2 s", phase, at)
		}
	}
	lost := 10 * time.Second
	for _, phase := range []time.Duration{0, 150 * time.Millisecond, 333 * time.Millisecond} {
		quorumLost := func(at time.Duration) bool { return at+phase < lost }
		at, down := simulateWatch(ttl, time.Minute, quorumLost)
		if !down || at-(lost-phase) > ttl*9/10 {
			t.Errorf("phase %s: quorum lost at %s: down %v at %s, want down within %s", phase, lost-phase, down, at, ttl*9/10)
		}
	}
}
