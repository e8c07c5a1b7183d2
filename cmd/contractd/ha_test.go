package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/fixtures/etcdcluster"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
)

// The HA tests run the real contractd binary, two or three instances,
// against a real 3-member etcd cluster embedded in the test process, with
// a contract whose repair appends to a file: `go test -run HA ./...`.

// haTTL is the lease TTL of the tests: short, so takeovers are quick.
const haTTL = 2 * time.Second

// haContract is down until its repair writes "up"; the repair appends a
// line to repairs first and takes ${slow} seconds; the probe reads the
// state, appends "probe NODE STATE" to probes and takes ${probe} seconds
// to answer; every message goes to pages.txt. The debounce allows one
// repair an hour.
func haContract(name string) string {
	return `---
name: ` + name + `
runtime_contract: 2
schedule: {every: 1s, on_start: true}
guards:
  debounce: 1h
  grace: 200ms
vars:
  dir: /nonexistent
  slow: "0"
  probe: "0"
  node: ""
notify:
  - {log: {path: "${dir}/pages.txt"}}
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe timeout=20s}\ns=$(cat \"${dir}/state\" 2>/dev/null || echo down); echo \"probe ${node} $s\" >> \"${dir}/probes\"; sleep \"${probe}\"; echo \"$s\"\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`probe.stdout == \"down\"`" + ` | ` + "`echo \"start ${node}\" >> \"${dir}/repairs\"; sleep \"${slow}\"; echo up > \"${dir}/state\"`" + ` |
`
}

// haRig is an etcd cluster and the contractd instances using it.
type haRig struct {
	t    *testing.T
	bin  string
	etcd *etcdcluster.Cluster
	dir  string // contracts
	work string // the contract's files: state, repairs, probes, pages.txt
	vars []string
	ttl  time.Duration // the lease TTL of every instance
	// nodeVar passes --var node=NAME to each instance (the contract
	// declares node).
	nodeVar bool
	// extra are more arguments of every instance's serve.
	extra []string
	mu    sync.Mutex
	nodes []*haNode
}

type haNode struct {
	name  string
	addr  string
	cmd   *exec.Cmd
	log   string
	state string
	done  chan struct{}
}

// startHA starts a 3-member etcd cluster and n instances serving the
// contracts, with vars passed to each, on leases of haTTL.
func startHA(t *testing.T, n int, contracts map[string]string, vars ...string) *haRig {
	t.Helper()
	return startHATTL(t, haTTL, n, contracts, vars...)
}

// startHATTL is startHA with leases of ttl. A contract that reads
// ${dir} gets the rig's work directory.
func startHATTL(t *testing.T, ttl time.Duration, n int, contracts map[string]string, vars ...string) *haRig {
	t.Helper()
	return startHAArgs(t, ttl, nil, n, contracts, vars...)
}

