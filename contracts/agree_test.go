package contracts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/transports"
)

// Lint and the ssh transport read an address by one rule: whatever lint
// accepts the transport opens, and whatever the transport refuses is a lint
// error at the address.
func TestSSHAddressLintAgreesWithTransport(t *testing.T) {
	for _, a := range []string{
		"root@h", "root@h:2222", "deploy@10.0.0.5:22", "root@[::1]:2200", "root@[fe80::1]",
		"root@h/x", "root@a@b", "root@::1", "root@[::1]:abc", "root@[::1", "root@h:", "root@h:0",
		"root@h:99999", "@h", "h", "root@h\tx", "root@-oProxyCommand=x",
	} {
		t.Run(a, func(t *testing.T) {
			src := "---\nname: v\nruntime_contract: 2\ntargets:\n  t: {ssh: " + strings.ReplaceAll(quote(a), "\t", `\t`) + "}\n---\n"
			_, ds := contracts.Parse("v.md", []byte(src), contracts.Options{})
			lintOK := !strings.Contains(ds.String(), "targets.t.ssh")
			_, _, _, err := transports.ParseSSHAddr(a)
			if lintOK != (err == nil) {
				t.Fatalf("lint accepts: %v (%s); transport: %v", lintOK, ds, err)
			}
		})
	}
}

func quote(s string) string { return `"` + s + `"` }

// A tcp step's address may come from a var (the issue's ${ssh_addr}) or a
// for_each key: lint fills it with the values known at load, by the
// function the run fills it with.
func TestTCPAddressFromVars(t *testing.T) {
	contract := func(vars, forEach, stage, addr string) string {
		return "---\nname: v\nruntime_contract: 2\nvars: {" + vars + "}\nfor_each: {" + forEach + "}\n---\n\n## Execution\n\n### S " + stage + "\n\n```tcp {id=port}\n" + addr + "\n```\n\n| Field | Healthy | Critical |\n|---|---|---|\n| `open` | true | false |\n"
	}
	for _, tc := range []struct {
		name, src, err string
	}{
		{"a var", contract(`ssh_addr: "127.0.0.1:2222"`, "", "{#s}", "${ssh_addr}"), ""},
		{"host and port vars", contract(`host: 127.0.0.1, port: 2222`, "", "{#s}", "${host}:${port}"), ""},
		{"a literal", contract("", "", "{#s}", "127.0.0.1:22"), ""},
		{"for_each keys", contract("", `w: [{name: a, port: 9001}, {name: b, port: 9002}]`, "{#s for_each=w}", "127.0.0.1:${port}"), ""},
		{"a var that is not host:port", contract(`ssh_addr: "root@127.0.0.1:22"`, "", "{#s}", "${ssh_addr}"),
			`v.md:12:4: error: tcp step port: address ${ssh_addr} gives "root@127.0.0.1:22": host "root@127.0.0.1" is not a host name or address`},
		{"a literal without a port", contract("", "", "{#s}", "127.0.0.1"),
			`v.md:12:4: error: tcp step port: address "127.0.0.1": not host:port`},
		{"an item whose port is out of range", contract("", `w: [{name: a, port: 9001}, {name: b, port: 99999}]`, "{#s for_each=w}", "127.0.0.1:${port}"),
			`v.md:12:4: error: tcp step port, for_each w[1]: address 127.0.0.1:${port} gives "127.0.0.1:99999": port "99999" is not a number in 1..65535`},
		{"an item without the key", contract("", `w: [{name: a, port: 9001}, {name: b}]`, "{#s for_each=w}", "127.0.0.1:${port}"),
			`v.md:12:4: error: tcp step port: for_each w[1] has no key port, which it reads`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := contracts.Parse("v.md", []byte(tc.src), contracts.Options{})
			if got := strings.TrimSpace(ds.String()); got != tc.err {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s", got, tc.err)
			}
		})
	}
}

