package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/clock"
)

func TestSenderQueuesAndRetriesNextRun(t *testing.T) {
	rec := newRecorder(t, "", 503)
	hook, err := build("webhook", map[string]string{"url": rec.srv.URL, "retries": "0", "format": "text"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	clock := clock.NewFake(msgTime)
	s := Sender{Notifiers: []Notifier{NewLog(&logBuf), hook}, Clock: clock}
	msg := func(text string) Message { m := testMessage(); m.Text = text; return m }

	// Run 1: the webhook is down. The log still gets both messages; the
	// webhook is tried once, and the second message is queued untried.
	var out Outbox
	ds := s.Send(t.Context(), &out, msg("one"), msg("two"))
	if got := summarize(ds); got != "log:one:ok log:two:ok webhook:one:queued webhook:two:queued" {
		t.Fatalf("run 1: %s", got)
	}
	if n := len(rec.requests()); n != 1 {
		t.Errorf("webhook tried %d times, want once per run", n)
	}
	if !strings.Contains(ds[3].Err.Error(), "not tried: webhook failed earlier in this run") {
		t.Errorf("second message error: %v", ds[3].Err)
	}
	if strings.Count(logBuf.String(), "\n") != 2 {
		t.Errorf("log got %q", logBuf.String())
	}

	// The outbox survives a restart: it is JSON in the ledger.
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var reloaded Outbox
	if err := json.Unmarshal(b, &reloaded); err != nil {
		t.Fatal(err)
	}

	// Run 2: the webhook is back. Queued messages go first, in order, then
	// this run's message.
	rec.mu.Lock()
	rec.statuses = []int{200}
	rec.reqs = nil
	rec.mu.Unlock()
	clock.Advance(15 * time.Minute)
	ds = s.Send(t.Context(), &reloaded, msg("three"))
	if got := summarize(ds); got != "log:three:ok webhook:one:retried webhook:two:retried webhook:three:ok" {
		t.Fatalf("run 2: %s", got)
	}
	var texts []string
	for _, r := range rec.requests() {
		texts = append(texts, string(r.body))
	}
	if got := strings.Join(texts, ","); !strings.Contains(got, `one"},{"text":"zulip-health: two"},{"text":"zulip-health: three"}`) {
		t.Errorf("webhook received %s", got)
	}
	if len(reloaded.Queue) != 0 {
		t.Errorf("outbox kept %d messages after delivery", len(reloaded.Queue))
	}
}

func TestSenderDropsAfterMaxAttemptsAndAge(t *testing.T) {
	rec := newRecorder(t, "", 500)
	hook, err := build("webhook", map[string]string{"url": rec.srv.URL, "retries": "0"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	clock := clock.NewFake(msgTime)
	s := Sender{Notifiers: []Notifier{hook}, Clock: clock, MaxAttempts: 3}
	var out Outbox
	var got []string
	got = append(got, summarize(s.Send(t.Context(), &out, testMessage())))
	for range 3 {
		clock.Advance(time.Minute)
		got = append(got, summarize(s.Send(t.Context(), &out)))
	}
	if strings.Join(got, " | ") != "webhook:restarted:queued | webhook:restarted:queued-retry | webhook:restarted:dropped | " {
		t.Errorf("runs: %s", strings.Join(got, " | "))
	}

	// Age: a message older than MaxAge is dropped even with attempts left.
	s.MaxAttempts, s.MaxAge = 100, time.Hour
	out = Outbox{}
	s.Send(t.Context(), &out, testMessage())
	clock.Advance(2 * time.Hour)
	if got := summarize(s.Send(t.Context(), &out)); got != "webhook:restarted:dropped" {
		t.Errorf("old message: %s", got)
	}

	// A notifier removed from the contract: its queue is dropped.
	out = Outbox{Queue: []Queued{{Notifier: "pager", Message: testMessage(), Attempts: 1, Since: msgTime}}}
	ds := s.Send(t.Context(), &out)
	if len(ds) != 1 || ds[0].Outcome != OutcomeDropped || ds[0].Err.Error() != "route pager is no longer configured" || len(out.Queue) != 0 {
		t.Errorf("removed notifier: %+v queue %v", ds, out.Queue)
	}
}

// A route that keeps failing backs off in proportion to its outage: it is
// tried on the next run after its first failure, then waits a quarter of
// the time it has been failing, at most RetryMax, while the other routes
// deliver every run and its new messages queue behind, in order.
func TestSenderBacksOffPerRoute(t *testing.T) {
	rec := newRecorder(t, "", 503)
	hook, err := build("webhook", map[string]string{"url": rec.srv.URL, "retries": "0"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	clock := clock.NewFake(msgTime)
	s := Sender{Notifiers: []Notifier{NewLog(&logBuf), hook}, Clock: clock, RetryMax: 20 * time.Minute}
	var out Outbox
	tries := func() int { return len(rec.requests()) }

	steps := []struct {
		at        time.Duration // since the first failure
		wantTries int           // webhook requests so far
		wantNext  time.Duration // the route's next attempt, since the first failure
	}{
		{0, 1, 0},                             // first failure: retry on the next run
		{4 * time.Minute, 2, 5 * time.Minute}, // failing 4m: wait 1m
		{4*time.Minute + 30*time.Second, 2, 5 * time.Minute}, // inside the wait: not tried
		{8 * time.Minute, 3, 10 * time.Minute},               // failing 8m: wait 2m
		{60 * time.Minute, 4, 75 * time.Minute},              // failing 1h: wait 15m
		{120 * time.Minute, 5, 140 * time.Minute},            // failing 2h: capped at 20m
	}
	for i, st := range steps {
		clock.Set(msgTime.Add(st.at))
		ds := s.Send(t.Context(), &out, testMessage())
		if got := tries(); got != st.wantTries {
			t.Fatalf("step %d: webhook tried %d times in all, want %d", i, got, st.wantTries)
		}
		if ds[0].Route != "log" || ds[0].Outcome != OutcomeDelivered {
			t.Fatalf("step %d: the log route did not deliver: %+v", i, ds[0])
		}
		if len(out.Queue) != i+1 {
			t.Fatalf("step %d: %d queued, want %d (every run's message waits in order)", i, len(out.Queue), i+1)
		}
		if got := out.Queue[0].Next.Sub(msgTime); got != st.wantNext {
			t.Errorf("step %d: next attempt at +%s, want +%s", i, got, st.wantNext)
		}
		for _, d := range ds[1:] {
			if d.Outcome != OutcomeQueued || d.Next != out.Queue[0].Next {
				t.Errorf("step %d: %+v, want queued until the route's next attempt", i, d)
			}
		}
	}
	// Inside the wait every message is queued untried, and says why.
	clock.Set(msgTime.Add(130 * time.Minute))
	for _, d := range s.Send(t.Context(), &out) {
		if d.Tried || d.Outcome != OutcomeQueued || !strings.Contains(d.Err.Error(), "backing off until") {
			t.Fatalf("inside the backoff: %+v", d)
		}
	}
	// Once the route answers, its queue drains in order at the next attempt.
	rec.mu.Lock()
	rec.statuses = []int{200}
	rec.mu.Unlock()
	clock.Set(msgTime.Add(140 * time.Minute))
	ds := s.Send(t.Context(), &out)
	if len(ds) != 6 || len(out.Queue) != 0 {
		t.Fatalf("after recovery: %d deliveries, %d still queued", len(ds), len(out.Queue))
	}
	for _, d := range ds {
		if d.Outcome != OutcomeDelivered || !d.Retry() || !d.ReachedBefore {
			t.Errorf("after recovery: %+v", d)
		}
	}
}

// summarize renders deliveries as route:first-word-of-text:outcome, with
// "retried" for a message from the outbox delivered and "queued-retry" for
// one queued again.
func summarize(ds []Delivery) string {
	var parts []string
	for _, d := range ds {
		outcome := "ok"
		switch {
		case d.Outcome == OutcomeDelivered && d.Retry():
			outcome = "retried"
		case d.Outcome == OutcomeDropped:
			outcome = "dropped"
		case d.Outcome == OutcomeQueued && d.Retry():
			outcome = "queued-retry"
		case d.Outcome == OutcomeQueued:
			outcome = "queued"
		}
		parts = append(parts, fmt.Sprintf("%s:%s:%s", d.Route, strings.Fields(d.Message.Text)[0], outcome))
	}
	return strings.Join(parts, " ")
}

// panicky is a notifier with a bug.
type panicky struct{}

func (panicky) Name() string                          { return "panicky" }
func (panicky) Notify(context.Context, Message) error { panic("injected fault") }

// A notifier that panics fails its own delivery, typed, with its stack;
// the message is queued for it, and every other route still delivers.
func TestSenderSurvivesANotifierThatPanics(t *testing.T) {
	var logBuf bytes.Buffer
	s := Sender{Notifiers: []Notifier{panicky{}, NewLog(&logBuf)}, Clock: clock.NewFake(msgTime)}
	var out Outbox
	ds := s.Send(t.Context(), &out, testMessage())
	if got := summarize(ds); got != "panicky:restarted:queued log:restarted:ok" {
		t.Fatalf("deliveries: %s", got)
	}
	var p *PanicError
	if !errors.As(ds[0].Err, &p) || p.Route != "panicky" || p.Value != "injected fault" || !strings.Contains(string(p.Stack), "panicky.Notify") {
		t.Errorf("panicky's error %v; want a PanicError with the notifier's stack", ds[0].Err)
	}
	if len(out.Queue) != 1 || out.Queue[0].Notifier != "panicky" {
		t.Errorf("outbox %+v; want the message queued for the notifier that panicked", out.Queue)
	}
	if logBuf.Len() == 0 {
		t.Error("the log route got nothing")
	}
}
