package notify

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/mta"
	"github.com/contractd/contractd/fixtures/wait"
)

const (
	smtpUser = "alerts"
	smtpPass = "s3cretSMTPpass"
)

// buildEmail builds an email route from options as a contract writes
// them, with no retries unless opts says.
func buildEmail(t *testing.T, opts map[string]string, getenv func(string) string) *Email {
	t.Helper()
	if _, set := opts["retries"]; !set {
		opts["retries"] = "0"
	}
	r, err := contracts.NewNotifyRoute("email", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(r, Deps{Getenv: getenv, PageURL: "http://contractd.example:9464/"})
	if err != nil {
		t.Fatal(err)
	}
	return n.(*Email)
}

func smtpEnv(k string) string {
	if k == "SMTP_PASSWORD" {
		return smtpPass
	}
	return ""
}

// received waits until exim has delivered n mails into its Maildir, then
// returns them all.
func received(t *testing.T, srv *mta.Server, n int) []mta.Message {
	t.Helper()
	var msgs []mta.Message
	wait.Until(t, fmt.Sprintf("exim to deliver %d mails", n), func() (bool, string) {
		var err error
		msgs, err = srv.Messages()
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs) >= n, srv.Log()
	})
	return msgs
}

// Each message is one mail to each recipient, sent over STARTTLS after a
// login, and what lands in the recipients' mailbox says what happened in
// its subject, its body and its headers.
func TestEmailDeliversOneMailPerMessageOverSTARTTLSWithLogin(t *testing.T) {
	srv := mta.Start(t, mta.Options{TLS: true, User: smtpUser, Password: smtpPass})
	e := buildEmail(t, map[string]string{"server": srv.Addr, "from": "contractd@example.test", "to": "ops@example.test, On call <oncall@example.test>",
		"ca_file": srv.CAFile, "username": smtpUser, "password_env": "SMTP_PASSWORD"}, smtpEnv)
	open := Message{Contract: "zulip-health", Agent: "abiba", Condition: "critical", Kind: KindOpen, Severity: "critical", IncidentSeverity: "critical",
		Text: "abiba is critical: response_pipeline (blocked) `idle` → critical", Time: msgTime, OpenedAt: msgTime}
	repair := Message{Contract: "zulip-health", Agent: "abiba", Condition: "response_pipeline: blocked", Kind: KindRepair, Severity: "critical",
		Text: "restarted abiba (response_pipeline=blocked)", Time: msgTime.Add(time.Second)}
	resolved := open
	resolved.Kind, resolved.Severity, resolved.Text, resolved.Time = KindResolved, "healthy", "abiba critical cleared", msgTime.Add(time.Minute)
	events := []Message{open, repair, resolved}

	var out Outbox
	for _, d := range (Sender{Notifiers: []Notifier{e}}).Send(t.Context(), &out, events...) {
		if d.Outcome != OutcomeDelivered {
			t.Fatalf("%s: %s: %v\n%s", d.Message.Kind, d.Outcome, d.Err, srv.Log())
		}
	}
	msgs := received(t, srv, 2*len(events))
	log := srv.Log()
	if got := strings.Count(log, " <= contractd@example.test "); got != len(events) {
		t.Fatalf("exim took %d mails, want %d (one per message):\n%s", got, len(events), log)
	}
	// P=(utf8)esmtpsa: ESMTP, secured, authenticated; A=plain: the login.
	if strings.Count(log, "esmtpsa X=TLS") != len(events) || strings.Count(log, "A=plain:"+smtpUser) != len(events) {
		t.Errorf("not every mail came over TLS after a login:\n%s", log)
	}
	if len(msgs) != 2*len(events) {
		t.Fatalf("the Maildir holds %d mails, want %d (each message to each of 2 recipients):\n%s", len(msgs), 2*len(events), log)
	}
	dec := new(mime.WordDecoder)
	for i, m := range events {
		line := m.Line()
		var got []mta.Message
		for _, d := range msgs {
			if s, err := dec.DecodeHeader(d.Header.Get("Subject")); err == nil && s == line {
				got = append(got, d)
			}
		}
		var to []string
		for _, d := range got {
			to = append(to, d.EnvelopeTo)
		}
		slices.Sort(to)
		if !slices.Equal(to, []string{"oncall@example.test", "ops@example.test"}) {
			t.Fatalf("message %d (%s) reached %v, want ops and oncall once each", i, line, to)
		}
		d := got[0]
		h := d.Header
		if h.Get("From") != "<contractd@example.test>" || d.ReturnPath != "<contractd@example.test>" ||
			h.Get("To") != `<ops@example.test>, "On call" <oncall@example.test>` ||
			h.Get("X-Contractd-Contract") != "zulip-health" || h.Get("X-Contractd-Kind") != m.Kind || h.Get("X-Contractd-Agent") != "abiba" ||
			h.Get("Auto-Submitted") != "auto-generated" || h.Get("Message-Id") == "" {
			t.Errorf("message %d headers: %v (return path %s)", i, h, d.ReturnPath)
		}
		if date, err := h.Date(); err != nil || !date.Equal(m.Time) {
			t.Errorf("message %d: Date %v (%v), want the message's time %s", i, date, err, m.Time)
		}
		for _, want := range []string{line + "\n", "contract:  zulip-health\n", "kind:      " + m.Kind + "\n", "severity:  " + m.Severity + "\n",
			"time:      " + m.Time.Format(time.RFC3339) + "\n", "status:    http://contractd.example:9464/c/zulip-health\n"} {
			if !strings.Contains(d.Body, want) {
				t.Errorf("message %d body lacks %q:\n%s", i, want, d.Body)
			}
		}
	}
	if strings.Contains(log, smtpPass) {
		t.Error("the password is in exim's log")
	}
}

