package serve

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// metrics is the daemon's Prometheus registry, named by the Prometheus
// conventions: the daemon's own series are contractd_*; the Go runtime and
// process collectors keep their standard go_* and process_* names, so
// the usual dashboards find them; each state is a 0/1 series
// (contractd_agent_state{state="critical"}), never a numeric code.
type metrics struct {
	reg         *prometheus.Registry
	runs        *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	agent       *prometheus.GaugeVec
	unknownRuns *prometheus.GaugeVec
	flapping    *prometheus.GaugeVec
	contract    *prometheus.GaugeVec
	lastRun     *prometheus.GaugeVec
	repairs     *prometheus.CounterVec
	verified    *prometheus.CounterVec
	alerts      *prometheus.CounterVec
	delivered   *prometheus.CounterVec
	failures    *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	heldDown    *prometheus.GaugeVec
	overlap     *prometheus.CounterVec
	panics      *prometheus.CounterVec
	contracts   *prometheus.GaugeVec
	tickAge     prometheus.GaugeFunc
	probes      *probeValues
	owned       *prometheus.GaugeVec // nil without HA
	state       stateSeries
}

// States are the values of the state label of contractd_agent_state and
// contractd_contract_state: every one is exported, 1 for the current.
var States = []contracts.Severity{
	contracts.SeverityHealthy, contracts.SeverityDegraded, contracts.SeverityCritical,
	contracts.SeverityUnreachable, contracts.SeveritySkipped, contracts.SeverityUnknown,
	contracts.SeveritySuppressed,
}

// ranRepair reports whether an action of a report was a repair whose
// command was attempted: it ran and exited 0 (ran) or did not (failed).
// Pending, blocked, report-only and merged repairs ran nothing.
func ranRepair(a *engine.ActionReport) bool {
	return a.Kind == engine.KindRepair && (a.Status == engine.ActionRan || a.Status == engine.ActionFailed)
}

