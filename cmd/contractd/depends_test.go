package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/fixtures/wait"
)

// hook is a webhook receiver: every message POSTed to it.
type hook struct {
	mu   sync.Mutex
	msgs []map[string]any
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m map[string]any
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &m) == nil {
		h.mu.Lock()
		h.msgs = append(h.msgs, m)
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func (h *hook) all() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.msgs...)
}

// depRig is a jump host's sshd, a host behind it, and a directory of six
// contracts under `contractd serve`: jumphost watches the jump host,
// behind-1..3 reach their hosts through it (via), api-1 and api-2 depend
// on it by depends_on (the contract, and its agent). Every contract has
// two routes: a log file and a webhook.
type depRig struct {
	t                  *testing.T
	bin, dir, state    string
	jump, back         *sshd.Server
	log, repairs, addr string
	hook               *hook
}

var dependents = map[string]string{"behind-1": "web1", "behind-2": "web2", "behind-3": "web3", "api-1": "api1", "api-2": "api2"}

func startDepRig(t *testing.T) *depRig {
	need.SSHD(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &depRig{t: t, bin: binary(t), dir: t.TempDir(), state: t.TempDir(), hook: &hook{}}
	var err error
	if r.jump, err = sshd.Start(ctx, sshd.Options{QuietLogin: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.jump.Stop() })
	if r.back, err = sshd.Start(ctx, sshd.Options{QuietLogin: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.back.Stop() })
	srv := httptest.NewServer(r.hook)
	t.Cleanup(srv.Close)
	r.log, r.repairs = filepath.Join(r.dir, "messages.log"), filepath.Join(r.dir, "repairs")

	target := func(name string, s *sshd.Server, via string) string {
		v := ""
		if via != "" {
			v = "via: " + via + ", "
		}
		return fmt.Sprintf("  %s: {%sssh: %s@%s, identity: %s, known_hosts: %s, connect_timeout: 2s}\n", name, v, s.User, s.Addr, s.IdentityFile, s.KnownHostsFile)
	}
	front := func(name, every, extra string) string {
		return fmt.Sprintf("---\nname: %s\nruntime_contract: 2\nschedule: {every: %s, on_start: true}\n%snotify:\n  - {log: {path: %s}}\n  - {webhook: {url: %q, retries: 0}}\n---\n\n## Execution\n",
			name, every, extra, r.log, srv.URL)
	}
	repair := fmt.Sprintf("\n| Condition | Action |\n|-----------|--------|\n| `%%s` | `echo %%s >> %s` |\n", r.repairs)
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(r.dir, name+".md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("jumphost", front("jumphost", "2s", "targets:\n"+target("jump", r.jump, ""))+
		"\n### Jump host {#jump agent=jump on=jump}\n\n```sh {id=probe timeout=5s}\necho up\n```\nExpected: `up`\n")
	for i := 1; i <= 3; i++ {
		name, agent := fmt.Sprintf("behind-%d", i), fmt.Sprintf("web%d", i)
		write(name, front(name, "1m", "targets:\n"+target("jump", r.jump, "")+target(agent, r.back, "jump"))+
			fmt.Sprintf("\n### Web {#web agent=%s on=%s}\n\n```sh {id=probe timeout=5s}\necho up\n```\nExpected: `up`\n", agent, agent)+
			fmt.Sprintf(repair, `probe.stdout != "up"`, name))
	}
	for i, dep := range []string{"jumphost", "jumphost/jump"} {
		name, agent := fmt.Sprintf("api-%d", i+1), fmt.Sprintf("api%d", i+1)
		write(name, front(name, "1m", "depends_on: ["+dep+"]\n")+
			fmt.Sprintf("\n### API {#api agent=%s}\n\n```tcp {id=port timeout=2s}\n%s\n```\n\n| Field | Healthy | Critical |\n|-------|---------|----------|\n| `open` | true | false |\n", agent, r.jump.Addr)+
			fmt.Sprintf(repair, `port.open == false`, name))
	}
	// What the docs promise: lint is clean, --strict too.
	if out, err := owner.Command(r.bin, "lint", "--strict", r.dir).CombinedOutput(); err != nil {
		t.Fatalf("lint --strict: %v\n%s", err, out)
	}
	r.addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(depToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startProc(t, r.state, "contractd", r.bin, "serve", "--dir", r.dir, "--state-dir", r.state, "--listen", r.addr, "--socket", "none", "--stagger", "0",
		"--token-file", tokenFile)
	return r
}

// status is `contractd status --json` by contract.
func (r *depRig) status() map[string]struct {
	Severity string            `json:"severity"`
	Agents   map[string]string `json:"agents"`
} {
	out, err := owner.Command(r.bin, "status", "--json", "--state-dir", r.state).Output()
	if err != nil {
		return nil
	}
	var sums []struct {
		Contract string            `json:"contract"`
		Severity string            `json:"severity"`
		Agents   map[string]string `json:"agents"`
	}
	if json.Unmarshal(out, &sums) != nil {
		return nil
	}
	m := map[string]struct {
		Severity string            `json:"severity"`
		Agents   map[string]string `json:"agents"`
	}{}
	for _, s := range sums {
		m[s.Contract] = struct {
			Severity string            `json:"severity"`
			Agents   map[string]string `json:"agents"`
		}{s.Severity, s.Agents}
	}
	return m
}

var sample = regexp.MustCompile(`^(\w+)\{([^}]*)\} (\S+)$`)

// metric returns the value of series name whose labels include want; -1
// when there is none.
func (r *depRig) metric(name string, want map[string]string) float64 {
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	total, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := sample.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name {
			continue
		}
		ok := true
		for k, v := range want {
			if !strings.Contains(m[2], k+`="`+v+`"`) {
				ok = false
			}
		}
		if ok {
			v, _ := strconv.ParseFloat(m[3], 64)
			total, found = total+v, true
		}
	}
	if !found {
		return -1
	}
	return total
}

// logLines are the messages the log route wrote.
func (r *depRig) logLines() []string {
	b, _ := os.ReadFile(r.log)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// runs is how many runs of contract the history holds.
func (r *depRig) runs(contract string) []store.RunRecord {
	st, err := store.Open(r.state)
	if err != nil {
		return nil
	}
	h, _ := st.History(contract, 200)
	return h
}

// The check: a jump host's sshd stopped, with three contracts
// reaching through it and two depending on it by depends_on, gives one
// message per route (the jump host's, naming the five it suppresses), no
// repair of a dependent, and every dependent suppressed in `status
// --json` and /metrics; sshd started again, the dependents are healthy
// at their next run, which comes at once, and say nothing.
func TestAJumpHostDownIsOneMessagePerRoute(t *testing.T) {
	r := startDepRig(t)
	wait.Until(t, "every contract healthy", func() (bool, string) {
		st := r.status()
		for _, name := range []string{"jumphost", "behind-1", "behind-2", "behind-3", "api-1", "api-2"} {
			if st[name].Severity != "healthy" {
				return false, fmt.Sprintf("%s is %q", name, st[name].Severity)
			}
		}
		return true, ""
	})

	if err := r.jump.Kill(); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "every dependent suppressed in status --json and /metrics", func() (bool, string) {
		st := r.status()
		if st["jumphost"].Severity != "critical" {
			return false, "jumphost is " + st["jumphost"].Severity
		}
		for c, a := range dependents {
			if st[c].Severity != "suppressed" || st[c].Agents[a] != "suppressed" {
				return false, fmt.Sprintf("%s is %q, its agent %s %q", c, st[c].Severity, a, st[c].Agents[a])
			}
			if v := r.metric("contractd_agent_state", map[string]string{"contract": c, "agent": a, "state": "suppressed"}); v != 1 {
				return false, fmt.Sprintf("contractd_agent_state{contract=%q,agent=%q,state=\"suppressed\"} = %v", c, a, v)
			}
		}
		return true, ""
	})
	// The status page groups them under their root cause.
	resp, err := http.Get("http://" + r.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	root := regexp.MustCompile(`(?s)<li class="root" data-root="jumphost/jump"><b>jumphost/jump</b> — 5 suppressed:(.*?)</ul></li>`).FindSubmatch(page)
	if root == nil || strings.Count(string(root[1]), `class="suppressed-unit"`) != 5 {
		t.Fatalf("the page does not group the five under jumphost/jump:\n%s", page)
	}
	for c, a := range dependents {
		if !strings.Contains(string(root[1]), `data-unit="`+c+"/"+a+`"`) {
			t.Fatalf("%s/%s is not under jumphost/jump on the page:\n%s", c, a, root[1])
		}
	}
	// why names the dependency and the root cause.
	for c, a := range map[string]string{"behind-1": "web1", "api-2": "api2"} {
		out, _ := owner.Command(r.bin, "why", "--state-dir", r.state, c).CombinedOutput()
		if !strings.Contains(string(out), a+": suppressed, not repaired and not alerted: jumphost/jump is unreachable") || !strings.Contains(string(out), "(root cause jumphost/jump)") {
			t.Fatalf("why %s:\n%s", c, out)
		}
	}
	// Two more runs of every dependent after that: still nothing more.
	before := map[string]int{}
	for c := range dependents {
		before[c] = len(r.runs(c))
	}
	for c := range dependents {
		r.pokeRun(c)
	}
	wait.Until(t, "two more runs of every dependent", func() (bool, string) {
		for c := range dependents {
			if n := len(r.runs(c)); n < before[c]+2 {
				r.pokeRun(c)
				return false, fmt.Sprintf("%s: %d runs since", c, n-before[c])
			}
		}
		return true, ""
	})
	lines, hooked := r.logLines(), r.hook.all()
	if len(lines) != 1 || len(hooked) != 1 {
		t.Fatalf("messages while the jump host is down: log route %d %q, webhook %d %v; want one each", len(lines), lines, len(hooked), hooked)
	}
	if hooked[0]["contract"] != "jumphost" || !strings.Contains(lines[0], "jumphost: [open] jump is unreachable") ||
		!strings.Contains(lines[0], "5 units suppressed: api-1/api1, api-2/api2, behind-1/web1, behind-2/web2 and 1 more") {
		t.Fatalf("the one message is not the jump host's, naming what it suppresses: %q", lines[0])
	}
	if b, err := os.ReadFile(r.repairs); err == nil || len(b) > 0 {
		t.Fatalf("dependents repaired: %q", b)
	}
	for c := range dependents {
		if v := r.metric("contractd_repairs_total", map[string]string{"contract": c}); v > 0 {
			t.Fatalf("contractd_repairs_total{contract=%q} = %v", c, v)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.jump.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var back time.Time
	wait.Until(t, "the jump host healthy again", func() (bool, string) {
		for _, h := range r.runs("jumphost") {
			if h.OverallSeverity == "healthy" && h.StartedAt.After(r.lastFailure()) {
				back = h.StartedAt
				return true, ""
			}
		}
		return false, "not yet"
	})
	// Each dependent's next run is at once (its interval is a minute) and
	// healthy.
	for c, a := range dependents {
		wait.Until(t, c+" judged again after the jump host", func() (bool, string) {
			for _, h := range r.runs(c) {
				if h.StartedAt.After(back) {
					if h.OverallSeverity != "healthy" || h.Agents[a] != "healthy" {
						t.Fatalf("%s's first run after the jump host came back is %s (%v)", c, h.OverallSeverity, h.Agents)
					}
					t.Logf("%s judged %s after the jump host came back: %s", c, h.StartedAt.Sub(back).Round(time.Millisecond), h.OverallSeverity)
					if d := h.StartedAt.Sub(back); d > 20*time.Second {
						t.Fatalf("%s judged %s after the jump host came back: at its next tick, not at once", c, d)
					}
					return true, ""
				}
			}
			return false, "no run since"
		})
	}
	wait.Until(t, "the jump host's resolve on both routes", func() (bool, string) {
		return len(r.logLines()) == 2 && len(r.hook.all()) == 2, fmt.Sprintf("%q", r.logLines())
	})
	for _, m := range r.hook.all() {
		if m["contract"] != "jumphost" {
			t.Fatalf("a message from %v: %v", m["contract"], m)
		}
	}
	t.Logf("log route:\n%s", strings.Join(r.logLines(), "\n"))
	if l := r.logLines()[1]; !strings.Contains(l, "jumphost: [resolved] jump is healthy again") {
		t.Fatalf("second message %q", l)
	}
}

// lastFailure is when the jump host was last judged not healthy.
func (r *depRig) lastFailure() time.Time {
	var at time.Time
	for _, h := range r.runs("jumphost") {
		if h.OverallSeverity != "healthy" {
			at = h.StartedAt
		}
	}
	return at
}

const depToken = "dependency-test-token"

// pokeRun asks the daemon to run contract now (POST /contracts/NAME/run);
// a run already going is fine.
func (r *depRig) pokeRun(contract string) {
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+"/contracts/"+contract+"/run", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+depToken)
	c := http.Client{Timeout: 30 * time.Second}
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
}

// `contractd lint DIR` refuses two contracts that depend on each other,
// at the entry of each that closes the cycle.
func TestLintRefusesADependencyCycleBetweenTwoContracts(t *testing.T) {
	dir := t.TempDir()
	for name, dep := range map[string]string{"web": "db", "db": "web/site"} {
		text := "---\nname: " + name + "\nruntime_contract: 2\ndepends_on: [" + dep + "]\n---\n\n## Execution\n\n### Site {#site agent=site}\n\n```sh {id=probe}\necho up\n```\nExpected: `up`\n"
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"lint", dir}, {"lint", filepath.Join(dir, "web.md")}} {
		out, err := owner.Command(binary(t), args...).CombinedOutput()
		if err == nil {
			t.Fatalf("%v: exit 0:\n%s", args, out)
		}
		want := filepath.Join(dir, "web.md") + ":4:14: error: depends_on: dependency cycle web → db → web"
		if !strings.Contains(string(out), want) {
			t.Fatalf("%v:\n%s\nwant a line starting %q", args, out, want)
		}
		if args[1] == dir && !strings.Contains(string(out), filepath.Join(dir, "db.md")+":4:14: error: depends_on: dependency cycle db → web → db") {
			t.Fatalf("%v: the cycle is not reported in db.md too:\n%s", args, out)
		}
	}
}

// A contract with another error still says its misspelt dependency, and
// the contracts that depend on it do not hear that it is missing: lint of
// a directory reports every mistake in one pass.
func TestLintOfABrokenContractStillChecksItsDependencies(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		// A bad calendar, and a misspelt dependency.
		"frontend": "---\nname: frontend\nruntime_contract: 2\ndepends_on: [upstrem]\nmaintenance:\n  - {calendar: \"Mon-Fri 02:00\", for: 1h}\n---\n",
		"upstream": "---\nname: upstream\nruntime_contract: 2\n---\n",
		"edge":     "---\nname: edge\nruntime_contract: 2\ndepends_on: [frontend]\n---\n",
	}
	for name, front := range files {
		text := front + "\n## Execution\n\n### Site {#site agent=site}\n\n```sh {id=probe}\necho up\n```\nExpected: `up`\n"
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"lint", dir}, {"lint", filepath.Join(dir, "frontend.md"), filepath.Join(dir, "edge.md")}} {
		out, err := owner.Command(binary(t), args...).CombinedOutput()
		if err == nil {
			t.Fatalf("%v: exit 0:\n%s", args, out)
		}
		for _, want := range []string{
			filepath.Join(dir, "frontend.md") + ":6:17: error: maintenance[0].calendar:",
			filepath.Join(dir, "frontend.md") + `:4:14: error: depends_on: no contract named "upstrem" runs beside this one (did you mean "upstream"?)`,
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%v:\n%s\nwant a line starting %q", args, out, want)
			}
		}
		if strings.Contains(string(out), `no contract named "frontend"`) {
			t.Errorf("%v: edge hears that frontend, which is there with an error, is missing:\n%s", args, out)
		}
	}
}

