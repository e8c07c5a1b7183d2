package notify

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
)

// buildAM builds an alertmanager route from options as a contract writes
// them (urls a list, labels a mapping), sending at now.
func buildAM(t *testing.T, opts map[string]any, now time.Time, getenv func(string) string) *Alertmanager {
	t.Helper()
	if _, set := opts["retries"]; !set {
		opts["retries"], opts["backoff"] = "0", "10ms"
	}
	r, err := contracts.NewNotifyRouteOptions("alertmanager", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(r, Deps{Clock: clock.NewFake(now), PageURL: "http://contractd.example:9464/", Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	return n.(*Alertmanager)
}

func posted(t *testing.T, r recorded) []PostableAlert {
	t.Helper()
	var alerts []PostableAlert
	if err := json.Unmarshal(r.body, &alerts); err != nil {
		t.Fatalf("posted %s: %v", r.body, err)
	}
	if r.method != http.MethodPost || r.path != "/prefix/api/v2/alerts" || r.ctype != "application/json" {
		t.Fatalf("%s %s (%s), want POST /prefix/api/v2/alerts as JSON", r.method, r.path, r.ctype)
	}
	return alerts
}

// An incident opens firing, with the severity it opened with, and its
// resolve ends the same alert (same labels) at the time it resolved.
func TestAlertmanagerOpensAndResolvesOneAlert(t *testing.T) {
	rec := newRecorder(t, "")
	opened := msgTime
	sent := opened.Add(30 * time.Second)
	am := buildAM(t, map[string]any{"url": rec.srv.URL + "/prefix/", "labels": map[string]string{"team": "ops"}, "resend": "20s"}, sent, nil)
	open := Message{Contract: "zulip-health", Agent: "abiba", Condition: "retry_count >= 3", Kind: KindOpen, Severity: "degraded",
		IncidentSeverity: "degraded", OpenedAt: opened, Text: "abiba is degraded: retry_count 4", Time: opened}
	resolved := open
	resolved.Kind, resolved.Severity, resolved.Text, resolved.Time = KindResolved, "healthy", "abiba: retry_count >= 3 cleared (now healthy)", opened.Add(5*time.Minute)
	for _, m := range []Message{open, resolved} {
		if err := am.Notify(t.Context(), m); err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
	}
	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d posts, want 2", len(reqs))
	}
	labels := map[string]string{"alertname": "ContractdIncident", "team": "ops", "contract": "zulip-health", "agent": "abiba",
		"condition": "retry_count >= 3", "severity": "degraded"}
	cases := []struct {
		name             string
		alert            PostableAlert
		summary          string
		startsAt, endsAt time.Time
	}{
		{"open", posted(t, reqs[0])[0], open.Text, opened, sent.Add(80 * time.Second)},
		{"resolve", posted(t, reqs[1])[0], resolved.Text, opened, resolved.Time},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.alert
			if !reflect.DeepEqual(a.Labels, labels) {
				t.Errorf("labels %v, want %v", a.Labels, labels)
			}
			if a.Annotations["summary"] != tc.summary || !a.StartsAt.Equal(tc.startsAt) || !a.EndsAt.Equal(tc.endsAt) {
				t.Errorf("summary %q, %s – %s; want %q, %s – %s", a.Annotations["summary"], a.StartsAt, a.EndsAt, tc.summary, tc.startsAt, tc.endsAt)
			}
			if a.GeneratorURL != "http://contractd.example:9464/c/zulip-health" {
				t.Errorf("generatorURL %q", a.GeneratorURL)
			}
		})
	}
}

func TestAlertmanagerPostsNoRepairNews(t *testing.T) {
	rec := newRecorder(t, "")
	am := buildAM(t, map[string]any{"url": rec.srv.URL + "/prefix"}, msgTime, nil)
	if err := am.Notify(t.Context(), testMessage()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.requests()); n != 0 {
		t.Fatalf("a repair message made %d posts, want none", n)
	}
}

