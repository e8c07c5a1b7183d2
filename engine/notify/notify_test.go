package notify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/wait"
)

var msgTime = time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)

func testMessage() Message {
	return Message{Contract: "zulip-health", Agent: "abiba", Condition: "response_pipeline=blocked", Kind: KindRepair,
		Severity: "critical", Text: "restarted abiba (response_pipeline=blocked)", Time: msgTime}
}

// recorder is a real HTTP server on 127.0.0.1 that records requests and
// answers with the next status in its script (the last one repeats).
type recorder struct {
	mu       sync.Mutex
	reqs     []recorded
	statuses []int
	body     string
	hang     bool
	srv      *httptest.Server
}

type recorded struct {
	method, path, auth, ctype string
	body                      []byte
}

func newRecorder(t *testing.T, body string, statuses ...int) *recorder {
	r := &recorder{statuses: statuses, body: body}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Get("Authorization"), req.Header.Get("Content-Type"), b})
		status := http.StatusOK
		if n := len(r.reqs); len(r.statuses) > 0 {
			status = r.statuses[min(n, len(r.statuses))-1]
		}
		hang := r.hang
		r.mu.Unlock()
		if hang {
			select {
			case <-req.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, r.body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// build decodes a route from option texts, as a contract's notify list is
// decoded, and builds its notifier; "name" is the route's name.
func build(kind string, opts map[string]string, deps Deps) (Notifier, error) {
	rest := map[string]string{}
	for k, v := range opts {
		if k != "name" {
			rest[k] = v
		}
	}
	r, err := contracts.NewNotifyRoute(kind, opts["name"], rest)
	if err != nil {
		return nil, err
	}
	return New(r, deps)
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

const apiKey = "s3cr3t-zulip-api-key"

func TestZulipPayload(t *testing.T) {
	tests := []struct {
		name     string
		opts     map[string]string
		wantForm url.Values
	}{
		{name: "stream with default topic", opts: map[string]string{"stream": "ops"},
			wantForm: url.Values{"type": {"stream"}, "to": {"ops"}, "topic": {"zulip-health"}, "content": {"zulip-health: restarted abiba (response_pipeline=blocked)"}}},
		{name: "stream with topic", opts: map[string]string{"stream": "ops", "topic": "monitors"},
			wantForm: url.Values{"type": {"stream"}, "to": {"ops"}, "topic": {"monitors"}, "content": {"zulip-health: restarted abiba (response_pipeline=blocked)"}}},
		{name: "direct message", opts: map[string]string{"to": "young@chat.example"},
			wantForm: url.Values{"type": {"direct"}, "to": {`["young@chat.example"]`}, "content": {"zulip-health: restarted abiba (response_pipeline=blocked)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, `{"result":"success","msg":"","id":42}`)
			opts := map[string]string{"site": rec.srv.URL + "/", "bot_email_env": "ZULIP_EMAIL", "api_key_env": "ZULIP_API_KEY"}
			for k, v := range tt.opts {
				opts[k] = v
			}
			n, err := build("zulip", opts, Deps{Getenv: env("ZULIP_EMAIL", "abiba-bot@chat.example", "ZULIP_API_KEY", apiKey)})
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Notify(t.Context(), testMessage()); err != nil {
				t.Fatal(err)
			}
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != "POST" || r.path != "/api/v1/messages" || r.ctype != "application/x-www-form-urlencoded" {
				t.Errorf("request %s %s (%s)", r.method, r.path, r.ctype)
			}
			if want := "Basic YWJpYmEtYm90QGNoYXQuZXhhbXBsZTpzM2NyM3QtenVsaXAtYXBpLWtleQ=="; r.auth != want {
				t.Errorf("auth = %q, want basic abiba-bot@chat.example:%s", r.auth, apiKey)
			}
			form, err := url.ParseQuery(string(r.body))
			if err != nil {
				t.Fatal(err)
			}
			if form.Encode() != tt.wantForm.Encode() {
				t.Errorf("form = %s\nwant   %s", form.Encode(), tt.wantForm.Encode())
			}
		})
	}
}

func TestZulipErrorsNeverShowTheKey(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantErr   string
		wantTries int
	}{
		{name: "zulip error result", status: 400, body: `{"result":"error","msg":"Stream 'ops' does not exist","code":"STREAM_DOES_NOT_EXIST"}`,
			wantErr: "Stream 'ops' does not exist", wantTries: 1},
		{name: "bad key echoed back", status: 401, body: `{"result":"error","msg":"Invalid API key ` + apiKey + `"}`,
			wantErr: "401 Unauthorized", wantTries: 1},
		{name: "200 without success", status: 200, body: `{"result":"error","msg":"rate limited"}`,
			wantErr: "zulip: rate limited", wantTries: 1},
		{name: "server errors are retried", status: 502, body: `bad gateway`,
			wantErr: "502 Bad Gateway: bad gateway", wantTries: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, tt.body, tt.status)
			n, err := build("zulip", map[string]string{"site": rec.srv.URL, "stream": "ops", "bot_email_env": "E", "api_key_env": "K",
				"backoff": "1ms", "retries": "2"}, Deps{Getenv: env("E", "bot@x", "K", apiKey)})
			if err != nil {
				t.Fatal(err)
			}
			err = n.Notify(t.Context(), testMessage())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), apiKey) {
				t.Errorf("error shows the API key: %v", err)
			}
			if got := len(rec.requests()); got != tt.wantTries {
				t.Errorf("%d attempts, want %d", got, tt.wantTries)
			}
		})
	}
}