// haDepContract is a contract of the HA dependency test: its probe reads
// the shared state (up or down); depends names its dependency, and a leaf
// repairs (a line in repairs) when it sees down.
func haDepContract(name, every, depends string) string {
	front := "---\nname: " + name + "\nruntime_contract: 2\nschedule: {every: " + every + ", on_start: true}\n"
	if depends != "" {
		front += "depends_on: [" + depends + "]\n"
	}
	front += "vars:\n  dir: /nonexistent\nnotify:\n  - {log: {path: \"${dir}/pages.txt\"}}\n---\n\n## Execution\n\n### Service {#svc agent=svc}\n\n" +
		"```sh {id=probe timeout=20s}\ncat \"${dir}/state\" 2>/dev/null || echo down\n```\n\n| Field | Healthy | Critical |\n|-------|---------|----------|\n| `stdout` | `up` | `down` |\n"
	if depends != "" {
		front += "\n| Condition | Action |\n|-----------|--------|\n| `probe.stdout == \"down\"` | `echo " + name + " >> \"${dir}/repairs\"` |\n"
	}
	return front
}

// Under --etcd, with the dependency and its dependent run by different
// nodes: the dependent's node reads the dependency's verdict as its owner
// wrote it, suppresses its unit (no repair, no message), and judges it
// again at once when the dependency is back.
func TestHADependencyOwnedByAnotherNode(t *testing.T) {
	nodes := []string{"n1", "n2"}
	leaf := ""
	for i := 1; i < 50 && leaf == ""; i++ {
		if name := fmt.Sprintf("leaf-%d", i); serve.Rendezvous(nodes, name) != serve.Rendezvous(nodes, "core") {
			leaf = name
		}
	}
	r := startHA(t, 2, map[string]string{"core": haDepContract("core", "1s", ""), leaf: haDepContract(leaf, "1m", "core/svc")})
	r.setState("up")
	coreOwner, leafOwner := r.settled("core"), r.settled(leaf)
	if coreOwner.name == leafOwner.name {
		t.Fatalf("core and %s both owned by %s", leaf, coreOwner.name)
	}
	severity := func(name string) string { return leafOwner.contracts()[name].LastSeverity }
	wait.Until(t, "both healthy", func() (bool, string) {
		return severity("core") == "healthy" && severity(leaf) == "healthy", severity("core") + " " + severity(leaf)
	})

	r.setState("down")
	wait.Until(t, leaf+" suppressed, as its owner reads core's verdict", func() (bool, string) {
		return severity("core") == "critical" && severity(leaf) == "suppressed", severity("core") + " " + severity(leaf)
	})
	wait.Until(t, leaf+"'s owner exports it suppressed", func() (bool, string) {
		owner := r.ownerOf(leaf)
		if owner == "" {
			return false, "no agreed owner"
		}
		v := r.node(owner).metric(`contractd_agent_state{agent="svc",contract="` + leaf + `",state="suppressed"}`)
		return v == 1, fmt.Sprintf("%s exports %v", owner, v)
	})
	if n := r.lines("repairs"); n != 0 {
		t.Fatalf("%s repaired %d times while core is down", leaf, n)
	}
	if pages := readFile(t, filepath.Join(r.work, "pages.txt")); strings.Count(strings.TrimSpace(pages), "\n") != 0 || !strings.Contains(pages, "core: [open] svc is critical") {
		t.Fatalf("pages while core is down, want core's one:\n%s", pages)
	}

	r.setState("up")
	var back time.Time
	wait.Until(t, "core healthy", func() (bool, string) {
		back = time.Now()
		return severity("core") == "healthy", severity("core")
	})
	wait.Until(t, leaf+" healthy", func() (bool, string) { return severity(leaf) == "healthy", severity(leaf) })
	if d := time.Since(back); d > 20*time.Second {
		t.Fatalf("%s judged healthy %s after core: at its next tick (1m), not at once", leaf, d)
	}
	if pages := readFile(t, filepath.Join(r.work, "pages.txt")); strings.Contains(pages, leaf+":") {
		t.Fatalf("%s sent messages:\n%s", leaf, pages)
	}
}
