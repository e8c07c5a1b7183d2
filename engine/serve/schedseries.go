package serve

import (
	"sort"
	"sync"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/prometheus/client_golang/prometheus"
)

// scheduleSeries are the series a rule needs to judge a contract without
// hard-coding its schedule: its interval, its next planned run, and the
// maintenance windows over its agents. They are read at each scrape, so a
// window opened with `contractd maintenance` from a shell shows at the
// next scrape (with a store that does not answer at once, etcd without
// quorum, the scrape shows what it last answered). With --etcd only the
// contract's owner exports them, as it does the runs'.
type scheduleSeries struct {
	d                      *Daemon
	interval, next, window *prometheus.Desc

	// The windows are read from the store off the scrape's path: a store
	// that hangs (etcd without quorum) must never hang /metrics. A scrape
	// starts a read (one at a time), waits for it up to windowWait, and
	// shows what the last finished read found.
	mu      sync.Mutex
	windows map[string]map[string]*guard.Window // by contract
	reading chan struct{}                       // closed when the read going ends; nil when none
}

// windowWait is how long a scrape waits for the windows it asked for; a
// file store answers in microseconds.
const windowWait = 250 * time.Millisecond

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
			`1 while a maintenance window covers the agent (its own, or the whole contract's; opened with contractd maintenance, or a recurring one the contract declares), 0 otherwise; agent="*" is the whole contract's window.`,
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
	owned := entries[:0]
	for _, e := range entries {
		if d.mode(e.name) != Standby {
			owned = append(owned, e)
		}
	}
	names := make([]string, len(owned))
	for i, e := range owned {
		names[i] = e.name
	}
	select {
	case <-s.read(names):
	case <-time.After(windowWait):
	}
	s.mu.Lock()
	read := s.windows
	s.mu.Unlock()
	for _, e := range owned {
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
		windows, ok := read[e.name]
		if !ok && len(c.Maintenance) == 0 {
			continue // never read yet (or unreadable: the run that reads it reports it)
		}
		agents := map[string]bool{engine.AllAgents: true}
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
		recurring := guard.Recurring{Windows: c.Maintenance, Clock: d.clock}
		for _, mw := range c.Maintenance {
			for _, a := range mw.Agents {
				agents[a] = true
			}
		}
		for a := range agents {
			v := 0.0
			if covered(windows, a, now) || recurring.Active(a) != nil {
				v = 1
			}
			if m, err := prometheus.NewConstMetric(s.window, prometheus.GaugeValue, v, e.name, a); err == nil {
				ch <- m
			}
		}
	}
}

// read starts reading the maintenance windows of the named contracts,
// unless a read is going, and returns a channel closed when that read
// ends. A contract whose ledger cannot be read keeps what was last read.
func (s *scheduleSeries) read(names []string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reading != nil {
		return s.reading
	}
	done := make(chan struct{})
	s.reading = done
	st, now := s.d.operatorStore(), s.d.clock.Now()
	go func() {
		defer close(done)
		got := make(map[string]map[string]*guard.Window, len(names))
		for _, name := range names {
			if w, err := engine.Maintenance(st, name, now); err == nil {
				got[name] = w
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, name := range names {
			if old, had := s.windows[name]; had {
				if _, ok := got[name]; !ok {
					got[name] = old
				}
			}
		}
		s.windows, s.reading = got, nil
	}()
	return done
}

// covered reports whether a window in force covers agent: its own or the
// whole contract's.
func covered(windows map[string]*guard.Window, agent string, now time.Time) bool {
	return windows[agent].Active(now) || windows[engine.AllAgents].Active(now)
}
