package contracts

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// An alertmanager route's list and mapping options decode with ${var}
// filled into every item, and its defaults filled in.
func TestAlertmanagerRouteDecodesListsAndLabels(t *testing.T) {
	src := `---
name: am
runtime_contract: 2
vars:
  am1: http://am1:9093
  team: ops
notify:
  - {alertmanager: {url: "${am1}"}}
  - {alertmanager: {urls: ["${am1}", "http://am2:9093/prefix"], labels: {team: "${team}", alertname: ContractdPage}, resend: 20s, name: pair}}
---

## Execution

### Probe {#probe}
` + "```sh {id=p}\ntrue\n```\n"
	c, ds := Parse("am.md", []byte(src), Options{Vars: map[string]string{"team": "infra"}})
	if c == nil || ds.HasErrors() {
		t.Fatalf("does not load:\n%s", ds)
	}
	one := c.Notify[0].Options.(*AlertmanagerOptions)
	if got := one.Alerts(); !reflect.DeepEqual(got, []string{"http://am1:9093"}) || one.Resend != time.Minute || one.Timeout != 10*time.Second || one.Retries != 2 {
		t.Errorf("route 0: alerts %v, resend %s, timeout %s, retries %d; want the url and the defaults 1m, 10s, 2", got, one.Resend, one.Timeout, one.Retries)
	}
	pair := c.Notify[1]
	o := pair.Options.(*AlertmanagerOptions)
	if pair.Name != "pair" || !reflect.DeepEqual(o.Alerts(), []string{"http://am1:9093", "http://am2:9093/prefix"}) || o.Resend != 20*time.Second {
		t.Errorf("route 1: name %q, alerts %v, resend %s", pair.Name, o.Alerts(), o.Resend)
	}
	if want := map[string]string{"team": "infra", "alertname": "ContractdPage"}; !reflect.DeepEqual(o.Labels, want) {
		t.Errorf("labels %v, want %v (the --var wins over the contract's var)", o.Labels, want)
	}
}

func TestNewNotifyRouteOptions(t *testing.T) {
	cases := []struct {
		name string
		opts map[string]any
		want string // "" for a route that builds
	}{
		{"lists and mappings", map[string]any{"urls": []string{"http://a:9093", "https://b"}, "labels": map[string]string{"team": "ops"}}, ""},
		{"url as a string", map[string]any{"url": "http://a:9093"}, ""},
		{"urls as a string", map[string]any{"urls": "http://a:9093"}, "urls: expected a list of http(s) URLs"},
		{"labels as a list", map[string]any{"url": "http://a:9093", "labels": []string{"team"}}, "labels: expected a mapping of label names to values"},
		{"a bad item", map[string]any{"urls": []string{"http://a:9093", "ftp://b"}}, `urls[1]: expected an http or https URL, got "ftp://b/…"`},
		{"a reserved label", map[string]any{"url": "http://a:9093", "labels": map[string]string{"agent": "x"}}, "labels: agent is set from each message"},
		{"both", map[string]any{"url": "http://a:9093", "urls": []string{"http://b:9093"}}, "needs exactly one of url"},
		{"another Go type", map[string]any{"url": 9093}, "url: a int is not an option value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewNotifyRouteOptions("alertmanager", "", tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want == "" && r.Name != "alertmanager":
				t.Fatalf("name %q, want the kind", r.Name)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// An email route's options are checked by lint, each problem at its
// option: the server as host:port, the addresses, a password with its
// username, and no login in the clear to another host.
func TestEmailRouteLint(t *testing.T) {
	route := func(opts string) string {
		return "---\nname: mail\nruntime_contract: 2\nnotify:\n  - {email: {" + opts + "}}\n---\n\n## Execution\n\n### Probe {#probe}\n```sh {id=p}\ntrue\n```\n"
	}
	const base = `server: "smtp.example.com:587", from: c@example.com, to: ops@example.com`
	cases := []struct {
		name, opts, want string
	}{
		{"good", base + `, username: c, password_env: SMTP_PASSWORD`, ""},
		{"good relay", `server: "localhost:25", tls: none, from: c@example.com, to: "a@example.com, B <b@example.com>"`, ""},
		{"login on loopback in the clear", `server: "127.0.0.1:25", tls: none, from: c@example.com, to: a@example.com, username: c, password_file: /etc/pw`, ""},
		{"no port", `server: smtp.example.com, from: c@example.com, to: ops@example.com`,
			`mail.md:5:22: error: notify[0].email.server: expected host:port with a port in 1..65535, like smtp.example.com:587, got "smtp.example.com"`},
		{"bad recipients", `server: "smtp.example.com:587", from: c@example.com, to: "ops at example"`,
			`notify[0].email.to: expected email addresses separated by commas, got "ops at example"`},
		{"password without user", base + `, password_env: SMTP_PASSWORD`, `mail.md:5:6: error: notify[0].email: a password needs the username it belongs to`},
		{"user without password", base + `, username: c`, `notify[0].email: username needs exactly one of password_env or password_file`},
		{"login in the clear", `server: "smtp.example.com:25", tls: none, from: c@example.com, to: a@example.com, username: c, password_env: P`,
			`notify[0].email.tls: none sends the password in the clear; use starttls or tls`},
		{"misspelt", base + `, pasword_env: P`, `unknown option "pasword_env" in notify[0].email (did you mean "password_env"?)`},
		{"bad tls", base + `, tls: ssl`, `notify[0].email.tls: must be starttls or tls or none, got "ssl"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := Parse("mail.md", []byte(route(tc.opts)), Options{})
			switch {
			case tc.want == "" && ds.HasErrors():
				t.Fatalf("diagnostics:\n%s", ds)
			case tc.want != "" && !strings.Contains(ds.String(), tc.want):
				t.Fatalf("diagnostics:\n%s\nwant %s", ds, tc.want)
			}
		})
	}
}