func TestWebhook(t *testing.T) {
	tests := []struct {
		name      string
		opts      map[string]string
		statuses  []int
		wantBody  string
		wantErr   string
		wantTries int
	}{
		{name: "json message", statuses: []int{200},
			wantBody:  `{"contract":"zulip-health","agent":"abiba","condition":"response_pipeline=blocked","kind":"repair","severity":"critical","text":"restarted abiba (response_pipeline=blocked)","time":"2026-11-29T19:30:00Z"}`,
			wantTries: 1},
		{name: "text format", opts: map[string]string{"format": "text"}, statuses: []int{204},
			wantBody: `{"text":"zulip-health: restarted abiba (response_pipeline=blocked)"}`, wantTries: 1},
		{name: "retries 503 then succeeds", statuses: []int{503, 503, 200}, wantTries: 3},
		{name: "429 is retried", statuses: []int{429, 200}, wantTries: 2},
		{name: "gives up after retries", opts: map[string]string{"retries": "1"}, statuses: []int{500}, wantErr: "500 Internal Server Error: nope", wantTries: 2},
		{name: "4xx is not retried", statuses: []int{404}, wantErr: "404 Not Found", wantTries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, "nope", tt.statuses...)
			opts := map[string]string{"url": rec.srv.URL + "/hooks/T000/B000/XXXXSECRET", "backoff": "1ms", "bearer_env": "HOOK_TOKEN"}
			for k, v := range tt.opts {
				opts[k] = v
			}
			n, err := build("webhook", opts, Deps{Getenv: env("HOOK_TOKEN", "tok-123")})
			if err != nil {
				t.Fatal(err)
			}
			err = n.Notify(t.Context(), testMessage())
			reqs := rec.requests()
			if len(reqs) != tt.wantTries {
				t.Errorf("%d attempts, want %d", len(reqs), tt.wantTries)
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "XXXXSECRET") || strings.Contains(err.Error(), "tok-123") {
					t.Errorf("error shows a secret: %v", err)
				}
			}
			if tt.wantBody != "" && string(reqs[0].body) != tt.wantBody {
				t.Errorf("body = %s\nwant   %s", reqs[0].body, tt.wantBody)
			}
			if reqs[0].auth != "Bearer tok-123" || reqs[0].ctype != "application/json" || reqs[0].path != "/hooks/T000/B000/XXXXSECRET" {
				t.Errorf("request: auth %q type %q path %q", reqs[0].auth, reqs[0].ctype, reqs[0].path)
			}
		})
	}
}