// A server that offers only AUTH LOGIN gets LOGIN, with the password read
// from a file at send time (a systemd credential, say).
func TestEmailLogsInWithLOGINAndAPasswordFile(t *testing.T) {
	srv := mta.Start(t, mta.Options{TLS: true, User: smtpUser, Password: smtpPass, Mechanisms: []string{"LOGIN"}})
	file := filepath.Join(t.TempDir(), "smtp-password")
	if err := os.WriteFile(file, []byte(smtpPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := buildEmail(t, map[string]string{"server": srv.Addr, "from": "contractd@example.test", "to": "ops@example.test",
		"ca_file": srv.CAFile, "username": smtpUser, "password_file": file}, nil)
	if err := e.Notify(t.Context(), Message{Contract: "c", Kind: KindRepair, Text: "restarted web", Time: msgTime}); err != nil {
		t.Fatalf("%v\n%s", err, srv.Log())
	}
	if msgs := received(t, srv, 1); len(msgs) != 1 || !strings.Contains(srv.Log(), "A=login:"+smtpUser) {
		t.Fatalf("%d mails; log:\n%s", len(msgs), srv.Log())
	}
}

// tls: tls speaks TLS from the first byte (SMTPS, port 465).
func TestEmailOverImplicitTLS(t *testing.T) {
	srv := mta.Start(t, mta.Options{TLS: true, OnConnect: true, User: smtpUser, Password: smtpPass})
	e := buildEmail(t, map[string]string{"server": srv.Addr, "tls": "tls", "ca_file": srv.CAFile, "from": "contractd@example.test", "to": "ops@example.test",
		"username": smtpUser, "password_env": "SMTP_PASSWORD"}, smtpEnv)
	if err := e.Notify(t.Context(), Message{Contract: "web", Kind: KindRepair, Text: "restarted nginx", Time: msgTime}); err != nil {
		t.Fatalf("%v\n%s", err, srv.Log())
	}
	if msgs := received(t, srv, 1); len(msgs) != 1 || !strings.Contains(srv.Log(), "esmtpsa X=TLS") {
		t.Fatalf("%d mails; log:\n%s", len(msgs), srv.Log())
	}
}

// tls: none sends to a relay that takes mail without TLS or a login (a
// local MTA), as Monit's `set mailserver localhost` does.
func TestEmailThroughAPlainRelay(t *testing.T) {
	srv := mta.Start(t, mta.Options{})
	e := buildEmail(t, map[string]string{"server": srv.Addr, "tls": "none", "from": "monitor@example.test", "to": "root@example.test"}, nil)
	if err := e.Notify(t.Context(), Message{Contract: "web", Agent: "nginx", Kind: KindOpen, Severity: "degraded", Text: "nginx is degraded", Time: msgTime}); err != nil {
		t.Fatalf("%v\n%s", err, srv.Log())
	}
	msgs := received(t, srv, 1)
	if len(msgs) != 1 || msgs[0].Header.Get("Subject") != "web: [open] nginx is degraded" || msgs[0].EnvelopeTo != "root@example.test" {
		t.Fatalf("%+v", msgs)
	}
}

// Every way a mail can fail says why, in the route's words and the
// server's, and is retried only when another attempt can help: a 4xx
// answer or a broken connection within the run, a 5xx never (dropped as
// refused), a server without STARTTLS or with a certificate the route does
// not trust not in this run (queued for a later one). Nothing is
// delivered, and the password is never in an error.
func TestEmailFailures(t *testing.T) {
	tlsAuth := mta.Start(t, mta.Options{TLS: true, User: smtpUser, Password: smtpPass})
	plain := mta.Start(t, mta.Options{})
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	mute, err := net.Listen("tcp", "127.0.0.1:0") // takes connections and never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	auth := func(extra map[string]string) map[string]string {
		o := map[string]string{"server": tlsAuth.Addr, "from": "contractd@example.test", "to": "ops@example.test", "ca_file": tlsAuth.CAFile,
			"username": smtpUser, "password_env": "SMTP_PASSWORD"}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	cases := []struct {
		name     string
		opts     map[string]string
		getenv   func(string) string
		srv      *mta.Server
		want     string
		rejected bool // wraps ErrRejected: dropped, never retried; else queued
		attempts int  // attempts within the Send; 0 means 1
		logged   string
	}{
		{name: "wrong password", opts: auth(nil), getenv: func(string) string { return "wrong" }, srv: tlsAuth,
			want: "AUTH: 535 Incorrect authentication data", rejected: true, logged: "authenticator failed"},
		{name: "unknown recipient", opts: auth(map[string]string{"to": "ops@example.test, " + mta.Refused + "@example.test"}), getenv: smtpEnv, srv: tlsAuth,
			want: "RCPT TO unknown@example.test: 550 no such user", rejected: true, logged: "no such user"},
		{name: "busy recipient", opts: auth(map[string]string{"to": mta.Deferred + "@example.test", "retries": "1", "backoff": "10ms"}), getenv: smtpEnv, srv: tlsAuth,
			want: "RCPT TO busy@example.test: 451 mailbox busy, try again later", attempts: 2, logged: "mailbox busy"},
		{name: "no login", opts: map[string]string{"server": tlsAuth.Addr, "from": "contractd@example.test", "to": "ops@example.test", "ca_file": tlsAuth.CAFile},
			srv: tlsAuth, want: "RCPT TO ops@example.test: 530 authentication required", rejected: true},
		{name: "password not set", opts: auth(nil), getenv: func(string) string { return "" }, srv: tlsAuth,
			want: "password_env: environment variable SMTP_PASSWORD is empty"},
		{name: "certificate not trusted", opts: auth(map[string]string{"ca_file": ""}), getenv: smtpEnv, srv: tlsAuth,
			want: "STARTTLS: tls: failed to verify certificate"},
		{name: "no STARTTLS offered", opts: map[string]string{"server": plain.Addr, "from": "contractd@example.test", "to": "ops@example.test"}, srv: plain,
			want: "the server does not offer STARTTLS; nothing was sent"},
		{name: "nothing listening", opts: map[string]string{"server": closed, "tls": "none", "from": "c@example.test", "to": "ops@example.test", "retries": "1", "backoff": "10ms"},
			want: "connect: dial tcp " + closed + ": connect: connection refused", attempts: 2},
		{name: "server never answers", opts: map[string]string{"server": mute.Addr().String(), "tls": "none", "from": "c@example.test", "to": "ops@example.test", "timeout": "300ms"},
			want: "greeting: timed out after 300ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts["ca_file"] == "" {
				delete(tc.opts, "ca_file")
			}
			e := buildEmail(t, tc.opts, tc.getenv)
			var before []mta.Message
			if tc.srv != nil {
				before, _ = tc.srv.Messages()
			}
			var out Outbox
			d := (Sender{Notifiers: []Notifier{e}}).Send(t.Context(), &out, Message{Contract: "c", Kind: KindRepair, Text: "restarted web", Time: msgTime})[0]
			err := d.Err
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrRejected) != tc.rejected {
				t.Errorf("%v: ErrRejected %v, want %v", err, errors.Is(err, ErrRejected), tc.rejected)
			}
			want := OutcomeQueued
			if tc.rejected {
				want = OutcomeDropped
			}
			if d.Outcome != want || d.Attempts != max(tc.attempts, 1) {
				t.Errorf("%s after %d attempts, want %s after %d", d.Outcome, d.Attempts, want, max(tc.attempts, 1))
			}
			if strings.Contains(err.Error(), smtpPass) {
				t.Errorf("the password is in the error: %v", err)
			}
			if tc.srv == nil {
				return
			}
			if tc.logged != "" {
				wait.Until(t, "exim to log "+tc.logged, func() (bool, string) {
					log := tc.srv.Log()
					return strings.Count(log, tc.logged) >= max(tc.attempts, 1), log
				})
			}
			if after, _ := tc.srv.Messages(); len(after) != len(before) {
				t.Errorf("%d mails were delivered", len(after)-len(before))
			}
		})
	}
}

// A cancelled context ends a conversation at once, however long the
// route's timeout.
func TestEmailStopsWithItsContext(t *testing.T) {
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := mute.Accept(); err == nil {
			accepted <- c
		}
	}()
	e := buildEmail(t, map[string]string{"server": mute.Addr().String(), "tls": "none", "from": "c@example.test", "to": "ops@example.test", "timeout": "1h"}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Notify(ctx, Message{Contract: "c", Kind: KindRepair, Text: "x", Time: msgTime}) }()
	c := <-accepted
	defer c.Close()
	cancel()
	var got error
	wait.For(t, "Notify to return once cancelled", func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	})
	// The attempt was waiting for the greeting, or had just connected.
	if !errors.Is(got, context.Canceled) {
		t.Fatalf("error %v, want the conversation cut short by the cancel, and not tried again", got)
	}
}
