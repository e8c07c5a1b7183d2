package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/wait"
)

// The shipped Prometheus rules (packaging/prometheus) and the alertmanager
// route, against the real servers: Debian's prometheus and
// prometheus-alertmanager on loopback, with temporary configurations, and
// the real contractd binary serving a contract the test breaks and fixes.
// `go test -run Prometheus ./cmd/contractd`.
//
// CONTRACTD_AM_SOAK=1 runs the long version by hand: Alertmanager's
// resolve_timeout 30s, the route's default resend (1m), the contract kept
// critical for 3 minutes (CONTRACTD_AM_HOLD overrides it).

const rulesFile = "../../packaging/prometheus/contractd.rules.yml"

// promContract is critical while ${dir}/state does not say "up"; its probe
// first sleeps as many seconds as ${dir}/delay says. Its repair fails, an
// alertmanager route posts its incidents, and a webhook route posts to a
// port nothing listens on.
const promContract = `---
name: web
runtime_contract: 2
schedule: {every: 2s, on_start: true}
guards:
  debounce: 1h
  grace: 200ms
vars:
  dir: /nonexistent
  am: http://127.0.0.1:9
  resend: 3s
  deadhook: http://127.0.0.1:9/hook
notify:
  - {alertmanager: {url: "${am}", resend: "${resend}", labels: {team: ops}}}
  - {webhook: {url: "${deadhook}", name: dead, retries: 0, timeout: 1s}}
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe timeout=30s}\nsleep \"$(cat \"${dir}/delay\" 2>/dev/null || echo 0)\"; cat \"${dir}/state\" 2>/dev/null || echo down\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`probe.stdout == \"down\"`" + ` | ` + "`echo repair >> \"${dir}/repairs\"; exit 1`" + ` |
`

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proc is a server the test started; it dies with the test (and with the
// test binary: Pdeathsig), and its output is shown when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, dir, name string, argv ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("--- %s log:\n%s", name, tailOf(string(b), 6000))
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// getJSON GETs u into v; it reports whether the server answered 200 with
// JSON.
func getJSON(u string, v any) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}

// promAlert is an alert as Prometheus's /api/v1/alerts shows it.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// amAlert is an alert as Alertmanager's /api/v2/alerts shows it.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

type promRig struct {
	t                *testing.T
	bin, work, state string
	contractd        *proc
	promURL, amURL   string
	contractdAddr    string
}

// firing returns Prometheus's firing alerts named name whose labels
// include match.
func (r *promRig) firing(name string, match map[string]string) []promAlert {
	var body struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if !getJSON(r.promURL+"/api/v1/alerts", &body) {
		return nil
	}
	var out []promAlert
	for _, a := range body.Data.Alerts {
		if a.State == "firing" && a.Labels["alertname"] == name && hasLabels(a.Labels, match) {
			out = append(out, a)
		}
	}
	return out
}

// amAlerts returns Alertmanager's alerts (active, suppressed or not yet
// processed; a resolved alert is not listed) named name whose labels
// include match, and whether Alertmanager answered.
func (r *promRig) amAlerts(name string, match map[string]string) ([]amAlert, bool) {
	var all []amAlert
	if !getJSON(r.amURL+"/api/v2/alerts", &all) {
		return nil, false
	}
	var out []amAlert
	for _, a := range all {
		if a.Labels["alertname"] == name && hasLabels(a.Labels, match) {
			out = append(out, a)
		}
	}
	return out, true
}

// amCount returns how many alerts amAlerts finds, -1 when Alertmanager
// did not answer.
func (r *promRig) amCount(name string, match map[string]string) int {
	as, ok := r.amAlerts(name, match)
	if !ok {
		return -1
	}
	return len(as)
}

func hasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func (r *promRig) write(file, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.work, file), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// docsAlertmanagerConfig returns the alertmanager.yml docs/operations.md
// shows (its route, receivers and inhibitions).
func docsAlertmanagerConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n# alertmanager.yml")
	if !ok {
		t.Fatal("docs/operations.md shows no alertmanager.yml")
	}
	block, _, _ := strings.Cut(rest, "```")
	return "# alertmanager.yml" + block
}