func newMetrics(tickAge func() float64, resident func() int, build BuildInfo) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_runs_total",
			Help: "Runs by result: ok (the engine finished, sick agents included), failed (the engine itself failed), skipped_overlap, cancelled (at shutdown).",
		}, []string{"contract", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "contractd_run_duration_seconds",
			Help:    "Wall time of finished runs.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"contract"}),
		unknownRuns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_agent_unknown_runs",
			Help: "Runs in a row the agent was judged unknown (a row none of whose cells held, a value its output lacks); 0 once judged. At guards.unknown_after (default 3) it is an incident of its own.",
		}, []string{"contract", "agent"}),
		agent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_agent_state",
			Help: "1 for each agent's state after the last run, 0 for its other states: healthy, degraded, critical, unreachable, skipped, unknown, suppressed (failing while a dependency fails: its alert is the dependency's).",
		}, []string{"contract", "agent", "state"}),
		flapping: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_agent_flapping",
			Help: "1 while the agent flaps (its state changed in more than guards.flapping.high of its last runs, until it falls below low), 0 otherwise.",
		}, []string{"contract", "agent"}),
		contract: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_contract_state",
			Help: "1 for the overall state of the contract's last run, 0 for the other states.",
		}, []string{"contract", "state"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_last_run_timestamp_seconds",
			Help: "Unix time the contract's last run (ok or failed) finished; alert on time() minus this to catch a contract that stopped running.",
		}, []string{"contract"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_repairs_total",
			Help: "Repair commands that ran, by result: ran (exit 0) or failed (a non-zero exit, a timeout, or an unreachable target). Repairs the guards held back are not counted.",
		}, []string{"contract", "result"}),
		verified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_repair_verifications_total",
			Help: "Repairs probed again after their grace, by result: remediated, undecided or remediation_failed.",
		}, []string{"contract", "result"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_alerts_sent_total",
			Help: "Messages delivered to at least one notify route, each counted once (when the first route delivers it), hold-down alerts included.",
		}, []string{"contract"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_notify_delivered_total",
			Help: "Messages a notify route delivered, retries from the outbox included.",
		}, []string{"contract", "notifier"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_notify_failures_total",
			Help: "Delivery attempts a notify route failed (the message stays in the outbox and is retried with backoff), and its failed resends of the open incidents (alertmanager).",
		}, []string{"contract", "notifier"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_notify_dropped_total",
			Help: "Messages a notify route never delivered and gave up on (24h in the outbox, or the route was removed).",
		}, []string{"contract", "notifier"}),
		heldDown: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_held_down",
			Help: "1 while the contract is held down after consecutive failed runs; `contractd reset NAME` releases it.",
		}, []string{"contract"}),
		overlap: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_skipped_overlap_total",
			Help: "Runs skipped because the previous run was still going or another process held the run lock.",
		}, []string{"contract"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_run_panics_total",
			Help: "Panics recovered while running or scheduling the contract (a bug in contractd, or in a notifier): the run is failed, its stack is in the log, the daemon and the other contracts go on.",
		}, []string{"contract"}),
		contracts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_contracts",
			Help: "Contract files by state: loaded, rejected (failed lint, kept out), stale (an edit failed lint; the last good version runs).",
		}, []string{"state"}),
		probes: &probeValues{last: map[string]*engine.Report{}},
		state:  newStateSeries(),
	}
	m.tickAge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "contractd_scheduler_tick_age_seconds",
		Help: "Seconds since the scheduler loop last ticked; /healthz fails when it exceeds the stuck threshold.",
	}, tickAge)
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "contractd_build_info",
		Help:        "Always 1; the labels say which build of contractd runs.",
		ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Revision, "build_date": build.Date, "goversion": build.GoVersion},
	})
	info.Set(1)
	m.reg.MustRegister(m.runs, m.duration, m.agent, m.unknownRuns, m.flapping, m.contract, m.lastRun, m.repairs, m.verified, m.alerts, m.delivered,
		m.failures, m.dropped, m.heldDown, m.overlap, m.panics, m.contracts, m.tickAge, info, m.probes, m.state.writable, m.state.info)
	if resident != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "contractd_resident_sessions",
			Help: "Resident sessions open to targets (one long-lived session per target chain, reused by every run).",
		}, func() float64 { return float64(resident()) }))
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// BuildInfo names the running build for contractd_build_info,
// `contractd --version` and the status page.
type BuildInfo struct {
	Version   string // the release, e.g. 1.4.0; "dev" for a local build
	Revision  string // the VCS revision it was built from; "unknown" when nothing says
	Date      string // when it was built (RFC 3339); "unknown" when nothing says
	GoVersion string
}

