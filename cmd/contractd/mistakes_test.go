package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
)

// webLocal is a contract written from docs/contract-format.md alone: a
// local web service's health endpoint (a JSON answer, declared by an
// example), its port, its disk, and a report-only cache.
const webLocal = `---
name: web-local
runtime_contract: 2
schedule: {every: 1m}
report_only_agents: [cache]
guards: {debounce: 0s, grace: 1s, budget: "3 per 1h"}
targets:
  here: {local: true}
vars:
  base: http://127.0.0.1:8080
  addr: "127.0.0.1:8080"
  state_dir: /tmp/web
  max_used_pct: 100
---

# Local web service

The API answers on /health; the state directory holds its restart marker.

## Execution

### API {#api agent=web on=here}

` + "```http {id=health timeout=5s}" + `
GET ${base}/health
` + "```" + `

A healthy service answers:

` + "```json {example=health}" + `
{"status": "ok", "queue": {"depth": 0}, "workers": 4}
` + "```" + `

| Field | Healthy | Degraded | Critical |
|-------|---------|----------|----------|
| ` + "`http_status`" + ` | ` + "`\"200\"`" + ` | | != "200" |
| ` + "`status`" + ` | ok | | != ok |
| ` + "`queue.depth`" + ` | < 100 | 100–999 | 1000+ |

` + "```tcp {id=port timeout=2s}" + `
${addr}
` + "```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`open`" + ` | true | false |

| Condition | Action |
|-----------|--------|
| ` + "`health.http_status == \"503\" && port.open`" + ` | ` + "`touch \"${state_dir}/restarted\"`" + ` |
| ` + "`severity == \"degraded\"`" + ` | Alert — the queue is backing up |

### Disk {#disk agent=web on=here}

` + "```bash {id=usage as=json fields=\"used_pct:int\"}" + `
df -P "$state_dir" | awk 'NR==2 {printf "{\"used_pct\": %d}\n", $5+0}'
` + "```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`used_pct`" + ` | ` + "`it < vars.max_used_pct`" + ` | ` + "`it >= vars.max_used_pct`" + ` |

### Cache {#cache agent=cache on=here}

` + "```sh {id=cachefile}" + `
if test -f "$state_dir/cache.ok"; then echo fresh; else echo stale; fi
` + "```" + `

Expected: ` + "`fresh`" + `

| Condition | Action |
|-----------|--------|
| ` + "`cachefile.stdout == \"stale\"`" + ` | ` + "`touch \"${state_dir}/cache.ok\"`" + ` |
`

// workerSSH is the second, over ssh: a worker whose running flag and job
// counts live in a directory on the host.
const workerSSH = `---
name: worker-ssh
runtime_contract: 2
guards: {debounce: 0s, grace: 1s}
targets:
  box: {ssh: "{{login}}", identity: ["{{key}}"], known_hosts: "{{known}}"}
vars:
  dir: /tmp/worker
---

# Worker over ssh

## Execution

### Worker {#worker agent=worker on=box}

` + "```sh {id=alive}" + `
if test -f "$dir/running"; then echo running; else echo stopped; fi
` + "```" + `

Expected: ` + "`running`" + `

` + "```bash {id=load as=json fields=\"jobs:int failed:int\"}" + `
printf '{"jobs": %d, "failed": %d}\n' "$(ls "$dir/jobs" 2>/dev/null | wc -l)" "$(ls "$dir/failed" 2>/dev/null | wc -l)"
` + "```" + `

| Field | Healthy | Degraded | Critical |
|-------|---------|----------|----------|
| ` + "`jobs`" + ` | < 50 | 50+ | |
| ` + "`failed`" + ` | 0 | 1–4 | 5+ |

| Condition | Action | Guards |
|-----------|--------|--------|
| ` + "`alive.stdout == \"stopped\"`" + ` | ` + "`touch \"${dir}/running\"`" + ` | after=1 |
| ` + "`failed >= 5`" + ` | Escalate — jobs keep failing | |
`