// shortFor is the shipped rules with every `for:` made 0s, so the test
// sees them fire within seconds; the expressions are the shipped ones.
func shortFor(rules string) string {
	return regexp.MustCompile(`(?m)^(\s+for:)\s+\S+\s*$`).ReplaceAllString(rules, "${1} 0s")
}

func TestPrometheusRulesAndAlertmanagerRouteWithRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a real Prometheus, Alertmanager and contractd serve for about a minute")
	}
	promBin, promtool := need.Prometheus(t)
	amBin, amtool := need.Alertmanager(t)
	soak := os.Getenv("CONTRACTD_AM_SOAK") == "1"
	// resend 1s: an alert not posted again ends 4s later, so the daemon's
	// resends between the runs (every 2s) and the runs' own keep it.
	resolveTimeout, resend, hold := 10*time.Second, "1s", 30*time.Second
	if soak {
		resolveTimeout, resend, hold = 30*time.Second, "1m", 3*time.Minute
	}
	if h := os.Getenv("CONTRACTD_AM_HOLD"); h != "" {
		d, err := time.ParseDuration(h)
		if err != nil {
			t.Fatalf("CONTRACTD_AM_HOLD: %v", err)
		}
		hold = d
	}
	root := t.TempDir()
	r := &promRig{t: t, bin: binary(t), work: filepath.Join(root, "work"), state: filepath.Join(root, "state")}
	dir := filepath.Join(root, "contracts")
	for _, d := range []string{r.work, r.state, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// promtool: the shipped rules load, and their own tests pass.
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", "contractd.rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		if args[0] == "test" {
			cmd.Dir = filepath.Dir(rulesFile)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// Alertmanager with the configuration the docs show, a short
	// resolve_timeout, no cluster.
	amPort, promPort, cPort := freePort(t), freePort(t), freePort(t)
	r.amURL, r.promURL = fmt.Sprintf("http://127.0.0.1:%d", amPort), fmt.Sprintf("http://127.0.0.1:%d", promPort)
	r.contractdAddr = fmt.Sprintf("127.0.0.1:%d", cPort)
	amConfig := filepath.Join(root, "alertmanager.yml")
	if err := os.WriteFile(amConfig, []byte(fmt.Sprintf("global:\n  resolve_timeout: %s\n%s", resolveTimeout, docsAlertmanagerConfig(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(amtool, "check-config", amConfig).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config on the docs' alertmanager.yml: %v\n%s", err, out)
	}
	am := startProc(t, root, "alertmanager", amBin, "--config.file="+amConfig, "--storage.path="+filepath.Join(root, "am-data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort), "--cluster.listen-address=", "--log.level=warn")

	// Prometheus scraping contractd every second, with the shipped rules
	// (their `for` shortened), sending to that Alertmanager.
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	testRules := filepath.Join(root, "contractd.rules.yml")
	if err := os.WriteFile(testRules, []byte(shortFor(string(rules))), 0o644); err != nil {
		t.Fatal(err)
	}
	promConfig := filepath.Join(root, "prometheus.yml")
	if err := os.WriteFile(promConfig, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 800ms, evaluation_interval: 1s}
rule_files: [%q]
alerting:
  alertmanagers:
    - static_configs: [{targets: ["127.0.0.1:%d"]}]
scrape_configs:
  - job_name: contractd
    static_configs: [{targets: [%q]}]
`, testRules, amPort, r.contractdAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", promConfig).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	prom := startProc(t, root, "prometheus", promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(root, "prom-data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort), "--log.level=warn")

	// contractd serve, the real binary, on a contract that starts healthy.
	r.write("state", "up\n")
	if err := os.WriteFile(filepath.Join(dir, "web.md"), []byte(promContract), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := freePort(t)
	r.contractd = startProc(t, root, "contractd", r.bin, "serve", "--dir", dir, "--state-dir", r.state, "--listen", r.contractdAddr,
		"--socket", "none", "--stagger", "0", "--shutdown-grace", "2s",
		"--var", "dir="+r.work, "--var", "am="+r.amURL, "--var", "resend="+resend, "--var", fmt.Sprintf("deadhook=http://127.0.0.1:%d/hook", dead))
	start := time.Now()
	up := func() bool {
		for _, p := range []*proc{am, prom, r.contractd} {
			if p.exited() {
				t.Fatalf("%s exited", p.name)
			}
		}
		var q struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		return getJSON(r.promURL+"/api/v1/query?query="+url.QueryEscape(`up{job="contractd"} == 1 and on() contractd_contract_interval_seconds{contract="web"} == 2`), &q) &&
			len(q.Data.Result) == 1 && getJSON(r.amURL+"/api/v2/status", new(map[string]any))
	}
	wait.For(t, "Prometheus scraping contractd, Alertmanager up", up)
	t.Logf("servers up in %s", time.Since(start).Round(100*time.Millisecond))

	// promtool check metrics on a live scrape.
	resp, err := http.Get("http://" + r.contractdAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var scrape bytes.Buffer
	scrape.ReadFrom(resp.Body)
	resp.Body.Close()
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = &scrape
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}

	web := map[string]string{"contract": "web", "agent": "svc"}
	routeLabels := map[string]string{"alertname": "ContractdIncident", "contract": "web", "agent": "svc", "condition": "critical", "severity": "critical", "team": "ops"}

	// 1. Broken: the route's alert reaches Alertmanager with the contract's
	// labels, and the rules fire.
	broken := time.Now()
	r.write("state", "down\n")
	var first amAlert
	wait.For(t, "the route's alert in Alertmanager", func() bool {
		as, _ := r.amAlerts("ContractdIncident", web)
		if len(as) == 1 {
			first = as[0]
		}
		return len(as) == 1
	})
	seen := time.Since(broken)
	if !hasLabels(first.Labels, routeLabels) || len(first.Labels) != len(routeLabels) {
		t.Fatalf("the route's alert has labels %v, want %v", first.Labels, routeLabels)
	}
	if first.GeneratorURL != "http://"+r.contractdAddr+"/c/web" || !strings.Contains(first.Annotations["summary"], "svc is critical") {
		t.Fatalf("generatorURL %q, summary %q", first.GeneratorURL, first.Annotations["summary"])
	}
	for _, rule := range []struct {
		name  string
		match map[string]string
	}{
		{"ContractdAgentCritical", web},
		{"ContractdRepairFailing", map[string]string{"contract": "web"}},
		{"ContractdNotifyFailing", map[string]string{"contract": "web", "notifier": "dead"}},
	} {
		wait.For(t, rule.name+" firing in Prometheus", func() bool { return len(r.firing(rule.name, rule.match)) == 1 })
	}
	if n := len(r.firing("ContractdNotifyFailing", map[string]string{"notifier": "alertmanager"})); n != 0 {
		t.Errorf("the alertmanager route is said to fail")
	}
	// The docs' inhibition: the route's alert mutes the rule's.
	wait.For(t, "ContractdAgentCritical in Alertmanager, inhibited by the route's alert", func() bool {
		as, _ := r.amAlerts("ContractdAgentCritical", web)
		return len(as) == 1 && as[0].Status.State == "suppressed" && len(as[0].Status.InhibitedBy) == 1
	})

	// 2. Kept active, past resolve_timeout and past the lifetime of one
	// post (4 × resend), for as long as the contract stays critical: every
	// look at Alertmanager finds the same alert active, its endsAt carried
	// forward by the resends.
	held := time.Now()
	polls, ends := 0, map[time.Time]bool{}
	for time.Since(held) < hold {
		as, ok := r.amAlerts("ContractdIncident", web)
		if !ok {
			time.Sleep(500 * time.Millisecond)
			continue // a look that got no answer saw nothing
		}
		if len(as) != 1 || as[0].Status.State != "active" || !as[0].StartsAt.Equal(first.StartsAt) {
			t.Fatalf("%s into the hold (resolve_timeout %s, resend %s), Alertmanager shows %+v, want the alert active since %s",
				time.Since(held).Round(time.Second), resolveTimeout, resend, as, first.StartsAt)
		}
		ends[as[0].EndsAt] = true
		polls++
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("route's alert: in Alertmanager %s after the break; active through %d looks over %s while critical (resolve_timeout %s, resend %s); %d distinct endsAt (resends)",
		seen.Round(100*time.Millisecond), polls, hold, resolveTimeout, resend, len(ends))
	if len(ends) < 2 {
		t.Errorf("endsAt never moved in %s: no resend reached Alertmanager", hold)
	}

	// 3. A maintenance window (opened with the CLI, which writes the
	// ledger): the rule stops firing though the agent is still critical,
	// ContractdMaintenance fires, and the route's alert is inhibited.
	if out, err := exec.Command(r.bin, "maintenance", "--state-dir", r.state, "--agent", "svc", "--for", "10m", "web").CombinedOutput(); err != nil {
		t.Fatalf("contractd maintenance: %v\n%s", err, out)
	}
	wait.For(t, "ContractdAgentCritical resolved and ContractdMaintenance firing", func() bool {
		return len(r.firing("ContractdAgentCritical", web)) == 0 && len(r.firing("ContractdMaintenance", web)) == 1
	})
	wait.For(t, "the route's alert inhibited by ContractdMaintenance", func() bool {
		as, _ := r.amAlerts("ContractdIncident", web)
		return len(as) == 1 && as[0].Status.State == "suppressed"
	})
	if out, err := exec.Command(r.bin, "maintenance", "--state-dir", r.state, "--agent", "svc", "--end", "web").CombinedOutput(); err != nil {
		t.Fatalf("contractd maintenance --end: %v\n%s", err, out)
	}
	wait.For(t, "ContractdAgentCritical firing again after the window", func() bool { return len(r.firing("ContractdAgentCritical", web)) == 1 })

	// 4. Fixed: the route resolves its alert within one run (the interval
	// is 2s; an alert left to expire would stay 4 × resend), and the rule
	// resolves.
	fixed := time.Now()
	r.write("state", "up\n")
	wait.For(t, "the route's alert resolved in Alertmanager", func() bool { return r.amCount("ContractdIncident", web) == 0 })
	resolved := time.Since(fixed)
	t.Logf("route's alert resolved %s after the fix (one run: 2s)", resolved.Round(100*time.Millisecond))
	if resolved > 7*time.Second {
		t.Errorf("resolved %s after the fix, want within a run or two (2s each), never left to expire (4 × resend)", resolved)
	}
	wait.For(t, "ContractdAgentCritical resolved in Prometheus", func() bool { return len(r.firing("ContractdAgentCritical", web)) == 0 })

	// 5. A run that hangs: no run finishes for three intervals (6s), so
	// ContractdStale fires from the contract's own interval; when the run
	// ends, it resolves.
	r.write("delay", "12\n")
	wait.For(t, "ContractdStale firing", func() bool { return len(r.firing("ContractdStale", map[string]string{"contract": "web"})) == 1 })
	r.write("delay", "0\n")
	wait.For(t, "ContractdStale resolved", func() bool { return len(r.firing("ContractdStale", map[string]string{"contract": "web"})) == 0 })

	// 6. A stopped daemon exports nothing: only up == 0 says it, and
	// ContractdDown fires; it resolves when the daemon goes on.
	r.contractd.cmd.Process.Signal(syscall.SIGSTOP)
	wait.For(t, "ContractdDown firing for the stopped daemon", func() bool {
		return len(r.firing("ContractdDown", map[string]string{"instance": r.contractdAddr})) == 1
	})
	r.contractd.cmd.Process.Signal(syscall.SIGCONT)
	wait.For(t, "ContractdDown resolved", func() bool {
		return len(r.firing("ContractdDown", map[string]string{"instance": r.contractdAddr})) == 0
	})
	t.Logf("whole test: %s", time.Since(start).Round(time.Second))
}