// ReadBuildInfo returns the build's description: version, revision and
// date as the build set them (the Makefile, with -ldflags -X), else what
// the Go toolchain embeds (the module's version, vcs.revision, vcs.time),
// else "dev" for the version and "unknown" for the others; and the Go
// version. It never fails.
func ReadBuildInfo(version, revision, date string) BuildInfo {
	b := BuildInfo{Version: version, Revision: revision, Date: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version // go install …@v1.2.3
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Revision == "":
				b.Revision = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	b.Version = cmp.Or(b.Version, "dev")
	b.Revision = cmp.Or(b.Revision, "unknown")
	b.Date = cmp.Or(b.Date, "unknown")
	return b
}

// add makes a contract's series exist at zero so a scrape shows them before
// the first run; lastRun, when known from the scheduler state, is when its
// last run finished (before this daemon started).
func (m *metrics) add(name string, lastRun time.Time) {
	m.runs.WithLabelValues(name, ResultOK)
	m.runs.WithLabelValues(name, ResultFailed)
	m.runs.WithLabelValues(name, ResultSkippedOverlap)
	m.runs.WithLabelValues(name, ResultCancelled)
	m.duration.WithLabelValues(name)
	m.repairs.WithLabelValues(name, engine.ActionRan)
	m.repairs.WithLabelValues(name, engine.ActionFailed)
	m.verified.WithLabelValues(name, "remediated")
	m.verified.WithLabelValues(name, "remediation_failed")
	m.alerts.WithLabelValues(name)
	m.overlap.WithLabelValues(name)
	m.panics.WithLabelValues(name)
	m.heldDown.WithLabelValues(name)
	if !lastRun.IsZero() {
		m.lastRun.WithLabelValues(name).Set(float64(lastRun.UnixNano()) / 1e9)
	}
	if m.owned != nil {
		m.owned.WithLabelValues(name)
		m.runs.WithLabelValues(name, ResultFenced)
	}
}

// routes makes the per-route counters of a contract's notify routes exist
// at zero, so that increase() sees a route's first failure; a route added
// by an edit gets them when the edit loads. The hold-down alert goes
// through the same routes.
func (m *metrics) routes(name string, c *contracts.Contract) {
	for _, r := range c.Notify {
		m.delivered.WithLabelValues(name, r.Name)
		m.failures.WithLabelValues(name, r.Name)
		m.dropped.WithLabelValues(name, r.Name)
	}
}

// forget drops every series of a contract whose file went away.
func (m *metrics) forget(name string) {
	m.drop(name)
	if m.owned != nil {
		m.owned.DeletePartialMatch(prometheus.Labels{"contract": name})
	}
}

// drop drops the series of a contract's runs, which only the instance
// that runs it exports (serve --etcd: a former owner's would go on saying
// what it last saw); contractd_contract_owned stays.
func (m *metrics) drop(name string) {
	l := prometheus.Labels{"contract": name}
	m.runs.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.agent.DeletePartialMatch(l)
	m.unknownRuns.DeletePartialMatch(l)
	m.flapping.DeletePartialMatch(l)
	m.contract.DeletePartialMatch(l)
	m.lastRun.DeletePartialMatch(l)
	m.repairs.DeletePartialMatch(l)
	m.verified.DeletePartialMatch(l)
	m.alerts.DeletePartialMatch(l)
	m.delivered.DeletePartialMatch(l)
	m.failures.DeletePartialMatch(l)
	m.dropped.DeletePartialMatch(l)
	m.heldDown.DeletePartialMatch(l)
	m.overlap.DeletePartialMatch(l)
	m.panics.DeletePartialMatch(l)
	m.probes.forget(name)
}

// runsOnly is the registry as /metrics exposes it under serve --etcd: the
// series of a contract (every series with a contract label but
// contractd_contract_owned) only while this instance runs it, so a rule
// never fires from what a former owner last saw. Node-level series stay.
type runsOnly struct {
	g    prometheus.Gatherer
	runs func(contract string) bool
}

var _ prometheus.Gatherer = runsOnly{}

// Gather returns the registry's families with the series of contracts
// this instance does not run left out (and families left empty by that).
func (r runsOnly) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := r.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		if mf.GetName() != "contractd_contract_owned" {
			kept := mf.Metric[:0]
			for _, m := range mf.Metric {
				if c, ok := labelValue(m, "contract"); ok && !r.runs(c) {
					continue
				}
				kept = append(kept, m)
			}
			mf.Metric = kept
			if len(kept) == 0 {
				continue
			}
		}
		out = append(out, mf)
	}
	return out, err
}