// A hold-down (no incident, no condition) is posted as an alert of its
// own kind that ends after 4 × resend.
func TestAlertmanagerHoldDownEndsByItself(t *testing.T) {
	rec := newRecorder(t, "")
	am := buildAM(t, map[string]any{"url": rec.srv.URL + "/prefix"}, msgTime, nil)
	m := Message{Contract: "zulip-health", Kind: KindHoldDown, Severity: "critical", Text: "held down after 3 consecutive failed runs", Time: msgTime}
	if err := am.Notify(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	a := posted(t, rec.requests()[0])[0]
	want := map[string]string{"alertname": "ContractdIncident", "contract": "zulip-health", "condition": "holddown", "severity": "critical"}
	if !reflect.DeepEqual(a.Labels, want) || !a.EndsAt.Equal(msgTime.Add(4*time.Minute)) {
		t.Fatalf("labels %v ending %s; want %v ending 4m later", a.Labels, a.EndsAt, want)
	}
}

// Refresh posts every open incident in one request, firing from when it
// opened until 4 × resend from now; with none it posts nothing.
func TestAlertmanagerRefresh(t *testing.T) {
	rec := newRecorder(t, "")
	now := msgTime.Add(time.Hour)
	am := buildAM(t, map[string]any{"url": rec.srv.URL + "/prefix"}, now, nil)
	if err := am.Refresh(t.Context(), nil); err != nil || len(rec.requests()) != 0 {
		t.Fatalf("nothing open: %v, %d posts", err, len(rec.requests()))
	}
	open := []Message{
		{Contract: "c", Agent: "a", Condition: "critical", Severity: "critical", IncidentSeverity: "critical", OpenedAt: msgTime, Text: "a is critical"},
		{Contract: "c", Agent: "*", Condition: "circuit open", Severity: "critical", IncidentSeverity: "critical", OpenedAt: msgTime, Text: "circuit open"},
	}
	if err := am.Refresh(t.Context(), open); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d posts, want 1", len(reqs))
	}
	alerts := posted(t, reqs[0])
	if len(alerts) != 2 {
		t.Fatalf("%d alerts, want 2", len(alerts))
	}
	for i, a := range alerts {
		if a.Labels["agent"] != open[i].Agent || !a.StartsAt.Equal(msgTime) || !a.EndsAt.Equal(now.Add(4*time.Minute)) || a.Annotations["summary"] != open[i].Text {
			t.Errorf("alert %d: %+v", i, a)
		}
	}
}

// closedURL is an http URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/prefix"
}