// mistakes are one-keystroke mistakes in the two contracts, each of which
// would change what the run alerts or repairs: lint --strict refuses each
// with an error at the line of the mistake and the name that was meant.
var mistakes = []struct {
	name, contract, from, to, want string
}{
	{"a JSON field", "web", "| `status` | ok |", "| `statsu` | ok |", `field statsu: step health (http) produces no value statsu (did you mean "status"?)`},
	{"a nested JSON field", "web", "`queue.depth`", "`queue.dpeth`", `queue.dpeth: step health declares no field queue.dpeth (did you mean "depth"?)`},
	{"a tcp value", "web", "| `open` | true |", "| `opne` | true |", `field opne: step port (tcp) produces no value opne (did you mean "open"?)`},
	{"a health header", "web", "| Field | Healthy | Critical |\n|-------|---------|----------|\n| `open`", "| Feild | Healthy | Critical |\n|-------|---------|----------|\n| `open`", `table header "Feild": did you mean "Field"?`},
	{"a delimiter row one column short", "web", "| Field | Healthy | Critical |\n|-------|---------|----------|\n| `used_pct`", "| Field | Healthy | Critical |\n|-------|---------|\n| `used_pct`", `table delimiter row has 2 columns and its header 3, so Markdown reads the table as a paragraph (did you mean "|---|---|---|"?)`},
	{"a severity in a condition", "web", `severity == "degraded"`, `severity == "degarded"`, `severity compared with "degarded", which is not a severity (did you mean "degraded"?)`},
	{"a step value in a condition", "web", "health.http_status ==", "health.http_staus ==", `health.http_staus: step health (http) produces no value http_staus (did you mean "http_status"?)`},
	{"a report-only agent", "web", "report_only_agents: [cache]", "report_only_agents: [cahce]", `report_only_agents: "cahce" names no agent of this contract (did you mean "cache"?)`},
	{"a quoted number", "web", "`it < vars.max_used_pct`", "`it < \"100\"`", "invalid operation: < (mismatched types int and string) (did you mean `it < 100`?)"},
	{"a bare status code", "web", "| `http_status` | `\"200\"` |", "| `http_status` | 200 |", "invalid operation: == (mismatched types string and int) (did you mean `it == \"200\"`?)"},
	{"a JSON field of an exec step", "ssh", "| `failed` | 0 |", "| `faild` | 0 |", `field faild: step load (bash, as=json) produces no value faild (did you mean "failed"?)`},
	{"a value by step id", "ssh", "`alive.stdout ==", "`alive.stdot ==", `alive.stdot: step alive (sh) produces no value stdot (did you mean "stdout"?)`},
	{"a target", "ssh", "on=box}", "on=bxo}", `undefined target "bxo" in on= (did you mean "box"?)`},
	{"an action header", "ssh", "| Condition | Action | Guards |", "| Condition | Actoin | Guards |", `table header "Actoin": did you mean "Action"?`},
	{"an as= form", "ssh", "as=json fields", "as=jsn fields", `as: a bash step's output is read as text, json or lines, got "jsn" (did you mean "json"?)`},
}

// TestOneKeystrokeMistakesAreLintErrors: each mistake above linted clean
// before step kinds declared their values and lint checked names, types
// and table shapes against them; now lint --strict exits 1 with
// FILE:LINE:COL: error: … did you mean … for every one, and the two
// contracts as written lint clean.
func TestOneKeystrokeMistakesAreLintErrors(t *testing.T) {
	dir := t.TempDir()
	sources := map[string]string{
		"web": webLocal,
		"ssh": strings.NewReplacer("{{login}}", "me@127.0.0.1:2222", "{{key}}", "/nonexistent/key", "{{known}}", "/nonexistent/known_hosts").Replace(workerSSH),
	}
	for name, src := range sources {
		path := filepath.Join(dir, name+".md")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := runMain(t, "contractd", "lint", "--strict", path); code != 0 {
			t.Fatalf("%s as written: lint --strict exit %d\n%s%s", name, code, out, errs)
		}
	}
	for _, m := range mistakes {
		t.Run(m.name, func(t *testing.T) {
			src := sources[m.contract]
			bad := strings.Replace(src, m.from, m.to, 1)
			if bad == src {
				t.Fatalf("the %s contract has no %q", m.contract, m.from)
			}
			path := filepath.Join(t.TempDir(), m.contract+".md")
			if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			line := firstDifference(src, bad)
			code, out, _ := runMain(t, "contractd", "lint", "--strict", path)
			prefix := fmt.Sprintf("%s:%d:", path, line)
			found := false
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, prefix) && strings.Contains(l, ": error: ") && strings.Contains(l, m.want) {
					found = true
				}
			}
			if code != 1 || !found {
				t.Fatalf("lint --strict exit %d; want 1 and an error on line %d containing %q:\n%s", code, line, m.want, out)
			}
		})
	}
}

