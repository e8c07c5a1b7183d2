package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
)

// amStandIn is an Alertmanager API on loopback: it records each POST to
// /api/v2/alerts and answers with status.
type amStandIn struct {
	mu     sync.Mutex
	posts  [][]notify.PostableAlert
	status int
	srv    *httptest.Server
}

func newAMStandIn(t *testing.T) *amStandIn {
	a := &amStandIn{status: http.StatusOK}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var alerts []notify.PostableAlert
		if r.URL.Path != "/api/v2/alerts" || json.Unmarshal(b, &alerts) != nil {
			http.Error(w, "not a list of alerts", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.posts = append(a.posts, alerts)
		if a.status != http.StatusOK {
			http.Error(w, "refused", a.status)
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// take returns the posts since the last take.
func (a *amStandIn) take() [][]notify.PostableAlert {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.posts
	a.posts = nil
	return p
}

func (a *amStandIn) answer(status int) {
	a.mu.Lock()
	a.status = status
	a.mu.Unlock()
}

// An incident reaches the alertmanager route as one alert that each run
// and each Resend posts again while it is open, with the text of its last
// message, and that its resolve ends with the labels it opened with.
func TestAlertmanagerRouteThroughRunsAndResends(t *testing.T) {
	h := newHarness(t)
	am := newAMStandIn(t)
	route, err := contracts.NewNotifyRoute("alertmanager", "am", map[string]string{"url": am.srv.URL, "retries": "0"})
	if err != nil {
		t.Fatal(err)
	}
	h.c.Notify = []contracts.NotifyRoute{route}
	eng, err := New(Options{StateDir: h.dir, Opener: h.w.opener, Clock: h.clock, NotifyDeps: notify.Deps{Clock: h.clock},
		Sleep: func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := eng.ResendEvery(h.c); got != time.Minute {
		t.Fatalf("ResendEvery = %s, want the route's default 1m", got)
	}
	run := func() *Report {
		t.Helper()
		rep, err := eng.Run(t.Context(), h.c)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	koby := func(posts [][]notify.PostableAlert) []notify.PostableAlert {
		var out []notify.PostableAlert
		for _, p := range posts {
			for _, a := range p {
				if a.Labels["agent"] == "koby" {
					out = append(out, a)
				}
			}
		}
		return out
	}

	h.w.set(func(w *world) { w.koby["stuck"] = true })
	run()
	opened := h.clock.Now()
	got := koby(am.take())
	if len(got) != 2 {
		t.Fatalf("first run posted %d alerts for koby, want the open and the run's resend: %+v", len(got), got)
	}
	want := map[string]string{"alertname": "ContractdIncident", "contract": "mesh", "agent": "koby", "condition": "critical", "severity": "critical"}
	for _, a := range got {
		if !sameLabels(a.Labels, want) || !a.StartsAt.Equal(opened) || !a.EndsAt.After(opened) || !strings.Contains(a.Annotations["summary"], "koby is critical") {
			t.Fatalf("alert %+v, want labels %v firing since %s", a, want, opened)
		}
	}

	// Between runs, Resend posts it again: still since the open, ending
	// 4 × resend after now.
	h.clock.Advance(time.Minute)
	rs, err := eng.Resend(t.Context(), h.c)
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].Incidents == 0 {
		t.Fatalf("Resend: %+v, %v", rs, err)
	}
	if got = koby(am.take()); len(got) != 1 || !got[0].StartsAt.Equal(opened) || !got[0].EndsAt.Equal(h.clock.Now().Add(4*time.Minute)) {
		t.Fatalf("resend posted %+v", got)
	}

	// A run holds the lock: Resend leaves the incidents to it.
	st, err := store.Open(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock(t.Context(), h.c.Name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Resend(t.Context(), h.c); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Resend under a run's lock: %v, want ErrLocked", err)
	}
	unlock()
	if p := am.take(); len(p) != 0 {
		t.Fatalf("Resend under a run's lock posted %d times", len(p))
	}

	// A refused resend is New once, kept in the ledger, then a repeat;
	// when it works again it says so.
	am.answer(http.StatusBadRequest)
	for i, wantNew := range []bool{true, false} {
		rs, err := eng.Resend(t.Context(), h.c)
		if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, notify.ErrRejected) || rs[0].New != wantNew {
			t.Fatalf("refused resend %d: %+v, %v; want New %v", i, rs, err, wantNew)
		}
	}
	l, err := ReadLedger(st, h.c.Name)
	if err != nil || !strings.Contains(l.ResendErrors["am"], "400 Bad Request") {
		t.Fatalf("ledger's resend errors %v (%v)", l.ResendErrors, err)
	}
	rep := run()
	for _, e := range rep.Errors {
		if strings.Contains(e, "resend") {
			t.Fatalf("the run reported the same refusal again: %q", rep.Errors)
		}
	}
	am.answer(http.StatusOK)
	if rs, err := eng.Resend(t.Context(), h.c); err != nil || !rs[0].Recovered || rs[0].Err != nil {
		t.Fatalf("resend after the fix: %+v, %v", rs, err)
	}
	am.take()

	// koby heals: the resolve ends the same alert, labelled with the
	// severity it opened with; nothing is open to resend after it.
	h.w.set(func(w *world) { w.koby["stuck"] = false })
	h.clock.Advance(15 * time.Minute)
	run()
	resolvedAt := h.clock.Now()
	got = koby(am.take())
	if len(got) != 1 || !sameLabels(got[0].Labels, want) || !got[0].StartsAt.Equal(opened) || got[0].EndsAt.After(resolvedAt) {
		t.Fatalf("resolve posted %+v, want labels %v ended by %s", got, want, resolvedAt)
	}
	if _, err := eng.Resend(t.Context(), h.c); err != nil {
		t.Fatal(err)
	}
	if got = koby(am.take()); len(got) != 0 {
		t.Fatalf("a resolved incident was posted again: %+v", got)
	}
}

func sameLabels(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
