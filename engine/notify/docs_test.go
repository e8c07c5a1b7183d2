package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/fixtures/agents"
	"github.com/contractd/contractd/fixtures/mta"
	"github.com/contractd/contractd/fixtures/wait"
	_ "github.com/contractd/contractd/steps" // the step kinds the examples use
)

const formatDoc = "../../docs/contract-format.md"

// docExample is a YAML block of the format page that configures routes.
type docExample struct {
	line int
	yaml string
}

// notifyExamples returns every ```yaml block of the page with a notify list.
func notifyExamples(t *testing.T) []docExample {
	t.Helper()
	b, err := os.ReadFile(formatDoc)
	if err != nil {
		t.Fatal(err)
	}
	var out []docExample
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```yaml" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		block := strings.Join(lines[start:i], "\n")
		if regexp.MustCompile(`(?m)^notify:`).MatchString(block) {
			out = append(out, docExample{line: start, yaml: block})
		}
	}
	return out
}

// asContract turns an example into a loadable contract: its front matter
// (with a name and runtime_contract when it has none) and one trivial stage.
func asContract(ex docExample) string {
	fm := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(ex.yaml), "---\n"), "\n---")
	if !regexp.MustCompile(`(?m)^name:`).MatchString(fm) {
		fm = "name: doc-example\n" + fm
	}
	if !regexp.MustCompile(`(?m)^runtime_contract:`).MatchString(fm) {
		fm = "runtime_contract: 2\n" + fm
	}
	probe := "\n\n```sh {id=p%d}\necho ok\n```\n\nExpected: `ok`\n"
	body := "---\n" + fm + "\n---\n\n## Execution\n\n### Probe {#probe}" + fmt.Sprintf(probe, 0)
	// Each report-only agent the page names is an agent of the contract,
	// as lint requires of report_only_agents.
	if m := regexp.MustCompile(`(?m)^report_only_agents: \[(.*)\]`).FindStringSubmatch(fm); m != nil {
		for i, a := range strings.Split(m[1], ",") {
			a = strings.TrimSpace(a)
			body += fmt.Sprintf("\n### %s {#ro%d agent=%s}", a, i+1, a) + fmt.Sprintf(probe, i+1)
		}
	}
	return body
}

// destinations are real ones for every route the examples configure: the
// engine's log, files under a temporary /var/log/contractd, an HTTP
// receiver on loopback, and the Zulip stand-in of the fixture mesh.
type destinations struct {
	logDir  string
	engine  bytes.Buffer
	hook    *httptest.Server
	mu      sync.Mutex
	posts   []hookPost
	zulip   string // the stand-in's address
	journal string
	env     map[string]string
	// smtp takes mail over STARTTLS after a login, relay plainly; only
	// an example with an email route starts them.
	smtp, relay *mta.Server
}

type hookPost struct {
	auth, ctype, path string
	body              []byte
}

const (
	botEmail  = "contractd-bot@chat.example"
	botKey    = "zulip-k3y-for-the-docs"
	hookToken = "hook-t0ken"
	smtpPass  = "smtpPassw0rd"
)

func newDestinations(t *testing.T) *destinations {
	t.Helper()
	d := &destinations{logDir: t.TempDir(), env: map[string]string{
		"ZULIP_BOT_EMAIL": botEmail, "ZULIP_API_KEY": botKey, "HOOK_TOKEN": hookToken}}
	d.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.posts = append(d.posts, hookPost{r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.URL.Path, b})
		d.mu.Unlock()
	}))
	t.Cleanup(d.hook.Close)

	// The Zulip API stand-in, in this process, on loopback.
	dir := t.TempDir()
	d.journal = filepath.Join(dir, "zulip.jsonl")
	addrFile := filepath.Join(dir, "zulip.addr")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- agents.Main(ctx, []string{"fixture", "zulip", "--bot-email", botEmail, "--journal", d.journal, "--addr-file", addrFile},
			agents.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return d.env[k] }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	wait.Until(t, "the zulip stand-in to listen", func() (bool, string) {
		b, err := os.ReadFile(addrFile)
		var a struct{ Addr string }
		if err == nil && json.Unmarshal(b, &a) == nil && a.Addr != "" {
			d.zulip = a.Addr
			return true, ""
		}
		select {
		case code := <-done:
			t.Fatalf("zulip stand-in exited %d: %s", code, stderr.String())
		default:
		}
		return false, stderr.String()
	})
	return d
}

func (d *destinations) hookPosts() []hookPost {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.posts)
}

// Every notify example of docs/contract-format.md loads, builds and
// delivers a message to a real destination, which receives exactly what the
// page says the route sends.
func TestDocsNotifyExamplesDeliver(t *testing.T) {
	examples := notifyExamples(t)
	if len(examples) < 3 {
		t.Fatalf("found %d notify examples in %s", len(examples), formatDoc)
	}
	kinds := map[string]bool{}
	for _, ex := range examples {
		t.Run(fmt.Sprintf("line_%d", ex.line), func(t *testing.T) {
			d := newDestinations(t)
			src := strings.ReplaceAll(asContract(ex), "/var/log/contractd/", d.logDir+"/")
			vars := map[string]string{
				"hook_url": d.hook.URL + "/services/T000/B000/XXXX", "zulip_site": "http://" + d.zulip,
				"am_url": d.hook.URL + "/am", "am1": d.hook.URL + "/am1", "am2": d.hook.URL + "/am2"}
			if strings.Contains(ex.yaml, "email:") {
				d.smtp = mta.Start(t, mta.Options{TLS: true, User: "contractd", Password: smtpPass})
				d.relay = mta.Start(t, mta.Options{})
				d.env["SMTP_PASSWORD"] = smtpPass
				vars["smtp"], vars["relay"] = d.smtp.Addr, d.relay.Addr
				src = strings.ReplaceAll(src, "/etc/contractd/smtp-ca.pem", d.smtp.CAFile)
			}
			c, ds := contracts.Parse("contract-format.md", []byte(src), contracts.Options{Vars: vars})
			if c == nil {
				t.Fatalf("example does not load:\n%s\n%s", ds, src)
			}
			ns, errs := notify.NewAll(c.Notify, notify.Deps{Log: &d.engine, Getenv: func(k string) string { return d.env[k] }, PageURL: "http://127.0.0.1:9464"})
			if len(errs) > 0 {
				t.Fatalf("routes that lint accepted do not build: %v", errs)
			}
			msg := notify.Message{Contract: c.Name, Agent: "abiba", Condition: "critical", Kind: notify.KindOpen, Severity: "critical",
				Text: "abiba is critical: response_pipeline (blocked) `idle` → critical", Time: time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)}
			var out notify.Outbox
			for _, dl := range (notify.Sender{Notifiers: ns}).Send(t.Context(), &out, msg) {
				if dl.Outcome != notify.OutcomeDelivered {
					t.Errorf("route %s: %s: %v", dl.Route, dl.Outcome, dl.Err)
				}
			}
			line := c.Name + ": [open] " + msg.Text
			wantJSON, _ := json.Marshal(msg)
			posts := d.hookPosts()
			for _, r := range c.Notify {
				kinds[r.Kind] = true
				switch o := r.Options.(type) {
				case *contracts.LogOptions:
					got := d.engine.String()
					if o.Path != "" {
						b, err := os.ReadFile(o.Path)
						if err != nil {
							t.Fatalf("route %s: %v", r.Name, err)
						}
						got = string(b)
					}
					want := "2026-11-29T19:30:00Z " + line + "\n"
					if o.Format == "json" {
						want = string(wantJSON) + "\n"
					}
					if !strings.Contains(got, want) {
						t.Errorf("route %s wrote %q, want %q", r.Name, got, want)
					}
				case *contracts.CommandOptions:
					file := strings.TrimSpace(strings.TrimPrefix(o.Run, "cat >>"))
					b, err := os.ReadFile(file)
					if err != nil {
						t.Fatalf("route %s (%s): %v", r.Name, o.Run, err)
					}
					want := line + "\n"
					if o.Format == "json" {
						want = string(wantJSON) + "\n"
					}
					if string(b) != want {
						t.Errorf("route %s: stdin %q, want %q", r.Name, b, want)
					}
				case *contracts.WebhookOptions:
					want := string(wantJSON)
					if o.Format == "text" {
						b, _ := json.Marshal(map[string]string{"text": line})
						want = string(b)
					}
					i := slices.IndexFunc(posts, func(p hookPost) bool { return string(p.body) == want })
					if i < 0 {
						t.Fatalf("route %s: the receiver got %d posts, none %s", r.Name, len(posts), want)
					}
					if p := posts[i]; p.ctype != "application/json" || (o.BearerEnv != "" && p.auth != "Bearer "+hookToken) {
						t.Errorf("route %s: Content-Type %q, Authorization %q", r.Name, p.ctype, p.auth)
					}
				case *contracts.ZulipOptions:
					msgs, err := agents.ReadMessages(d.journal)
					if err != nil {
						t.Fatal(err)
					}
					i := slices.IndexFunc(msgs, func(m agents.Message) bool {
						if o.Stream != "" {
							return m.Type == "stream" && m.To == o.Stream && m.Topic == o.Topic
						}
						return m.Type == "direct" && m.To == `["`+o.To+`"]`
					})
					if i < 0 || msgs[i].Content != line || msgs[i].Sender != botEmail {
						t.Errorf("route %s: the Zulip stand-in holds %+v", r.Name, msgs)
					}
				case *contracts.AlertmanagerOptions:
					want := map[string]string{"alertname": "ContractdIncident", "contract": c.Name, "agent": "abiba", "condition": "critical", "severity": "critical"}
					for k, v := range o.Labels {
						want[k] = v
					}
					for _, base := range o.Alerts() {
						path := strings.TrimPrefix(base, d.hook.URL) + "/api/v2/alerts"
						i := slices.IndexFunc(posts, func(p hookPost) bool {
							var alerts []notify.PostableAlert
							return p.path == path && json.Unmarshal(p.body, &alerts) == nil && len(alerts) == 1 && reflect.DeepEqual(alerts[0].Labels, want)
						})
						if i < 0 {
							t.Fatalf("route %s: no alert with labels %v was posted to %s: %d posts", r.Name, want, path, len(posts))
						}
						var alerts []notify.PostableAlert
						_ = json.Unmarshal(posts[i].body, &alerts)
						if al := alerts[0]; al.Annotations["summary"] != msg.Text || !al.StartsAt.Equal(msg.Time) || !al.EndsAt.After(time.Now()) ||
							al.GeneratorURL != "http://127.0.0.1:9464/c/"+c.Name || posts[i].ctype != "application/json" {
							t.Errorf("route %s: posted %+v (%s), want the text as summary, firing since %s, linking the status page", r.Name, al, posts[i].ctype, msg.Time)
						}
					}
				case *contracts.EmailOptions:
					srv := d.relay
					if o.Server == d.smtp.Addr {
						srv = d.smtp
					}
					to, err := mail.ParseAddressList(o.To)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					wait.Until(t, fmt.Sprintf("route %s: the MTA to deliver to %d recipients", r.Name, len(to)), func() (bool, string) {
						msgs, err := srv.Messages()
						if err != nil {
							t.Fatal(err)
						}
						got = got[:0]
						for _, m := range msgs {
							if subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject")); err == nil && subject == line {
								got = append(got, m.EnvelopeTo)
							}
						}
						return len(msgs) >= len(to), srv.Log()
					})
					var want []string
					for _, a := range to {
						want = append(want, a.Address)
					}
					slices.Sort(got)
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Errorf("route %s: the mail with subject %q reached %v, want %v once each", r.Name, line, got, want)
					}
				default:
					t.Errorf("route %s: no check for kind %s", r.Name, r.Kind)
				}
			}
		})
	}
	for _, k := range contracts.NotifierKinds() {
		if !kinds[k.Kind] {
			t.Errorf("no example in %s delivers through a %s route", formatDoc, k.Kind)
		}
	}
}

// cells splits a Markdown table row into its cells, keeping an escaped
// pipe (\|) inside a cell.
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(row), "|"), "|")
	parts := strings.Split(strings.ReplaceAll(row, `\|`, "\x00"), "|")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.TrimSpace(p), "\x00", `\|`)
	}
	return parts
}

// The option tables of the format page are the schema: every option with
// its type, default, whether it is required and what it does.
func TestDocsNotifierTablesMatchTheSchema(t *testing.T) {
	b, err := os.ReadFile(formatDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	types := map[string]string{"path": "path", "duration": "duration", "count": "count", "url": "URL", "env": "env var name", "string": "string",
		"urls": "list of URLs", "labels": "labels"}
	for _, k := range contracts.NotifierKinds() {
		t.Run(k.Kind, func(t *testing.T) {
			_, rest, ok := strings.Cut(doc, "\n#### `"+k.Kind+"`\n")
			if !ok {
				t.Fatalf("no #### `%s` section", k.Kind)
			}
			section, _, _ := strings.Cut(rest, "\n#")
			var got [][]string
			for _, l := range strings.Split(section, "\n") {
				if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| option") && !strings.HasPrefix(l, "| ---") {
					got = append(got, cells(l))
				}
			}
			var want [][]string
			for _, o := range k.Options {
				if o.Name == "name" {
					continue
				}
				name, typ, def := "`"+o.Name+"`", types[o.Type], ""
				if o.Required {
					name = "**" + name + "**"
				}
				if o.Type == "enum" {
					typ = "`" + strings.Join(o.Enum, "` \\| `") + "`"
				}
				if o.Default != "" {
					def = "`" + o.Default + "`"
				}
				want = append(want, []string{name, typ, def, o.Doc})
			}
			if len(got) != len(want) {
				t.Fatalf("the table has %d rows, the schema %d options:\n%q\nwant:\n%q", len(got), len(want), got, want)
			}
			unquote := strings.NewReplacer("`", "").Replace
			for i := range got {
				for j := range want[i] {
					g, w := got[i][j], want[i][j]
					if j == 3 { // prose may quote code
						g = unquote(g)
					}
					if g != w {
						t.Errorf("option %s, column %d: %q, want %q", want[i][0], j+1, got[i][j], w)
					}
				}
			}
		})
	}
}