// An http step's URL filled with the vars is checked at load as the run
// fills it; one reading a secret is left to the run.
func TestHTTPURLFromVars(t *testing.T) {
	src := func(base string) string {
		return "---\nname: v\nruntime_contract: 2\nvars: {base: " + quote(base) + "}\nsecrets: [TOKEN]\n---\n\n## Execution\n\n### S {#s}\n\n```http {id=home}\nGET ${base}/check\n```\n\nExpected: `200`\n\n```http {id=tok}\nGET http://${TOKEN}/x\n```\n\nExpected: `200`\n"
	}
	if _, ds := contracts.Parse("v.md", []byte(src("http://127.0.0.1:8080")), contracts.Options{}); ds.HasErrors() {
		t.Fatalf("a base URL was refused: %s", ds)
	}
	_, ds := contracts.Parse("v.md", []byte(src("ftp://h")), contracts.Options{})
	if want := "v.md:12:4: error: http step home: URL ${base}/check: not an http or https URL with a host once filled"; strings.TrimSpace(ds.String()) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", ds, want)
	}
	// The same mistake arriving through an override is caught the same way.
	_, ds = contracts.Parse("v.md", []byte(src("http://127.0.0.1:8080")), contracts.Options{Vars: map[string]string{"base": "127.0.0.1:8080"}})
	if !strings.Contains(ds.String(), "http step home: URL ${base}/check") {
		t.Fatalf("an override the run would refuse was accepted: %s", ds)
	}
}