// TestAuthoredContractsRunAgainstRealTargets: the two contracts, as
// written, against a real HTTP service on loopback and the engine's own
// host, and over a real sshd: each is healthy when its target is, and
// each fault is repaired once, with the command the contract declares.
func TestAuthoredContractsRunAgainstRealTargets(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		var status atomic.Int32
		status.Store(200)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status.Load()))
			fmt.Fprint(w, `{"status": "ok", "queue": {"depth": 3}, "workers": 4}`)
		}))
		defer srv.Close()
		state := t.TempDir()
		os.WriteFile(filepath.Join(state, "cache.ok"), nil, 0o644)
		path := writeFile(t, "web-local.md", webLocal)
		run := func() (int, string) {
			code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", filepath.Join(state, "engine"), "--verify-grace", "100ms",
				"--var", "base="+srv.URL, "--var", "addr="+strings.TrimPrefix(srv.URL, "http://"), "--var", "state_dir="+state, path)
			return code, out + errs
		}
		if code, out := run(); code != 0 || !strings.Contains(out, "HEALTHY") {
			t.Fatalf("healthy service: exit %d\n%s", code, out)
		}
		status.Store(503)
		if code, out := run(); code != 0 || !strings.Contains(out, "touch") {
			t.Fatalf("503: exit %d\n%s", code, out)
		}
		if _, err := os.Stat(filepath.Join(state, "restarted")); err != nil {
			t.Fatalf("the declared repair did not run: %v", err)
		}
		// The cache is report-only: stale, it is reported and never touched.
		os.Remove(filepath.Join(state, "cache.ok"))
		status.Store(200)
		if code, out := run(); code != 0 || !strings.Contains(out, "report-only") {
			t.Fatalf("stale cache: exit %d\n%s", code, out)
		}
		if _, err := os.Stat(filepath.Join(state, "cache.ok")); err == nil {
			t.Fatal("the report-only cache was repaired")
		}
	})

	t.Run("ssh", func(t *testing.T) {
		need.SSHD(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := sshd.Start(ctx, sshd.Options{QuietLogin: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop() })
		work := t.TempDir()
		src := strings.NewReplacer("{{login}}", s.User+"@"+s.Addr, "{{key}}", s.IdentityFile, "{{known}}", s.KnownHostsFile).Replace(workerSSH)
		path := writeFile(t, "worker-ssh.md", src)
		state := t.TempDir()
		run := func() (int, string) {
			code, out, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", state, "--verify-grace", "100ms", "--var", "dir="+work, path)
			return code, out + errs
		}
		if code, out := run(); code != 0 || !strings.Contains(out, "remediated") {
			t.Fatalf("stopped worker: exit %d, want its repair verified\n%s", code, out)
		}
		if _, err := os.Stat(filepath.Join(work, "running")); err != nil {
			t.Fatalf("the declared repair did not run over ssh: %v", err)
		}
		if code, out := run(); code != 0 || !strings.Contains(out, "HEALTHY") {
			t.Fatalf("running worker: exit %d\n%s", code, out)
		}
	})
}

// firstDifference is the 1-based line where a and b first differ.
func firstDifference(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
