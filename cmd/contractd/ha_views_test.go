package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store/etcdstore"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// What an operator sees of a group of instances (serve --etcd): every
// node's status page, /contracts and /metrics, and status, why and
// history --etcd, must tell the same truth for every contract — its owner,
// the owner's last run and severity, open incidents, maintenance windows,
// history — after every fault; and a contract's series come from its
// owner only.

// viewContract is a contract that runs once an hour (and at once when it
// is taken over), so what each node shows of it holds still long enough
// to be compared; its agent is down while the file ${dir}/NAME does not
// say up, and a down agent opens an incident.
func viewContract(name string) string {
	return `---
name: ` + name + `
runtime_contract: 2
schedule: {every: 1h, on_start: true}
vars:
  dir: /nonexistent
notify:
  - {log: {path: "${dir}/pages-` + name + `.txt"}}
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe}\ncat \"${dir}/" + name + "\" 2>/dev/null || echo down\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |
`
}

// nodeView is what one node shows of one contract, from its status page
// and /contracts; the page and the API of a node must agree.
type nodeView struct {
	Owner       string
	LastRun     string // to the second, as the page shows it
	LastRunID   string
	Severity    string
	Incidents   []string // agent: condition
	Maintenance []string // agents
	Strip       []string // the page's history strip: "time: severity" per run
}

// get fetches path from a node; "" and an error when it does not answer
// within 5 s.
func (n *haNode) get(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

var (
	pageSection  = regexp.MustCompile(`(?s)<section class="contract [a-z]*" id="contract-([^"]+)" data-severity="([a-z]*)">(.*?)</section>`)
	pageOwner    = regexp.MustCompile(`owned by <b class="owner">([^<]+)</b>`)
	pageLastRun  = regexp.MustCompile(`last run [^(]* ago \(([^)]+)\)`)
	pageIncident = regexp.MustCompile(`<li class="incident">open incident: ([^<]*), since`)
	pageWindow   = regexp.MustCompile(`<div class="window">maintenance of ([^ ]+(?: contract)?) until`)
	pageStrip    = regexp.MustCompile(`<title>([^<]*)</title>`)
	pageEtcd     = regexp.MustCompile(`id="group" data-etcd="([a-z]+)"`)
)

// views returns what node n shows of every contract, and whether its
// page says etcd is up; an error when a page or the API does not answer,
// or when the two disagree.
func (n *haNode) views() (map[string]nodeView, bool, error) {
	page, err := n.get("/")
	if err != nil {
		return nil, false, err
	}
	api, err := n.get("/contracts")
	if err != nil {
		return nil, false, err
	}
	var list struct {
		Contracts []struct {
			Name         string     `json:"name"`
			Owner        string     `json:"owner"`
			LastRunAt    *time.Time `json:"last_run_at"`
			LastRunID    string     `json:"last_run_id"`
			LastSeverity string     `json:"last_severity"`
			Incidents    []struct {
				Agent     string `json:"agent"`
				Condition string `json:"condition"`
			} `json:"open_incidents"`
			Maintenance map[string]any `json:"maintenance"`
		} `json:"contracts"`
	}
	if err := json.Unmarshal([]byte(api), &list); err != nil {
		return nil, false, fmt.Errorf("/contracts: %v", err)
	}
	out := map[string]nodeView{}
	for _, c := range list.Contracts {
		v := nodeView{Owner: c.Owner, LastRunID: c.LastRunID, Severity: c.LastSeverity}
		if c.LastRunAt != nil {
			v.LastRun = c.LastRunAt.UTC().Format("2006-01-02 15:04:05Z")
		} else {
			v.Severity = "unknown" // the page's word for a contract that never ran
		}
		for _, inc := range c.Incidents {
			v.Incidents = append(v.Incidents, inc.Agent+": "+inc.Condition)
		}
		for a := range c.Maintenance {
			v.Maintenance = append(v.Maintenance, a)
		}
		sort.Strings(v.Maintenance)
		out[c.Name] = v
	}
	seen := 0
	for _, m := range pageSection.FindAllStringSubmatch(page, -1) {
		name, sev, body := m[1], m[2], m[3]
		v, ok := out[name]
		if !ok {
			return nil, false, fmt.Errorf("the page shows %s, /contracts does not", name)
		}
		seen++
		page := nodeView{Severity: sev, LastRunID: v.LastRunID, Maintenance: v.Maintenance}
		if o := pageOwner.FindStringSubmatch(body); o != nil {
			page.Owner = o[1]
		}
		if l := pageLastRun.FindStringSubmatch(body); l != nil {
			page.LastRun = l[1]
		}
		for _, i := range pageIncident.FindAllStringSubmatch(body, -1) {
			page.Incidents = append(page.Incidents, strings.Replace(i[1], "whole contract", "*", 1))
		}
		var windows []string
		for _, w := range pageWindow.FindAllStringSubmatch(body, -1) {
			windows = append(windows, strings.Replace(w[1], "whole contract", "*", 1))
		}
		sort.Strings(windows)
		if !reflect.DeepEqual(windows, v.Maintenance) {
			return nil, false, fmt.Errorf("%s: the page shows maintenance of %v, /contracts %v", name, windows, v.Maintenance)
		}
		for _, s := range pageStrip.FindAllStringSubmatch(body, -1) {
			page.Strip = append(page.Strip, s[1])
		}
		v.Strip = page.Strip
		if !reflect.DeepEqual(page, v) {
			return nil, false, fmt.Errorf("%s: the page shows %+v, /contracts %+v", name, page, v)
		}
		out[name] = v
	}
	if seen != len(out) {
		return nil, false, fmt.Errorf("the page shows %d contracts, /contracts %d", seen, len(out))
	}
	etcd := pageEtcd.FindStringSubmatch(page)
	if etcd == nil {
		return nil, false, fmt.Errorf("the page does not say how etcd is")
	}
	return out, etcd[1] == "up", nil
}

// exported returns the contracts whose contract-level series a node's
// /metrics carries, and those it says it owns.
func (n *haNode) exported() (series, owned map[string]bool, err error) {
	text, err := n.get("/metrics")
	if err != nil {
		return nil, nil, err
	}
	series, owned = map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "#") || !strings.Contains(l, `contract="`) {
			continue
		}
		c := l[strings.Index(l, `contract="`)+len(`contract="`):]
		c = c[:strings.Index(c, `"`)]
		if strings.HasPrefix(l, "contractd_contract_owned{") {
			if strings.HasSuffix(l, " 1") {
				owned[c] = true
			}
			continue
		}
		series[c] = true
	}
	return series, owned, nil
}

