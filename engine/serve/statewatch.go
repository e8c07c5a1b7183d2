package serve

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
	"github.com/prometheus/client_golang/prometheus"
)

// stateWatch owns one rule: whether the state directory can be written,
// as the runs find it, and which notify routes have been told. While it
// cannot be written (read-only, full, not the daemon's), every run probes
// and reports but repairs and records nothing (engine.Report
// StateUnwritable); nothing of the ledger can say who was told, so the
// watch keeps that in memory: each route hears once per condition, across
// every contract that uses it, and once more when the directory can be
// written again.
type stateWatch struct {
	mu      sync.Mutex
	problem string    // "" while writable: else "state directory DIR cannot be written: CAUSE"
	since   time.Time // when problem was first seen
	// told are the routes told of the problem, by route key: the route,
	// and the contract its message named (a resolve names it again, so a
	// destination that keeps alerts as state ends that very alert).
	told map[string]toldRoute
}

type toldRoute struct {
	route    contracts.NotifyRoute
	contract string
	problem  string
}

// StateProblem is the state directory's condition as the API shows it.
type StateProblem struct {
	Problem string    `json:"problem"` // "state directory DIR cannot be written: read-only file system"
	Since   time.Time `json:"since"`
}

// current returns the problem and since when, or nil while writable.
func (w *stateWatch) current() *StateProblem {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.problem == "" {
		return nil
	}
	return &StateProblem{Problem: w.problem, Since: w.since}
}

// stateConditionName is the condition of the messages about the state
// directory, as routes that key alerts by condition see it.
const stateConditionName = "state unwritable"

// routeKey identifies a route across contracts: its kind, name and
// options (after ${var} filling), so two contracts that page the same
// stream are one route.
func routeKey(r contracts.NotifyRoute) string {
	b, _ := json.Marshal(r.Options)
	return r.Kind + "\x00" + r.Name + "\x00" + string(b)
}

// watchState takes in what a finished run of c found of the state
// directory: problem is its Report.StateUnwritable ("" when it could
// write). It logs and sets the metrics when the condition changes, tells
// each of c's routes not told yet of this problem, and, once a run writes
// again, tells every route that was told that it is over.
func (d *Daemon) watchState(c *contracts.Contract, problem string) {
	w := &d.stateWatch
	now := d.clock.Now()
	w.mu.Lock()
	was, wasSince := w.problem, w.since
	if problem != was {
		w.problem = problem
		w.since = now
	}
	var tell []toldRoute
	var resolved []toldRoute
	if problem != "" {
		if w.told == nil {
			w.told = map[string]toldRoute{}
		}
		for _, r := range c.Notify {
			if t, ok := w.told[routeKey(r)]; !ok || t.problem != problem {
				tell = append(tell, toldRoute{route: r, contract: c.Name, problem: problem})
			}
		}
	} else if was != "" {
		for _, t := range w.told {
			resolved = append(resolved, t)
		}
		w.told = nil
	}
	since := w.since
	if problem == "" {
		since = wasSince // what is resolved began then
	}
	w.mu.Unlock()

	switch {
	case problem != "" && problem != was:
		d.log.Error("state cannot be written: every run probes and reports, nothing is repaired or recorded until it can", "error", problem)
		d.metrics.setState(problem)
	case problem == "" && was != "":
		d.log.Info("state can be written again: runs repair and record again", "was", was, "for", now.Sub(since).Round(time.Second))
		d.metrics.setState("")
	}
	if len(tell) == 0 && len(resolved) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(d.runCtx, 30*time.Second)
	defer cancel()
	for _, t := range tell {
		m := notify.Message{Contract: t.contract, Condition: stateConditionName, Kind: notify.KindEscalate, Severity: contracts.SeverityCritical.String(),
			IncidentSeverity: contracts.SeverityCritical.String(), OpenedAt: since.UTC(), Time: now.UTC(),
			Text: problem + ": contractd probes and reports every contract but repairs nothing and records nothing until it can be written; the first run that can write goes on by itself"}
		if d.deliverTo(ctx, t.route, m) {
			w.mu.Lock()
			if w.problem == t.problem {
				w.told[routeKey(t.route)] = t
			}
			w.mu.Unlock()
		}
	}
	for _, t := range resolved {
		m := notify.Message{Contract: t.contract, Condition: stateConditionName, Kind: notify.KindResolved, Severity: contracts.SeverityHealthy.String(),
			IncidentSeverity: contracts.SeverityCritical.String(), OpenedAt: since.UTC(), Time: now.UTC(),
			Text: "the state directory can be written again (" + t.problem + "): runs repair and record again"}
		d.deliverTo(ctx, t.route, m)
	}
}

// deliverTo sends m through one route, counting it, and reports whether
// the route delivered it.
func (d *Daemon) deliverTo(ctx context.Context, r contracts.NotifyRoute, m notify.Message) bool {
	ns, errs := notify.NewAll([]contracts.NotifyRoute{r}, d.cfg.NotifyDeps)
	for _, err := range errs {
		d.log.Error("state alert: notify route cannot be built", "contract", m.Contract, "error", err)
	}
	ok := len(ns) > 0
	for _, n := range ns {
		if err := notify.Deliver(ctx, n, m); err != nil {
			d.metrics.failures.WithLabelValues(m.Contract, n.Name()).Inc()
			d.log.Error("state alert not delivered (tried again after the next run)", "contract", m.Contract, "route", n.Name(), "error", err)
			ok = false
			continue
		}
		d.metrics.delivered.WithLabelValues(m.Contract, n.Name()).Inc()
	}
	return ok
}

// stateSeries are the state directory's series: contractd_state_writable
// (1 or 0) and, while it cannot be written, contractd_state_unwritable_info
// with its cause.
type stateSeries struct {
	writable prometheus.Gauge
	info     *prometheus.GaugeVec
}

func newStateSeries() stateSeries {
	s := stateSeries{
		writable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contractd_state_writable",
			Help: "1 while the state directory can be written; 0 while it cannot (read-only, full, not the daemon's): runs then probe and report, and repair and record nothing.",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contractd_state_unwritable_info",
			Help: "1, with the reason in the problem label, while the state directory cannot be written; absent otherwise.",
		}, []string{"problem"}),
	}
	s.writable.Set(1)
	return s
}

// setState shows problem ("" while writable) in the state series.
func (m *metrics) setState(problem string) {
	m.state.info.Reset()
	if problem == "" {
		m.state.writable.Set(1)
		return
	}
	m.state.writable.Set(0)
	m.state.info.WithLabelValues(problem).Set(1)
}