func TestWebhookTimeout(t *testing.T) {
	rec := newRecorder(t, "")
	rec.hang = true
	n, err := build("webhook", map[string]string{"url": rec.srv.URL + "/secret-path", "timeout": "100ms", "retries": "1", "backoff": "1ms"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	err = n.Notify(t.Context(), testMessage())
	if err == nil || !strings.Contains(err.Error(), "timed out after 100ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if strings.Contains(err.Error(), "secret-path") {
		t.Errorf("error shows the URL path: %v", err)
	}
	if got := len(rec.requests()); got != 2 {
		t.Errorf("%d attempts, want 2 (a timeout is retried)", got)
	}
}

func TestWebhookStopsWhenTheRunEnds(t *testing.T) {
	rec := newRecorder(t, "", 503)
	n, err := build("webhook", map[string]string{"url": rec.srv.URL, "retries": "5", "backoff": "1h"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		// The run ends once the first attempt has failed and a retry waits.
		wait.Poll(ctx, time.Millisecond, func() bool { return len(rec.requests()) > 0 })
		cancel()
	}()
	err = n.Notify(ctx, testMessage())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the run's cancellation", err)
	}
}

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tests := []struct {
		name    string
		opts    map[string]string
		want    string
		wantErr string
	}{
		{name: "text on stdin", opts: map[string]string{"run": "cat > " + out},
			want: "zulip-health: restarted abiba (response_pipeline=blocked)\n"},
		{name: "json on stdin", opts: map[string]string{"run": "cat > " + out, "format": "json"},
			want: `{"contract":"zulip-health","agent":"abiba","condition":"response_pipeline=blocked","kind":"repair","severity":"critical","text":"restarted abiba (response_pipeline=blocked)","time":"2026-11-29T19:30:00Z"}` + "\n"},
		{name: "fields in the environment", opts: map[string]string{"run": `printf '%s|%s|%s|%s\n' "$CONTRACTD_KIND" "$CONTRACTD_AGENT" "$CONTRACTD_CONDITION" "$CONTRACTD_SEVERITY" > ` + out},
			want: "repair|abiba|response_pipeline=blocked|critical\n"},
		{name: "failure shows exit code and stderr", opts: map[string]string{"run": "echo 'relay refused' >&2; exit 3"},
			wantErr: "exit 3: relay refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(out)
			n, err := build("command", tt.opts, Deps{})
			if err != nil {
				t.Fatal(err)
			}
			err = n.Notify(t.Context(), testMessage())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCommandTimeoutKillsTheTree(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	n, err := build("command", map[string]string{"run": "sleep 30 & echo $! > " + pidFile + "; wait", "timeout": "300ms"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	err = n.Notify(t.Context(), testMessage())
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	// The grandchild was killed with its group: gone, or a zombie waiting
	// for init, never still sleeping.
	// Well short of the sleep's own 30s, which would end it unkilled.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = wait.Poll(ctx, 10*time.Millisecond, func() bool {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		return err != nil || strings.Contains(string(stat), ") Z ")
	})
	if err != nil {
		t.Errorf("sleep %s still running after the notifier timed out", pid)
		if p, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

func TestLog(t *testing.T) {
	var buf bytes.Buffer
	n, err := build("log", nil, Deps{Log: &buf})
	if err != nil {
		t.Fatal(err)
	}
	m := testMessage()
	n.Notify(t.Context(), m)
	m.Kind, m.Text = KindResolved, "abiba back to healthy"
	n.Notify(t.Context(), m)
	want := "2026-11-29T19:30:00Z zulip-health: restarted abiba (response_pipeline=blocked)\n" +
		"2026-11-29T19:30:00Z zulip-health: [resolved] abiba back to healthy\n"
	if buf.String() != want {
		t.Errorf("log = %q\nwant  %q", buf.String(), want)
	}
}

// A log route with a path appends one line per message to its file,
// created 0600; a newline in a message is escaped, so a line is a message.
func TestLogFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, format string
		want         []string
	}{
		{name: "text", format: "text", want: []string{
			"2026-11-29T19:30:00Z zulip-health: restarted abiba (response_pipeline=blocked)",
			`2026-11-29T19:30:00Z zulip-health: [open] abiba is critical: last_error ("boom\nsecond line\x1b[31m") non-null`}},
		{name: "json", format: "json", want: []string{
			`{"contract":"zulip-health","agent":"abiba","condition":"response_pipeline=blocked","kind":"repair","severity":"critical","text":"restarted abiba (response_pipeline=blocked)","time":"2026-11-29T19:30:00Z"}`,
			`{"contract":"zulip-health","agent":"abiba","condition":"response_pipeline=blocked","kind":"open","severity":"critical","text":"abiba is critical: last_error (\"boom\nsecond line\u001b[31m\") non-null","time":"2026-11-29T19:30:00Z"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".log")
			n, err := build("log", map[string]string{"path": path, "format": tt.format}, Deps{})
			if err != nil {
				t.Fatal(err)
			}
			m := testMessage()
			if err := n.Notify(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			m.Kind, m.Text = KindOpen, "abiba is critical: last_error (\"boom\nsecond line\x1b[31m\") non-null"
			if err := n.Notify(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(b), strings.Join(tt.want, "\n")+"\n"; got != want {
				t.Errorf("file:\n%s\nwant:\n%s", got, want)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
			}
		})
	}
	// An unwritable path is a failed delivery, not a broken route: the
	// message is queued and the next attempt may succeed.
	n, err := build("log", map[string]string{"path": filepath.Join(dir, "missing", "x.log")}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(t.Context(), testMessage()); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("err = %v", err)
	}
	os.Mkdir(filepath.Join(dir, "missing"), 0o700)
	if err := n.Notify(t.Context(), testMessage()); err != nil {
		t.Errorf("once the directory exists: %v", err)
	}
}

// Options are checked by the contracts package's schema, the one lint
// uses; what it rejects never reaches a constructor.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		opts    map[string]string
		wantErr string
	}{
		{name: "unknown kind", kind: "pager", wantErr: `unknown notifier kind "pager" (want one of alertmanager, command, email, log, webhook, zulip)`},
		{name: "unknown option", kind: "webhook", opts: map[string]string{"url": "http://127.0.0.1/x", "retry": "3"}, wantErr: `unknown option "retry"`},
		{name: "missing url", kind: "webhook", wantErr: "needs url"},
		{name: "not http", kind: "webhook", opts: map[string]string{"url": "ftp://h/secret"}, wantErr: `url: expected an http or https URL, got "ftp://h/…"`},
		{name: "command's key is run", kind: "command", opts: map[string]string{"command": "true"}, wantErr: `needs run`},
		{name: "bad format", kind: "command", opts: map[string]string{"run": "true", "format": "xml"}, wantErr: `format: must be text or json, got "xml"`},
		{name: "bad timeout", kind: "command", opts: map[string]string{"run": "true", "timeout": "soon"}, wantErr: `timeout: expected a duration like 10s, got "soon"`},
		{name: "zulip without api_key_env", kind: "zulip", opts: map[string]string{"site": "https://chat.example", "stream": "ops", "bot_email_env": "E"},
			wantErr: "needs api_key_env"},
		{name: "zulip stream and to", kind: "zulip", opts: map[string]string{"site": "https://chat.example", "stream": "ops", "to": "a@b", "bot_email_env": "E", "api_key_env": "E"},
			wantErr: "needs exactly one of stream (post to a stream) or to (a direct message)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := build(tt.kind, tt.opts, Deps{Log: io.Discard})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// Options of another kind are a programming error, caught by New.
	_, err := New(contracts.NotifyRoute{Kind: "webhook", Name: "hook", Options: &contracts.LogOptions{}}, Deps{})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("mismatched options: %v", err)
	}
}

// A route that cannot be built stops no other: NewAll returns a notifier
// for every route, and the broken one fails each delivery with the reason.
func TestNewAllKeepsEveryRoute(t *testing.T) {
	logRoute, err := contracts.NewNotifyRoute("log", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cmdRoute, err := contracts.NewNotifyRoute("command", "pager", map[string]string{"run": "true"})
	if err != nil {
		t.Fatal(err)
	}
	logRoute.Pos = contracts.Pos{File: "zulip-health.md", Line: 20, Col: 5}
	// No engine log writer: the log route without a path cannot be built.
	ns, errs := NewAll([]contracts.NotifyRoute{logRoute, cmdRoute}, Deps{})
	if len(ns) != 2 || ns[0].Name() != "log" || ns[1].Name() != "pager" {
		t.Fatalf("notifiers = %v", ns)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "zulip-health.md:20:5: ") || !errors.Is(errs[0], ErrConfig) {
		t.Fatalf("errs = %v, want one pointing at the log route", errs)
	}
	if err := ns[1].Notify(t.Context(), testMessage()); err != nil {
		t.Errorf("the command route: %v", err)
	}
	if err := ns[0].Notify(t.Context(), testMessage()); err == nil || !strings.Contains(err.Error(), "route log could not be built") {
		t.Errorf("the broken route delivered: %v", err)
	}
}

func TestCredentialsAreReadAtSendTime(t *testing.T) {
	rec := newRecorder(t, `{"result":"success"}`)
	vars := map[string]string{"E": "bot@x"}
	getenv := func(k string) string { return vars[k] }
	z, err := build("zulip", map[string]string{"site": rec.srv.URL, "stream": "ops", "bot_email_env": "E", "api_key_env": "ZULIP_API_KEY"}, Deps{Getenv: getenv})
	if err != nil {
		t.Fatalf("a missing credential must not break the contract: %v", err)
	}
	err = z.Notify(t.Context(), testMessage())
	if !errors.Is(err, ErrMissingSecret) || err.Error() != "api_key_env: environment variable ZULIP_API_KEY is empty: credential not set" {
		t.Fatalf("err = %v", err)
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("sent %d requests without credentials", n)
	}
	vars["ZULIP_API_KEY"] = apiKey
	if err := z.Notify(t.Context(), testMessage()); err != nil {
		t.Fatalf("after the operator set the key: %v", err)
	}

	w, err := build("webhook", map[string]string{"url": rec.srv.URL, "bearer_env": "HOOK_TOKEN"}, Deps{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Notify(t.Context(), testMessage()); !errors.Is(err, ErrMissingSecret) {
		t.Errorf("webhook without its token: %v", err)
	}
}