// A var keeps the type its declaration has: expressions read a YAML
// integer as an int. An override is read as that type, or refused at load
// naming where the var is declared.
func TestVarOverridesKeepTheDeclaredType(t *testing.T) {
	src := []byte("---\nname: v\nruntime_contract: 2\nvars:\n  limit: 5\n  ratio: 0.5\n  on: true\n  unit: web\n  port: \"9000\"\n---\n")
	c, ds := contracts.Parse("v.md", src, contracts.Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	want := map[string]any{"limit": 5, "ratio": 0.5, "on": true, "unit": "web", "port": "9000"}
	for k, v := range want {
		if c.VarValues[k] != v {
			t.Errorf("vars.%s = %#v, want %#v", k, c.VarValues[k], v)
		}
	}
	if c.Vars["limit"] != "5" || c.Vars["ratio"] != "0.5" {
		t.Errorf("scripts read %q and %q, want the text as written", c.Vars["limit"], c.Vars["ratio"])
	}

	c, ds = contracts.Parse("v.md", src, contracts.Options{Vars: map[string]string{"limit": "7", "ratio": "2", "on": "false", "unit": "12"}})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	for k, v := range map[string]any{"limit": 7, "ratio": 2.0, "on": false, "unit": "12"} {
		if c.VarValues[k] != v {
			t.Errorf("--var: vars.%s = %#v, want %#v", k, c.VarValues[k], v)
		}
	}

	_, ds = contracts.Parse("v.md", src, contracts.Options{Vars: map[string]string{"limit": "many", "on": "yes"}})
	if got, want := strings.TrimSpace(ds.String()), `v.md:5:3: error: --var limit=many: limit is declared here as an integer (5); "many" is not a decimal integer
v.md:7:3: error: --var on=yes: on is declared here as true or false (true); "yes" is not true or false`; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}

	inv := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(inv, []byte("vars:\n  limit: \"lots\"\n  extra: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ds = contracts.Parse("v.md", src, contracts.Options{Inventory: inv})
	if got, want := strings.TrimSpace(ds.String()), inv+`:2:3: error: vars.limit: the contract declares limit as an integer (5); "lots" is not a decimal integer`; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// A var only the inventory declares takes the inventory's type, and a
	// --var of it is read as that type.
	if err := os.WriteFile(inv, []byte("vars:\n  extra: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, ds = contracts.Parse("v.md", src, contracts.Options{Inventory: inv, Vars: map[string]string{"extra": "4"}})
	if ds.HasErrors() || c.VarValues["extra"] != 4 {
		t.Fatalf("extra = %#v (%s), want 4", c.VarValues["extra"], ds)
	}
	_, ds = contracts.Parse("v.md", src, contracts.Options{Inventory: inv, Vars: map[string]string{"extra": "four"}})
	if want := inv + `:2:3: error: --var extra=four: extra is declared here as an integer (3); "four" is not a decimal integer`; strings.TrimSpace(ds.String()) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", ds, want)
	}
}

// An http or tcp step probes from the engine's host or through via=; an
// on= on it was accepted, shown by explain as where the probe ran, and
// never used. It is refused.
func TestProbeStepsRefuseOn(t *testing.T) {
	for _, kind := range []string{"http", "tcp"} {
		body := "GET http://127.0.0.1:1/"
		if kind == "tcp" {
			body = "127.0.0.1:1"
		}
		src := "---\nname: v\nruntime_contract: 2\ntargets:\n  hop: {ssh: root@10.0.0.1}\n---\n\n## Execution\n\n### S {#s}\n\n```" + kind + " {id=p on=hop}\n" + body + "\n```\n"
		_, ds := contracts.Parse("v.md", []byte(src), contracts.Options{})
		if want := "v.md:12:"; !strings.Contains(ds.String(), want) || !strings.Contains(ds.String(), "on applies only to bash and sh steps") {
			t.Errorf("%s step with on=: %s", kind, ds)
		}
	}
}

// A webhook or zulip URL lint accepts is one the notifier can be built
// with, and one it refuses is a lint error: both read CheckHTTPURL.
func TestNotifyURLLintAgreesWithNotifier(t *testing.T) {
	for _, u := range []string{
		"https://hooks.example/x", "http://127.0.0.1:8080/hook", "http://[::1]:80/",
		"http://h:99999/x", "http://h:0/", "ftp://h/x", "http:///x", "127.0.0.1:80", "http://h x/",
	} {
		t.Run(u, func(t *testing.T) {
			src := "---\nname: v\nruntime_contract: 2\nnotify:\n  - {webhook: {url: " + quote(u) + "}}\n---\n"
			c, ds := contracts.Parse("v.md", []byte(src), contracts.Options{})
			lintOK := !ds.HasErrors()
			var buildErr error
			if lintOK {
				_, errs := notify.NewAll(c.Notify, notify.Deps{Getenv: func(string) string { return "" }})
				if len(errs) > 0 {
					buildErr = errs[0]
				}
			}
			if lintOK && buildErr != nil {
				t.Fatalf("lint accepted %q, the notifier refused it: %v", u, buildErr)
			}
			if want := !strings.Contains(u, ":99999") && !strings.Contains(u, ":0/") && strings.HasPrefix(u, "http") && !strings.Contains(u, "///") && !strings.Contains(u, " "); lintOK != want {
				t.Fatalf("lint accepts %q: %v, want %v (%s)", u, lintOK, want, ds)
			}
		})
	}
}

// restarts(agent, window) counts 0 for a window that is not a duration, so
// a row like `restarts("abiba", "1 hour") > 3` never held; lint refuses
// the window.
func TestRestartsWindowIsADuration(t *testing.T) {
	for _, tc := range []struct{ window, err string }{
		{"1h", ""},
		{"90m", ""},
		{"1 hour", `restarts(agent, "1 hour"): the window must be a duration like 1h or 30m`},
		{"0s", `restarts(agent, "0s")`},
	} {
		src := "---\nname: v\nruntime_contract: 2\n---\n\n## Execution\n\n### S {#s agent=a}\n\n```bash {id=p}\necho up\n```\n\n" +
			"| Condition | Action |\n|---|---|\n| `restarts(\"a\", \"" + tc.window + "\") > 3` | Alert — crash loop |\n"
		_, ds := contracts.Parse("v.md", []byte(src), contracts.Options{})
		if tc.err == "" && ds.HasErrors() || tc.err != "" && !strings.Contains(ds.String(), tc.err) {
			t.Errorf("window %q: %s", tc.window, ds)
		}
	}
}
