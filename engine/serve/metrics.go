package serve

import (
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/notify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics is the daemon's private Prometheus registry. Every series is named
// contractd_*; the Go runtime and process collectors are registered under the
// same prefix (contractd_go_*, contractd_process_*), so nothing here collides
// with another exporter on the host.
type metrics struct {
	reg       *prometheus.Registry
	runs      *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	severity  *prometheus.GaugeVec
	overall   *prometheus.GaugeVec
	repairs   *prometheus.CounterVec
	alerts    *prometheus.CounterVec
	delivered *prometheus.CounterVec
	failures  *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	heldDown  *prometheus.GaugeVec
	overlap   *prometheus.CounterVec
	contracts *prometheus.GaugeVec
	tickAge   prometheus.GaugeFunc
}

// isRepair reports whether an action of a report was a repair candidate:
// a command from an action table, not a built-in row (log, monitor, alert,
// escalate, which run nothing on a target) and not one merged into another
// condition's identical repair in the same run.
func isRepair(a *engine.ActionReport) bool {
	switch a.Action {
	case contracts.ActionLog, contracts.ActionMonitor, contracts.ActionAlert, contracts.ActionEscalate:
		return false
	}
	return a.Status != "merged"
}

func newMetrics(tickAge func() float64, resident func() int) *metrics {
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
		severity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_severity",
			Help: "Severity per agent after the last run: 0 unknown, 1 healthy, 2 degraded, 3 critical, 4 unreachable, 5 skipped.",
		}, []string{"contract", "agent"}),
		overall: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_overall_severity",
			Help: "Overall severity of the last run, same codes as contractd_severity.",
		}, []string{"contract"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contractd_repairs_total",
			Help: "Repair actions by outcome: ran, failed, pending, blocked, report-only, dry-run, escalate (repairs exhausted), alert (crash loop).",
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
			Help: "Delivery attempts a notify route failed; the message stays in the outbox and is retried with backoff.",
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
		contracts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_contracts",
			Help: "Contract files by state: loaded, rejected (failed lint, kept out), stale (an edit failed lint; the last good version runs).",
		}, []string{"state"}),
	}
	m.tickAge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "contractd_scheduler_tick_age_seconds",
		Help: "Seconds since the scheduler loop last ticked; /healthz fails when it exceeds the stuck threshold.",
	}, tickAge)
	m.reg.MustRegister(m.runs, m.duration, m.severity, m.overall, m.repairs, m.alerts, m.delivered, m.failures, m.dropped,
		m.heldDown, m.overlap, m.contracts, m.tickAge)
	if resident != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "contractd_resident_sessions",
			Help: "Resident sessions open to targets (one long-lived session per target chain, reused by every run).",
		}, func() float64 { return float64(resident()) }))
	}
	prometheus.WrapRegistererWithPrefix("contractd_", m.reg).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// add makes a contract's series exist at zero so a scrape shows them before
// the first run.
func (m *metrics) add(name string) {
	m.runs.WithLabelValues(name, ResultOK)
	m.runs.WithLabelValues(name, ResultFailed)
	m.runs.WithLabelValues(name, ResultSkippedOverlap)
	m.runs.WithLabelValues(name, ResultCancelled)
	m.alerts.WithLabelValues(name)
	m.overlap.WithLabelValues(name)
	m.heldDown.WithLabelValues(name)
}

// forget drops every series of a contract whose file went away.
func (m *metrics) forget(name string) {
	l := prometheus.Labels{"contract": name}
	m.runs.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.severity.DeletePartialMatch(l)
	m.overall.DeletePartialMatch(l)
	m.repairs.DeletePartialMatch(l)
	m.alerts.DeletePartialMatch(l)
	m.delivered.DeletePartialMatch(l)
	m.failures.DeletePartialMatch(l)
	m.dropped.DeletePartialMatch(l)
	m.heldDown.DeletePartialMatch(l)
	m.overlap.DeletePartialMatch(l)
}

// record counts one finished run.
func (m *metrics) record(name, result string, seconds float64, rep *engine.Report) {
	m.runs.WithLabelValues(name, result).Inc()
	if result == ResultSkippedOverlap {
		m.overlap.WithLabelValues(name).Inc()
		return
	}
	m.duration.WithLabelValues(name).Observe(seconds)
	if rep == nil {
		return
	}
	m.overall.WithLabelValues(name).Set(float64(rep.OverallSeverity))
	m.severity.DeletePartialMatch(prometheus.Labels{"contract": name})
	for agent, a := range rep.Agents {
		if a != nil {
			m.severity.WithLabelValues(name, agent).Set(float64(a.Severity))
		}
	}
	for _, a := range rep.Actions {
		if a != nil && isRepair(a) {
			m.repairs.WithLabelValues(name, a.Status).Inc()
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
			case rd.Outcome == notify.OutcomeDelivered:
				m.delivered.WithLabelValues(name, rd.Route).Inc()
			case rd.Outcome == notify.OutcomeDropped:
				m.dropped.WithLabelValues(name, rd.Route).Inc()
			}
			if rd.Tried && rd.Outcome != notify.OutcomeDelivered {
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