// startHAArgs is startHATTL with extra arguments for every instance.
func startHAArgs(t *testing.T, ttl time.Duration, extra []string, n int, contracts map[string]string, vars ...string) *haRig {
	t.Helper()
	bin := binary(t)
	root := t.TempDir()
	c, err := etcdcluster.Start(filepath.Join(root, "etcd"), 3, etcdcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &haRig{t: t, bin: bin, etcd: c, dir: filepath.Join(root, "contracts"), work: filepath.Join(root, "work"), ttl: ttl, extra: extra}
	t.Cleanup(r.close)
	for _, d := range []string{r.dir, r.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range contracts {
		if err := os.WriteFile(filepath.Join(r.dir, name+".md"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := contracts["svc"]; ok {
		// The service starts healthy; each test breaks it when it wants.
		r.vars = append([]string{"dir=" + r.work}, vars...)
		r.nodeVar = true
		r.setState("up")
	} else {
		for _, src := range contracts {
			if strings.Contains(src, "${dir}") {
				r.vars = append([]string{"dir=" + r.work}, vars...)
				break
			}
		}
	}
	for i := 0; i < n; i++ {
		r.start(fmt.Sprintf("n%d", i+1))
	}
	return r
}

// start starts an instance named node.
func (r *haRig) start(node string) *haNode {
	r.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n := &haNode{name: node, addr: addr, log: filepath.Join(r.work, node+".log"), state: filepath.Join(r.work, node+".state"), done: make(chan struct{})}
	args := []string{"serve", "--dir", r.dir, "--state-dir", n.state, "--listen", addr, "--socket", "none", "--stagger", "0",
		"--shutdown-grace", "5s", "--etcd", r.etcd.Endpoints(), "--node", node, "--lease-ttl", r.ttl.String()}
	for _, v := range r.vars {
		args = append(args, "--var", v)
	}
	if r.nodeVar {
		args = append(args, "--var", "node="+node)
	}
	args = append(args, r.extra...)
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restart appends
	if err != nil {
		r.t.Fatal(err)
	}
	n.cmd = owner.Command(r.bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { n.cmd.Wait(); logf.Close(); close(n.done) }()
	r.mu.Lock()
	r.nodes = append(r.nodes, n)
	r.mu.Unlock()
	return n
}

func (r *haRig) close() {
	r.mu.Lock()
	nodes := r.nodes
	r.mu.Unlock()
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGCONT)
		if r.t.Failed() && os.Getenv("HADEBUG") != "" {
			// A Go process writes its goroutines to its log and exits.
			n.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-n.done:
			case <-time.After(10 * time.Second):
			}
		}
		n.cmd.Process.Kill()
		<-n.done
	}
	r.etcd.Close()
	if r.t.Failed() {
		for _, n := range nodes {
			r.t.Logf("--- %s log:\n%s", n.name, tailOf(readFile(r.t, n.log), 400000))
		}
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// node returns the instance named name.
func (r *haRig) node(name string) *haNode {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.nodes) - 1; i >= 0; i-- { // the latest start of that name
		if r.nodes[i].name == name {
			return r.nodes[i]
		}
	}
	r.t.Fatalf("no node %s", name)
	return nil
}

// alive reports whether the instance's process is still there.
func (n *haNode) alive() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

type haStatus struct {
	Name         string     `json:"name"`
	Owner        string     `json:"owner"`
	State        string     `json:"state"`
	LastRunAt    *time.Time `json:"last_run_at"`
	LastSeverity string     `json:"last_severity"`
}

// contracts asks an instance's /contracts; nil when it does not answer.
func (n *haNode) contracts() map[string]haStatus {
	// A dead instance refuses at once; a live one on a loaded machine may
	// take seconds to answer.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+"/contracts", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Contracts []haStatus `json:"contracts"`
	}
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return nil
	}
	m := map[string]haStatus{}
	for _, c := range list.Contracts {
		m[c.Name] = c
	}
	return m
}

// metric returns the value of one series of an instance's /metrics, or -1.
func (n *haNode) metric(series string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(b.String())
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// owned sums contractd_contract_owned over an instance's contracts.
func (n *haNode) owned(names []string) int {
	total := 0
	for _, c := range names {
		if n.metric(`contractd_contract_owned{contract="`+c+`"}`) == 1 {
			total++
		}
	}
	return total
}

// ownerOf asks the live, running instances who owns contract; "" while
// they disagree or none does.
func (r *haRig) ownerOf(contract string, skip ...string) string {
	r.mu.Lock()
	nodes := r.nodes
	r.mu.Unlock()
	owner := ""
	for _, n := range nodes {
		if !n.alive() || contains(skip, n.name) {
			continue
		}
		c, ok := n.contracts()[contract]
		if !ok || c.Owner == "" || (owner != "" && c.Owner != owner) {
			return ""
		}
		owner = c.Owner
	}
	return owner
}

// settled waits until every live instance names the owner rendezvous
// hashing gives contract among the live instances, and returns it.
func (r *haRig) settled(contract string) *haNode {
	r.t.Helper()
	var live []string
	r.mu.Lock()
	for _, n := range r.nodes {
		if n.alive() {
			live = append(live, n.name)
		}
	}
	r.mu.Unlock()
	want := serve.Rendezvous(live, contract)
	wait.For(r.t, contract+" owned by "+want, func() bool { return r.ownerOf(contract) == want })
	return r.node(want)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// lines counts the non-empty lines of one of the contract's files.
func (r *haRig) lines(file string) int {
	n := 0
	for _, l := range strings.Split(readFile(r.t, filepath.Join(r.work, file)), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

func (r *haRig) setState(s string) {
	if err := os.WriteFile(filepath.Join(r.work, "state"), []byte(s+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// probesBy counts the probe runs an instance made.
func (r *haRig) probesBy(n *haNode) int {
	return countLines(r.t, filepath.Join(r.work, "probes"), "probe "+n.name)
}

// (a) kill -9 of the owner in the middle of a slow repair: another instance
// takes over, reads the ledger, verifies the interrupted repair and never
// runs it again.
func TestHAKillOwnerMidRepairRepairsOnce(t *testing.T) {
	r := startHA(t, 2, map[string]string{"svc": haContract("svc")}, "slow=3")
	r.settled("svc")
	r.setState("down")
	wait.For(t, "the owner starts the repair", func() bool { return r.lines("repairs") == 1 })
	var owner string
	wait.Within(t, 2*time.Second, "an agreed owner while it repairs", func() bool {
		owner = r.ownerOf("svc")
		return owner != ""
	})
	r.node(owner).cmd.Process.Signal(syscall.SIGKILL)
	<-r.node(owner).done
	other := "n1"
	if owner == "n1" {
		other = "n2"
	}
	took := wait.Within(t, 2*haTTL, "the other instance takes the contract over within 2 × TTL", func() bool { return r.ownerOf("svc") == other })
	t.Logf("%s took over %s after the kill", other, took.Round(time.Millisecond))
	n := r.node(other)
	before := r.probesBy(n)
	wait.For(t, "three runs by the new owner", func() bool { return r.probesBy(n) >= before+3 })
	if got := r.lines("repairs"); got != 1 {
		t.Fatalf("%d repairs in the file, want exactly 1", got)
	}
	if log := readFile(t, n.log); !strings.Contains(log, `msg="repair interrupted" contract=svc`) {
		t.Fatalf("the new owner did not verify the interrupted repair from the ledger:\n%s", tailOf(log, 3000))
	}
}

// (b) an owner paused (SIGSTOP) in the middle of a run, past its lease:
// the other instance takes over, repairs and pages; when the first wakes
// up, its intent and its messages are refused by the fence: no second
// repair and no second message.
func TestHAPausedOwnerWakesFencedNoSecondRepairNorAlert(t *testing.T) {
	r := startHA(t, 2, map[string]string{"svc": haContract("svc")}, "probe=1")
	a := r.settled("svc")
	b := r.node(map[string]string{"n1": "n2", "n2": "n1"}[a.name])
	r.setState("down")
	// The probe says what it read before it sleeps: pause the owner in
	// the middle of the first run that saw the service down.
	wait.For(t, "the owner's probe reads down", func() bool {
		return countLines(t, filepath.Join(r.work, "probes"), "probe "+a.name+" down") > 0
	})
	a.cmd.Process.Signal(syscall.SIGSTOP)
	paused := time.Now()

	wait.Within(t, 4*haTTL+5*time.Second, "the other instance takes over", func() bool { return r.ownerOf("svc", a.name) == b.name })
	wait.For(t, "the other instance repairs", func() bool { return r.lines("repairs") == 1 })
	wait.For(t, "the other instance pages", func() bool { return r.lines("pages.txt") >= 1 })
	pages := r.lines("pages.txt")
	if time.Since(paused) < haTTL {
		t.Fatalf("resumed before the lease could expire")
	}
	logBefore := len(readFile(t, a.log))
	a.cmd.Process.Signal(syscall.SIGCONT)

	// The paused run goes on: it saw "down" and decides to repair; its
	// intent cannot be written. (A run that had opened while etcd did not
	// answer, which a loaded machine can make of a slow second, repairs
	// nothing by itself and says so instead.)
	wait.For(t, "the woken instance refuses its own repair", func() bool {
		log := readFile(t, a.log)[logBefore:]
		return strings.Contains(log, "repair not run: its intent cannot be recorded") ||
			strings.Contains(log, "no repairs and no alerts this run, state is not shared")
	})
	before := r.probesBy(b) + r.probesBy(a)
	wait.For(t, "three more runs", func() bool { return r.probesBy(b)+r.probesBy(a) >= before+3 })
	for _, l := range strings.Split(readFile(t, a.log)[logBefore:], "\n") {
		if strings.Contains(l, "repair not run") || strings.Contains(l, "not sent") || strings.Contains(l, "refused") || strings.Contains(l, "owned") {
			t.Logf("%s woke up: %s", a.name, tailOf(l, 300))
		}
	}
	if got := r.lines("repairs"); got != 1 {
		t.Fatalf("%d repairs, want 1: the woken instance repaired again", got)
	}
	if got := r.lines("pages.txt"); got != pages {
		t.Fatalf("%d messages, %d before the woken instance resumed: it sent again\n%s", got, pages, readFile(t, filepath.Join(r.work, "pages.txt")))
	}
}

// (c) one etcd member stopped (a follower: the leader's loss, an election,
// is TestHAEtcdLeaderKilledTenTimesFencesNoRun's): nothing changes. Two
// stopped (no quorum): within one TTL every instance says so
// (contractd_etcd_up 0, the log, the page), probing goes on and reports, no
// repair; members back: the repair runs, once.
func TestHAEtcdMemberLossAndQuorumLoss(t *testing.T) {
	r := startHATTL(t, 3*time.Second, 2, map[string]string{"svc": haContract("svc")})
	owner := r.settled("svc")

	stopped := (r.etcdLeader() + 1) % 3
	killed := (stopped + 1) % 3
	r.etcd.Stop(stopped)
	start := r.probesBy(owner)
	wait.For(t, "five runs with one member stopped", func() bool {
		if o := r.ownerOf("svc"); o != "" && o != owner.name {
			t.Fatalf("ownership moved to %s with one etcd member stopped", o)
		}
		for _, n := range r.nodes {
			if v := n.metric("contractd_etcd_up"); v == 0 {
				t.Fatalf("%s: contractd_etcd_up 0 with one etcd member stopped", n.name)
			}
		}
		return r.probesBy(owner) >= start+5
	})
	for _, n := range r.nodes {
		if log := readFile(t, n.log); strings.Contains(log, `msg="etcd unreachable`) || strings.Contains(log, "no longer owned") {
			t.Fatalf("%s noticed the loss of one member:\n%s", n.name, tailOf(log, 2000))
		}
	}

	// Killed, not stopped: quorum is lost the moment its raft stops, where a
	// graceful stop drains its clients for seconds first.
	lost := time.Now()
	gone := make(chan struct{})
	go func() { r.etcd.Kill(killed); close(gone) }() // its listeners may take seconds to close
	for _, n := range r.live() {
		wait.Within(t, time.Until(lost.Add(r.ttl)), n.name+": contractd_etcd_up 0 within one TTL of quorum lost", func() bool { return n.metric("contractd_etcd_up") == 0 })
	}
	noticed := time.Since(lost)
	for _, n := range r.live() {
		if page, err := n.get("/"); err != nil || !strings.Contains(page, `data-etcd="down"`) {
			t.Errorf("%s: the page does not say etcd is down: %v", n.name, err)
		}
		wait.For(t, n.name+" logs that etcd is unreachable", func() bool { return strings.Contains(readFile(t, n.log), `msg="etcd unreachable`) })
	}
	t.Logf("quorum lost: every instance said so %s after the second member was killed (TTL %s)", noticed.Round(10*time.Millisecond), r.ttl)
	<-gone
	r.setState("down")
	start = r.probesBy(owner)
	wait.For(t, "three runs without quorum", func() bool { return r.probesBy(owner) >= start+3 })
	if got := r.lines("repairs"); got != 0 {
		t.Fatalf("%d repairs without quorum, want none", got)
	}
	st := owner.contracts()["svc"]
	if st.LastSeverity != "critical" {
		t.Fatalf("last severity %q without quorum, want critical reported", st.LastSeverity)
	}
	if log := readFile(t, owner.log); !strings.Contains(log, "no repairs and no alerts") {
		t.Fatalf("the owner did not say it repairs nothing:\n%s", tailOf(log, 2000))
	}

	errs := make(chan error, 2)
	go func() { errs <- r.etcd.Restart(stopped) }()
	go func() { errs <- r.etcd.Restart(killed) }()
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "contractd_etcd_up 1 again", func() bool { return owner.metric("contractd_etcd_up") == 1 })
	wait.For(t, "the repair once quorum is back", func() bool { return r.lines("repairs") >= 1 })
	o := r.settled("svc")
	start = r.probesBy(o)
	wait.For(t, "three more runs", func() bool { return r.probesBy(o) >= start+3 })
	if got := r.lines("repairs"); got != 1 {
		t.Fatalf("%d repairs after quorum came back, want 1", got)
	}
}

// (d) three instances share 30 contracts about evenly; when one leaves, its
// contracts move to the other two within 2 × TTL.
func TestHASpreadsContractsAndMovesThemWhenOneLeaves(t *testing.T) {
	contracts := map[string]string{}
	var names []string
	for i := 0; i < 30; i++ {
		name := fmt.Sprintf("c%02d", i)
		names = append(names, name)
		contracts[name] = strings.Replace(`---
name: NAME
runtime_contract: 2
schedule: {every: 5s, on_start: true}
---

## Execution

### Service {#svc agent=svc}

`+"```sh {id=probe}\necho up\n```"+`

| Field | Healthy | Critical |
|-------|---------|----------|
| `+"`stdout`"+` | `+"`up`"+` | `+"`down`"+` |
`, "NAME", name, 1)
	}
	r := startHA(t, 3, contracts)
	for _, name := range names {
		r.settled(name)
	}
	counts := map[string]int{}
	total := 0
	for _, n := range r.nodes {
		counts[n.name] = n.owned(names)
		total += counts[n.name]
	}
	t.Logf("owned: %v", counts)
	if total != 30 {
		t.Errorf("contractd_contract_owned adds up to %d over the instances, want 30", total)
	}
	for node, k := range counts {
		if k < 5 || k > 15 {
			t.Errorf("%s owns %d of 30 contracts, want about a third", node, k)
		}
	}
	// `contractd status --etcd` names the same owners.
	var sums []struct {
		Contract string `json:"contract"`
		Owner    string `json:"owner"`
	}
	// Read until they agree: on a loaded machine an instance's answer can
	// come while a handover is still being told.
	wait.Until(t, "status --etcd lists the 30 contracts with the owners the instances name", func() (bool, string) {
		out, err := exec.Command(r.bin, "status", "--etcd", r.etcd.Endpoints(), "--json").Output()
		if err != nil {
			t.Fatalf("contractd status --etcd: %v", err)
		}
		if err := json.Unmarshal(out, &sums); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if len(sums) != 30 {
			return false, fmt.Sprintf("%d contracts listed", len(sums))
		}
		for _, s := range sums {
			if want := r.ownerOf(s.Contract); s.Owner != want {
				return false, fmt.Sprintf("%s owned by %q, the instances say %q", s.Contract, s.Owner, want)
			}
		}
		return true, ""
	})
	leaving := r.node("n2")
	leaving.cmd.Process.Signal(syscall.SIGTERM)
	<-leaving.done
	moved := wait.Within(t, 2*haTTL, "the leaver's contracts move to the other two", func() bool {
		return r.node("n1").owned(names)+r.node("n3").owned(names) == 30
	})
	t.Logf("%d contracts moved %s after n2 left", counts["n2"], moved.Round(time.Millisecond))
}

// An operator's maintenance window written through etcd (`contractd
// maintenance --etcd`, from any host) holds the owner's repairs; ended, the
// repair runs once.
func TestHAMaintenanceThroughEtcdHoldsTheOwner(t *testing.T) {
	r := startHA(t, 2, map[string]string{"svc": haContract("svc")})
	owner := r.settled("svc")
	before := r.probesBy(owner)
	wait.For(t, "a first run", func() bool { return r.probesBy(owner) > before })
	maint := func(args ...string) string {
		out, err := exec.Command(r.bin, append([]string{"maintenance", "--etcd", r.etcd.Endpoints(), "--dir", r.dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("contractd maintenance %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := maint("--for", "1h", "--reason", "upgrade", "svc"); !strings.Contains(out, "whole contract") {
		t.Fatalf("maintenance did not say the window: %s", out)
	}
	r.setState("down")
	start := r.probesBy(owner)
	wait.For(t, "three runs in maintenance", func() bool { return r.probesBy(owner) >= start+3 })
	if got := r.lines("repairs"); got != 0 {
		t.Fatalf("%d repairs inside the maintenance window, want none", got)
	}
	maint("--end", "svc")
	wait.For(t, "the repair once the window ended", func() bool { return r.lines("repairs") >= 1 })
	start = r.probesBy(owner)
	wait.For(t, "three more runs", func() bool { return r.probesBy(owner) >= start+3 })
	if got := r.lines("repairs"); got != 1 {
		t.Fatalf("%d repairs after the window ended, want 1", got)
	}
	if log := readFile(t, owner.log); strings.Contains(log, "run failed") {
		t.Fatalf("an operator's change failed a run:\n%s", tailOf(log, 2000))
	}
}