// live returns the instances that run, in name order.
func (r *haRig) live() []*haNode {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*haNode
	seen := map[string]bool{}
	for i := len(r.nodes) - 1; i >= 0; i-- {
		if n := r.nodes[i]; n.alive() && !seen[n.name] {
			seen[n.name] = true
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// agree waits until every live node shows the same of every contract,
// each contract has an owner among them (with etcd up, the one rendezvous
// hashing gives it), its series come from that owner only, and every page
// says etcd is up (or down, with up false), and
// returns what they show. ok checks what they agree on; it must hold too.
func (r *haRig) agree(names []string, etcdUp bool, what string, ok func(map[string]nodeView) error) map[string]nodeView {
	r.t.Helper()
	var agreed map[string]nodeView
	wait.Until(r.t, what+": the nodes agree", func() (bool, string) {
		var last error
		agreed, last = r.compare(names, etcdUp)
		if last == nil && ok != nil {
			last = ok(agreed)
		}
		if last != nil {
			return false, last.Error()
		}
		return true, ""
	})
	return agreed
}

func (r *haRig) compare(names []string, etcdUp bool) (map[string]nodeView, error) {
	var first map[string]nodeView
	var firstNode string
	nodes := r.live()
	exporters := map[string][]string{}
	owners := map[string][]string{}
	for _, n := range nodes {
		v, up, err := n.views()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.name, err)
		}
		if up != etcdUp {
			return nil, fmt.Errorf("%s: its page says etcd up=%v", n.name, up)
		}
		if first == nil {
			first, firstNode = v, n.name
		} else {
			for _, c := range names {
				if !reflect.DeepEqual(v[c], first[c]) {
					return nil, fmt.Errorf("%s: %s shows %+v, %s shows %+v", c, n.name, v[c], firstNode, first[c])
				}
			}
		}
		series, owned, err := n.exported()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.name, err)
		}
		for c := range series {
			exporters[c] = append(exporters[c], n.name)
		}
		for c := range owned {
			owners[c] = append(owners[c], n.name)
		}
	}
	for _, c := range names {
		v := first[c]
		if v.Owner == "" || !contains(nodeNames(nodes), v.Owner) {
			return nil, fmt.Errorf("%s: owner %q is not a live node", c, v.Owner)
		}
		if want := serve.Rendezvous(nodeNames(nodes), c); etcdUp && v.Owner != want {
			return nil, fmt.Errorf("%s: owned by %s, rendezvous over %v gives it to %s", c, v.Owner, nodeNames(nodes), want)
		}
		if etcdUp && !reflect.DeepEqual(owners[c], []string{v.Owner}) {
			return nil, fmt.Errorf("%s: owned by %s, contractd_contract_owned is 1 on %v", c, v.Owner, owners[c])
		}
		if etcdUp && !reflect.DeepEqual(exporters[c], []string{v.Owner}) {
			return nil, fmt.Errorf("%s: owned by %s, its series come from %v", c, v.Owner, exporters[c])
		}
	}
	return first, nil
}