func labelValue(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// record counts one finished run that ended at now.
func (m *metrics) record(name, result string, seconds float64, rep *engine.Report, now time.Time) {
	m.runs.WithLabelValues(name, result).Inc()
	if result == ResultSkippedOverlap {
		m.overlap.WithLabelValues(name).Inc()
		return
	}
	m.duration.WithLabelValues(name).Observe(seconds)
	if result == ResultOK || result == ResultFailed {
		m.lastRun.WithLabelValues(name).Set(float64(now.UnixNano()) / 1e9)
	}
	if rep == nil || rep.Skipped != "" {
		return
	}
	setState(m.contract.MustCurryWith(prometheus.Labels{"contract": name}), rep.OverallSeverity)
	m.agent.DeletePartialMatch(prometheus.Labels{"contract": name})
	m.unknownRuns.DeletePartialMatch(prometheus.Labels{"contract": name})
	m.flapping.DeletePartialMatch(prometheus.Labels{"contract": name})
	for agent, a := range rep.Agents {
		if a != nil {
			setState(m.agent.MustCurryWith(prometheus.Labels{"contract": name, "agent": agent}), a.Severity)
			m.unknownRuns.WithLabelValues(name, agent).Set(float64(a.UnknownRuns))
			flap := 0.0
			if a.Flapping {
				flap = 1
			}
			m.flapping.WithLabelValues(name, agent).Set(flap)
		}
	}
	m.probes.set(name, rep)
	for _, a := range rep.Actions {
		if a == nil || !ranRepair(a) {
			continue
		}
		m.repairs.WithLabelValues(name, a.Status).Inc()
		switch a.Verify {
		case guard.Remediated:
			m.verified.WithLabelValues(name, "remediated").Inc()
		case guard.Undecided:
			m.verified.WithLabelValues(name, "undecided").Inc()
		case guard.RemediationFailed:
			m.verified.WithLabelValues(name, "remediation_failed").Inc()
		}
	}
	for _, a := range rep.Alerts {
		if a == nil {
			continue
		}
		if a.FirstSent() {
			m.alerts.WithLabelValues(name).Inc()
		}
		for _, rd := range a.Routes {
			switch {
			case rd.Outcome == store.OutcomeDelivered:
				m.delivered.WithLabelValues(name, rd.Route).Inc()
			case rd.Outcome == store.OutcomeDropped:
				m.dropped.WithLabelValues(name, rd.Route).Inc()
			}
			if rd.Tried && rd.Outcome != store.OutcomeDelivered {
				m.failures.WithLabelValues(name, rd.Route).Inc()
			}
		}
	}
}

func (m *metrics) setHeld(name string, held bool) {
	v := 0.0
	if held {
		v = 1
	}
	m.heldDown.WithLabelValues(name).Set(v)
}

// setState sets the series of every state in v (curried down to the state
// label): 1 for s, 0 for the others.
func setState(v *prometheus.GaugeVec, s contracts.Severity) {
	for _, st := range States {
		g := 0.0
		if st == s {
			g = 1
		}
		v.WithLabelValues(st.String()).Set(g)
	}
}

// probeValues exports the numeric fields contracts mark with
// {export=true}, from each contract's last report: one gauge per field,
// contractd_probe_FIELD{contract,stage,agent,step}, the field's dots made
// underscores. The names come from the contracts, so the collector is
// unchecked (it describes nothing up front).
type probeValues struct {
	mu   sync.Mutex
	last map[string]*engine.Report
}

var _ prometheus.Collector = (*probeValues)(nil)

func (p *probeValues) set(name string, rep *engine.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[name] = rep
}

func (p *probeValues) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, name)
}

// Describe sends nothing: the metric names depend on the contracts loaded.
func (p *probeValues) Describe(chan<- *prometheus.Desc) {}

// Collect sends one gauge per exported field of every last report; of a
// stage probed again after a repair, the values after it.
func (p *probeValues) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	descs := map[string]*prometheus.Desc{}
	for name, rep := range p.last {
		for _, st := range rep.Stages {
			cur := st
			if st.Verify != nil {
				cur = st.Verify
			}
			for _, sp := range cur.Steps {
				for field, v := range sp.Metrics {
					metric := ProbeMetricName(field)
					d := descs[metric]
					if d == nil {
						d = prometheus.NewDesc(metric, "The field "+field+" a contract exports ({export=true} on its health row), from the contract's last run.",
							[]string{"contract", "stage", "agent", "step"}, nil)
						descs[metric] = d
					}
					// Labels come from the contract (a for_each item names a
					// stage): one that is not a valid label value leaves its
					// series out rather than panic in the scrape's goroutine,
					// which nothing would recover.
					if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, name, st.ID, st.Agent, sp.ID); err == nil {
						ch <- m
					}
				}
			}
		}
	}
}

// ProbeMetricName is the metric an exported field is shown as:
// contractd_probe_ and the field with every character outside [a-zA-Z0-9_]
// made an underscore (disk.used_pct → contractd_probe_disk_used_pct).
func ProbeMetricName(field string) string {
	b := []byte("contractd_probe_" + field)
	for i, c := range b {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	return string(b)
}