// Failures: a 4xx is a configuration error (ErrRejected, never retried);
// transport errors and 5xx are retried and then fail plainly; of an HA
// pair, one that takes the alert is enough for Notify while Refresh names
// the one that did not.
func TestAlertmanagerFailures(t *testing.T) {
	open := Message{Contract: "c", Agent: "a", Condition: "critical", Kind: KindOpen, Severity: "critical", IncidentSeverity: "critical", OpenedAt: msgTime, Time: msgTime, Text: "a is critical"}
	cases := []struct {
		name       string
		statuses   [][]int // per Alertmanager; nil is one nothing listens on
		retries    string
		notifyErr  string // "" for delivered
		rejected   bool
		refreshErr string
		posts      int // requests the recorders got in all
	}{
		{"400 is refused at once", [][]int{{400}}, "2", "400 Bad Request: {\"code\":400,\"message\":\"json: cannot unmarshal", true, "400 Bad Request", 2},
		{"503 is retried, then fails", [][]int{{503}}, "1", "503 Service Unavailable", false, "503", 4},
		{"503 then 200 is delivered", [][]int{{503, 200}}, "1", "", false, "", 3},
		{"pair: one down", [][]int{nil, {200}}, "0", "", false, "connection refused", 2},
		{"pair: one refuses", [][]int{{400}, {200}}, "0", "", false, "400 Bad Request", 4},
		{"pair: both refuse", [][]int{{404}, {400}}, "0", "404 Not Found", true, "404 Not Found", 4},
		{"pair: one refuses, one down", [][]int{{400}, nil}, "0", "connection refused", false, "connection refused", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var urls []string
			var recs []*recorder
			for _, st := range tc.statuses {
				if st == nil {
					urls = append(urls, closedURL(t))
					continue
				}
				r := newRecorder(t, `{"code":400,"message":"json: cannot unmarshal object into Go value of type models.PostableAlerts"}`, st...)
				recs = append(recs, r)
				urls = append(urls, r.srv.URL+"/prefix")
			}
			am := buildAM(t, map[string]any{"urls": urls, "retries": tc.retries, "backoff": "1ms"}, msgTime, nil)
			err := am.Notify(t.Context(), open)
			switch {
			case tc.notifyErr == "" && err != nil:
				t.Fatalf("Notify: %v, want delivered", err)
			case tc.notifyErr != "" && (err == nil || !strings.Contains(err.Error(), tc.notifyErr)):
				t.Fatalf("Notify: %v, want %q", err, tc.notifyErr)
			case errors.Is(err, ErrRejected) != tc.rejected:
				t.Fatalf("Notify: %v; rejected %v, want %v", err, errors.Is(err, ErrRejected), tc.rejected)
			}
			err = am.Refresh(t.Context(), []Message{open})
			if (tc.refreshErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.refreshErr) {
				t.Fatalf("Refresh: %v, want %q", err, tc.refreshErr)
			}
			n := 0
			for _, r := range recs {
				n += len(r.requests())
			}
			if n != tc.posts {
				t.Fatalf("%d requests, want %d", n, tc.posts)
			}
		})
	}
}

// A refused message is dropped by the Sender at once, reported, and the
// route's next message is still tried (and delivered) in the same Send.
func TestSenderDropsARefusedMessageAndGoesOn(t *testing.T) {
	rec := newRecorder(t, "bad label", 400, 200)
	am := buildAM(t, map[string]any{"url": rec.srv.URL + "/prefix"}, msgTime, nil)
	first := Message{Contract: "c", Agent: "a", Condition: "critical", Kind: KindOpen, Severity: "critical", Time: msgTime, Text: "one"}
	second := first
	second.Agent, second.Text = "b", "two"
	var out Outbox
	ds := Sender{Notifiers: []Notifier{am}}.Send(t.Context(), &out, first, second)
	if len(ds) != 2 || ds[0].Outcome != OutcomeDropped || !ds[0].Tried || !errors.Is(ds[0].Err, ErrRejected) || ds[1].Outcome != OutcomeDelivered {
		t.Fatalf("deliveries %+v; want the first dropped as refused, the second delivered", ds)
	}
	if len(out.Queue) != 0 {
		t.Fatalf("outbox %+v, want nothing queued for retry", out.Queue)
	}
}

// The bearer token is read at send time; a missing one fails the delivery
// (queued, like any credential not set), never a build.
func TestAlertmanagerBearer(t *testing.T) {
	rec := newRecorder(t, "")
	vals := map[string]string{}
	am := buildAM(t, map[string]any{"url": rec.srv.URL + "/prefix", "bearer_env": "AM_TOKEN"}, msgTime, func(k string) string { return vals[k] })
	m := Message{Contract: "c", Agent: "a", Condition: "critical", Kind: KindOpen, Severity: "critical", Time: msgTime}
	if err := am.Notify(t.Context(), m); !errors.Is(err, ErrMissingSecret) || errors.Is(err, ErrRejected) {
		t.Fatalf("without the token: %v", err)
	}
	vals["AM_TOKEN"] = "s3cret"
	if err := am.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if r := rec.requests(); len(r) != 1 || r[0].auth != "Bearer s3cret" {
		t.Fatalf("requests %+v", r)
	}
}