// The alertmanager section's JSON is exactly what the route posts when an
// incident opens (at the docs' time, with the default resend and the
// daemon's default --listen), summary aside.
func TestDocsAlertmanagerBodyIsWhatTheRouteSends(t *testing.T) {
	b, err := os.ReadFile(formatDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n#### `alertmanager`\n")
	_, rest, ok := strings.Cut(section, "```json\n")
	if !ok {
		t.Fatal("no ```json block in the alertmanager section")
	}
	doc, _, _ := strings.Cut(rest, "```")
	var want []notify.PostableAlert
	if err := json.Unmarshal([]byte(doc), &want); err != nil {
		t.Fatalf("the docs' JSON: %v", err)
	}
	at := time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)
	r, err := contracts.NewNotifyRoute("alertmanager", "", map[string]string{"url": "http://127.0.0.1:9093"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := notify.New(r, notify.Deps{PageURL: "http://127.0.0.1:9464", Clock: clock.NewFake(at)})
	if err != nil {
		t.Fatal(err)
	}
	got := n.(*notify.Alertmanager).Alert(notify.Message{Contract: "zulip-health", Agent: "abiba", Condition: "critical", Kind: notify.KindOpen,
		Severity: "critical", IncidentSeverity: "critical", OpenedAt: at, Text: "abiba is critical: …", Time: at}, at)
	if gb, _ := json.Marshal([]notify.PostableAlert{got}); strings.TrimSpace(doc) != string(gb) {
		t.Errorf("the route posts\n%s\nthe docs say\n%s", gb, strings.TrimSpace(doc))
	}
}