func nodeNames(nodes []*haNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.name)
	}
	return out
}

// cli runs contractd with args against the rig's etcd and returns its
// stdout; it fails the test unless it exits 0.
func (r *haRig) cli(args ...string) string {
	r.t.Helper()
	args = append(args[:1:1], append([]string{"--etcd", r.etcd.Endpoints(), "--dir", r.dir}, args[1:]...)...)
	cmd := owner.Command(r.bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("contractd %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// cliAgrees checks that status, history and why --etcd tell what the
// nodes show: the same owner, severity and last run of every contract.
func (r *haRig) cliAgrees(names []string, views map[string]nodeView) {
	r.t.Helper()
	var sums []struct {
		Contract  string    `json:"contract"`
		Owner     string    `json:"owner"`
		Severity  string    `json:"severity"`
		LastRun   time.Time `json:"last_run"`
		LastRunID string    `json:"last_run_id"`
		Incidents []struct {
			Agent     string `json:"agent"`
			Condition string `json:"condition"`
		} `json:"open_incidents"`
	}
	if err := json.Unmarshal([]byte(r.cli("status", "--json")), &sums); err != nil {
		r.t.Fatal(err)
	}
	got := map[string]nodeView{}
	for _, s := range sums {
		v := nodeView{Owner: s.Owner, Severity: s.Severity, LastRunID: s.LastRunID, LastRun: s.LastRun.UTC().Format("2006-01-02 15:04:05Z")}
		for _, inc := range s.Incidents {
			v.Incidents = append(v.Incidents, inc.Agent+": "+inc.Condition)
		}
		got[s.Contract] = v
	}
	for _, c := range names {
		want := views[c]
		want.Strip, want.Maintenance = nil, nil
		if !reflect.DeepEqual(got[c], want) {
			r.t.Errorf("status --etcd: %s is %+v, the nodes show %+v", c, got[c], want)
		}
		var hist []struct {
			RunID           string `json:"run_id"`
			OverallSeverity string `json:"overall_severity"`
		}
		if err := json.Unmarshal([]byte(r.cli("history", "--json", "-n", "48", c)), &hist); err != nil {
			r.t.Fatal(err)
		}
		if len(hist) != len(views[c].Strip) || len(hist) == 0 || hist[len(hist)-1].RunID != want.LastRunID || hist[len(hist)-1].OverallSeverity != want.Severity {
			r.t.Errorf("history --etcd %s: %d runs, the last %+v; the nodes show %d runs, the last %s %s", c, len(hist), hist[len(hist)-1:], len(views[c].Strip), want.LastRunID, want.Severity)
		}
		if why := r.cli("why", c); !strings.HasPrefix(why, c+" run "+want.LastRunID+" ") || !strings.Contains(strings.SplitN(why, "\n", 2)[0], want.Severity) {
			r.t.Errorf("why --etcd %s: %q; the nodes show run %s, %s", c, strings.SplitN(why, "\n", 2)[0], want.LastRunID, want.Severity)
		}
	}
}

// Three nodes, six contracts: one critical with an open incident, one in
// maintenance, four healthy. Every node's page and /contracts, and status,
// history and why --etcd, show the same owner, last run, severity,
// incidents, windows and history of every contract, and only the owner
// exports a contract's series: from the start, after its owner is killed
// (the others take its contracts over), after it comes back (the
// contracts move back to it, and the nodes that held them meanwhile stop
// exporting them), after the etcd leader is killed, and without quorum.
func TestHAEveryNodeShowsTheOwnersTruth(t *testing.T) {
	contracts := map[string]string{}
	var names []string
	for i := 1; i <= 6; i++ {
		name := fmt.Sprintf("v%d", i)
		names = append(names, name)
		contracts[name] = viewContract(name)
	}
	r := startHATTL(t, 4*time.Second, 0, contracts)
	for _, name := range names[1:] {
		if err := os.WriteFile(filepath.Join(r.work, name), []byte("up\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// v1 stays down (critical, an incident); v2 is in maintenance.
	r.cli("maintenance", "--for", "2h", "--reason", "upgrade", "v2")
	for _, n := range []string{"n1", "n2", "n3"} {
		r.start(n)
	}
	want := func(v map[string]nodeView) error {
		for _, c := range names {
			sev, incidents, windows := "healthy", []string(nil), []string(nil)
			switch c {
			case "v1":
				sev, incidents = "critical", []string{"svc: critical"}
			case "v2":
				windows = []string{"*"}
			}
			got := v[c]
			if got.Severity != sev || !reflect.DeepEqual(got.Incidents, incidents) || !reflect.DeepEqual(got.Maintenance, windows) || got.LastRunID == "" || len(got.Strip) == 0 {
				return fmt.Errorf("%s: %+v, want %s, incidents %v, windows %v, a last run and its strip", c, got, sev, incidents, windows)
			}
		}
		return nil
	}
	start := r.agree(names, true, "the start", want)
	r.cliAgrees(names, start)
	// The shared state's commands answer alike from anywhere.
	if out := r.cli("maintenance", "v2"); !strings.Contains(out, "v2: whole contract: ") || !strings.Contains(out, "upgrade") {
		t.Errorf("maintenance --etcd v2: %q", out)
	}
	if out := r.cli("reset", "v1"); !strings.Contains(out, "v1: released") {
		t.Errorf("reset --etcd v1: %q", out)
	}

	// The owner of v1 killed: the others take its contracts over and run
	// them at once.
	victim := r.node(start["v1"].Owner)
	var moved []string
	for _, c := range names {
		if start[c].Owner == victim.name {
			moved = append(moved, c)
		}
	}
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	killed := time.Now()
	after := r.agree(names, true, "after the owner of v1 was killed", func(v map[string]nodeView) error {
		for _, c := range moved {
			if v[c].Owner == victim.name || v[c].LastRunID == start[c].LastRunID {
				return fmt.Errorf("%s: owned by %s, last run %s: not yet taken over and run", c, v[c].Owner, v[c].LastRunID)
			}
		}
		return want(v)
	})
	t.Logf("%v taken over from %s and run %s after its kill -9 (TTL %s)", moved, victim.name, time.Since(killed).Round(100*time.Millisecond), r.ttl)
	if took := time.Since(killed); took > 2*r.ttl {
		t.Errorf("the takeover took %s, more than 2 × TTL", took)
	}
	r.cliAgrees(names, after)

	// It comes back: rendezvous gives it its contracts again; the nodes
	// that held them hand them over and stop exporting their series.
	r.start(victim.name)
	back := r.agree(names, true, "after "+victim.name+" came back", func(v map[string]nodeView) error {
		for _, c := range moved {
			if v[c].Owner != victim.name {
				return fmt.Errorf("%s: owned by %s, not yet handed back to %s", c, v[c].Owner, victim.name)
			}
		}
		return want(v)
	})

	// The etcd leader killed: nothing an operator sees changes.
	r.etcd.Kill(r.etcdLeader())
	r.agree(names, true, "after the etcd leader was killed", func(v map[string]nodeView) error {
		if !reflect.DeepEqual(v, back) {
			return fmt.Errorf("the views changed when the etcd leader was killed")
		}
		return nil
	})

	// No quorum: every page says so, and still shows the same truth.
	running := r.etcd.Running()
	r.etcd.Stop(running[0])
	r.agree(names, false, "without quorum", func(v map[string]nodeView) error {
		for _, c := range names {
			if v[c].LastRunID != back[c].LastRunID || v[c].Severity != back[c].Severity {
				return fmt.Errorf("%s: %+v without quorum, %+v before", c, v[c], back[c])
			}
		}
		return nil
	})
}

// etcdLeader waits for the etcd cluster to have a leader and returns it.
func (r *haRig) etcdLeader() int {
	r.t.Helper()
	l := -1
	wait.For(r.t, "an etcd leader", func() bool { l = r.etcd.Leader(); return l >= 0 })
	return l
}

// watchEtcd asks every member of a cluster a linearizable question
// every 50 ms, all at once, each with the deadline an instance gives its
// own questions (0.2 × TTL), and keeps the longest time none answered in
// time: the outages any client of the cluster saw, elections and a
// cluster too slow to answer within that deadline included. The returned
// func stops it and returns that time.
func watchEtcd(t *testing.T, endpoints string, deadline time.Duration) (stop func() time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var clients []*clientv3.Client
	for _, ep := range strings.Split(endpoints, ",") {
		cli, err := etcdstore.Connect(ctx, etcdstore.Config{Endpoints: []string{ep}, Timeout: time.Second})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		clients = append(clients, cli)
	}
	var longest time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := time.Now()
		for ctx.Err() == nil {
			answered := make(chan struct{}, len(clients))
			qctx, qcancel := context.WithTimeout(ctx, deadline)
			for _, cli := range clients {
				go func() {
					if _, err := cli.Get(qctx, "contractd-test/outage-probe"); err == nil {
						answered <- struct{}{}
					}
				}()
			}
			select {
			case <-answered:
				now := time.Now()
				longest, last = max(longest, now.Sub(last)), now
			case <-qctx.Done():
			}
			qcancel()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		longest = max(longest, time.Since(last))
	}()
	return func() time.Duration {
		cancel()
		<-done
		for _, cli := range clients {
			cli.Close()
		}
		return longest
	}
}

// tickContract runs every second and appends the time of each probe to
// ${dir}/runs-NAME.
func tickContract(name string) string {
	return `---
name: ` + name + `
runtime_contract: 2
schedule: {every: 1s, on_start: true}
vars:
  dir: /nonexistent
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe}\ndate +%s.%N >> \"${dir}/runs-" + name + "\"; echo up\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |
`
}

// runTimes returns the times contract name's probe ran, in order.
func (r *haRig) runTimes(name string) []time.Time {
	var out []time.Time
	for _, l := range strings.Split(readFile(r.t, filepath.Join(r.work, "runs-"+name)), "\n") {
		var sec float64
		if _, err := fmt.Sscan(l, &sec); err == nil {
			out = append(out, time.Unix(0, int64(sec*1e9)))
		}
	}
	return out
}

// The etcd leader killed ten times (no leadership handed over, its
// requests cut off) while two instances run three contracts every second:
// no run is fenced, no instance calls etcd unreachable or loses a
// contract, and no contract waits between two runs longer than its
// interval and a retry within the lease.
func TestHAEtcdLeaderKilledTenTimesFencesNoRun(t *testing.T) {
	names := []string{"t1", "t2", "t3"}
	contracts := map[string]string{}
	for _, n := range names {
		contracts[n] = tickContract(n)
	}
	r := startHATTL(t, 4*time.Second, 2, contracts)
	for _, n := range names {
		r.settled(n)
	}
	count := func() int {
		total := 0
		for _, n := range names {
			total += len(r.runTimes(n))
		}
		return total
	}
	wait.For(t, "a first run of each", func() bool {
		for _, n := range names {
			if len(r.runTimes(n)) == 0 {
				return false
			}
		}
		return true
	})
	stopWatch := watchEtcd(t, r.etcd.Endpoints(), r.ttl/5)
	killedAt := time.Now()
	for k := 0; k < 10; k++ {
		l := r.etcdLeader()
		r.etcd.Kill(l)
		r.etcdLeader()
		// Runs go on under the new leader: each contract once more at least.
		before := count()
		wait.For(t, "runs under the new leader", func() bool { return count() >= before+len(names) })
		if err := r.etcd.Restart(l); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("10 leader kills in %s", time.Since(killedAt).Round(100*time.Millisecond))
	// An instance calls etcd unreachable after 0.6 × TTL without an answer
	// to two questions in a row (each given 0.2 × TTL, a tenth apart): a
	// cluster that answered within 0.2 × TTL at least every 0.3 × TTL
	// cannot be called so truthfully. An election is about half a second
	// here; one that a loaded machine stretched, or answers it slowed
	// past the instances' deadline, make etcd really unreachable for a
	// while, and the instances must say so, not hide it.
	outage := stopWatch()
	t.Logf("the longest time no etcd member answered a linearizable read within %s, asked from the test every 50 ms: %s", r.ttl/5, outage.Round(10*time.Millisecond))
	said := []string{"writes refused", `msg="etcd unreachable`}
	if outage >= r.ttl*3/10 {
		t.Logf("etcd did not answer for %s (elections slowed by the machine's load): an instance may say it was unreachable", outage.Round(10*time.Millisecond))
		said = nil
	}
	for _, n := range r.live() {
		for _, c := range names {
			if v := n.metric(`contractd_runs_total{contract="` + c + `",result="fenced"}`); v > 0 {
				t.Errorf("%s: %s: %v runs fenced", n.name, c, v)
			}
		}
		log := readFile(t, n.log)
		for _, bad := range append(said, "no longer owned", `msg="run failed`) {
			if strings.Contains(log, bad) {
				t.Errorf("%s logged %q when the etcd leader was killed:\n%s", n.name, bad, tailOf(log, 3000))
			}
		}
	}
	// The etcd client's own warnings (requests retried while the leader
	// was down) are in the log, at their level.
	warned := false
	for _, n := range r.live() {
		warned = warned || strings.Contains(readFile(t, n.log), `level=WARN msg="etcd client: `)
	}
	if !warned {
		t.Error(`no instance logged the etcd client's warnings (level=WARN msg="etcd client: …")`)
	}
	var worst time.Duration
	for _, c := range names {
		ts := r.runTimes(c)
		for i := 1; i < len(ts); i++ {
			if ts[i].Before(killedAt) {
				continue
			}
			worst = max(worst, ts[i].Sub(ts[i-1]))
		}
	}
	// The gap is a figure (docs/operations.md: 1.3–1.5 s at TTL 4 on an
	// idle machine), logged here; what the test holds is that no contract
	// stopped running across the kills: a contract lost for good would wait
	// past its interval and several leases, however loaded the machine.
	t.Logf("the longest time between two runs of a contract (every 1s) across the kills: %s", worst.Round(10*time.Millisecond))
	if limit := time.Second + 3*r.ttl; worst > limit {
		t.Errorf("a contract waited %s between two runs: past its interval and three leases (%s)", worst, limit)
	}
}
