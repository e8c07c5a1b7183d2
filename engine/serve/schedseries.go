package serve

import (
	"sort"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/prometheus/client_golang/prometheus"
)

// scheduleSeries are the series a rule needs to judge a contract without
// hard-coding its schedule: its interval, its next planned run, and the
// maintenance windows over its agents. They are read from the daemon at
// each scrape, so they are never out of date: a window opened with
// `contractd maintenance` from a shell shows at the next scrape. With
// --etcd only the contract's owner exports them, as it does the runs'.
type scheduleSeries struct {
	d                      *Daemon
	interval, next, window *prometheus.Desc
}

var _ prometheus.Collector = (*scheduleSeries)(nil)

func newScheduleSeries(d *Daemon) *scheduleSeries {
	return &scheduleSeries{d: d,
		interval: prometheus.NewDesc("contractd_contract_interval_seconds",
			"The contract's schedule interval (schedule.every); rules judge a late or stale contract against it.",
			[]string{"contract"}, nil),
		next: prometheus.NewDesc("contractd_next_run_timestamp_seconds",
			"Unix time the contract's next scheduled run is due (backoff included); absent while it is held down.",
			[]string{"contract"}, nil),
		window: prometheus.NewDesc("contractd_maintenance",
			`1 while a maintenance window covers the agent (its own, or the whole contract's), 0 otherwise; agent="*" is the whole contract's window.`,
			[]string{"contract", "agent"}, nil),
	}
}

// Describe sends the three descriptors.
func (s *scheduleSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.interval
	ch <- s.next
	ch <- s.window
}

// Collect sends each loaded contract's interval, next run and maintenance
// series: one per agent of the contract (and of its last run), and "*".
func (s *scheduleSeries) Collect(ch chan<- prometheus.Metric) {
	d := s.d
	d.mu.Lock()
	entries := make([]*entry, 0, len(d.entries))
	for _, e := range d.entries {
		entries = append(entries, e)
	}
	d.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	now := d.clock.Now()
	for _, e := range entries {
		if d.mode(e.name) == Standby {
			continue
		}
		e.mu.Lock()
		c, next, held, last := e.c, e.next, e.state.HeldDown, e.last
		e.mu.Unlock()
		if m, err := prometheus.NewConstMetric(s.interval, prometheus.GaugeValue, every(c).Seconds(), e.name); err == nil {
			ch <- m
		}
		if !held {
			if m, err := prometheus.NewConstMetric(s.next, prometheus.GaugeValue, float64(next.UnixNano())/1e9, e.name); err == nil {
				ch <- m
			}
		}
		windows, err := engine.MaintenanceIn(d.operatorStore(), e.name, now)
		if err != nil {
			continue // the ledger is reported by the run that reads it
		}
		agents := map[string]bool{store.AllAgents: true}
		for _, a := range engine.Agents(c) {
			agents[a] = true
		}
		if last != nil {
			for a := range last.Agents {
				agents[a] = true
			}
		}
		for a := range windows {
			agents[a] = true
		}
		for a := range agents {
			v := 0.0
			if covered(windows, a, now) {
				v = 1
			}
			if m, err := prometheus.NewConstMetric(s.window, prometheus.GaugeValue, v, e.name, a); err == nil {
				ch <- m
			}
		}
	}
}

// covered reports whether a window in force covers agent: its own or the
// whole contract's.
func covered(windows map[string]*guard.Window, agent string, now time.Time) bool {
	return windows[agent].Active(now) || windows[store.AllAgents].Active(now)
}
