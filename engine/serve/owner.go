package serve

import (
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/store"
	"github.com/prometheus/client_golang/prometheus"
)

// The daemon's side of HA: which contracts it runs, and what a new owner
// does first.

// mode returns whether this instance runs contract name now: always
// without HA.
func (d *Daemon) mode(name string) Mode {
	if d.cfg.HA == nil {
		return Owned
	}
	return d.cfg.HA.Mode(name)
}

// isRunning reports whether a run of contract name is going here: an owner
// hands a contract over only between runs.
func (d *Daemon) isRunning(name string) bool {
	e := d.entry(name)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// ownershipChanged is told by HA when this instance wins or loses a
// contract; from is the owner it last saw before (itself, or "" when it
// saw none).
//
// A contract taken over from another instance (it died, was cut off or
// handed the contract over) runs at once: the new owner verifies what a
// stopped run left and sees for itself, without waiting for this
// instance's stagger or the contract's start_delay, which are for a daemon
// starting, not for a takeover. Otherwise (a group starting) a contract
// carries on the cadence its state shows: one interval after the last
// snapshot any instance wrote, at once when that is past or when a run was
// stopped before its end (the ledger still names it); a contract nobody
// ran yet starts as on a fresh start.
func (d *Daemon) ownershipChanged(name string, _ bool, from string) {
	// HA tells of a win and a loss from different goroutines, so a notice
	// may come after a later change (won, then handed over before the win
	// was told): what HA holds now is the truth, not what the notice says.
	owned := d.mode(name) == Owned
	d.metrics.setOwned(name, owned)
	e := d.entry(name)
	if e == nil {
		return
	}
	if !owned {
		// What this instance last saw of the contract's runs is no longer
		// the truth: the owner's series say it. A contract it still runs
		// (etcd lost: rendezvous over the last nodes seen) keeps its
		// series.
		if d.mode(name) == Standby {
			d.metrics.drop(name)
		}
		return
	}
	d.metrics.drop(name) // counters start afresh with the ownership
	d.addSeries(e)
	takeover := from != "" && from != d.cfg.HA.Node()
	var last time.Time
	inFlight := false
	if !takeover {
		var err error
		if _, last, err = d.view.ReadSnapshot(name); err != nil {
			d.log.Error("snapshot unreadable", "contract", name, "error", err)
		}
		if l, err := engine.ReadLedger(d.view, name); err == nil && l.Run != nil {
			inFlight = true
		}
	}
	now := d.clock.Now()
	e.mu.Lock()
	iv := every(e.c)
	var next time.Time
	switch {
	case takeover || inFlight:
		next = now
	case !last.IsZero():
		next = last.Add(iv)
		if next.Before(now) {
			next = now
		}
	case e.c.Schedule.OnStart:
		next = d.afterStartDelay(e.c, now.Add(e.phase), e.phase)
	default:
		next = d.afterStartDelay(e.c, now.Add(e.phase+iv), e.phase)
	}
	e.next = next
	e.mu.Unlock()
	e.poke()
}

// runsHere reports whether this instance runs contract name now (it owns
// it, or etcd is unreachable and it runs it locally): the contract's
// series are exported by such an instance only. A contract not loaded
// here keeps its series until they are dropped.
func (d *Daemon) runsHere(name string) bool {
	if d.entry(name) == nil {
		return true
	}
	return d.mode(name) != Standby
}

// addSeries makes a contract's series exist (at zero, the last run's end
// from the state) on an instance that starts running it.
func (d *Daemon) addSeries(e *entry) {
	var lastRun time.Time
	if hist, err := d.view.History(e.name, 1); err == nil && len(hist) > 0 {
		h := hist[len(hist)-1]
		lastRun = h.StartedAt.Add(time.Duration(h.DurationMS) * time.Millisecond)
	}
	e.mu.Lock()
	c, held := e.c, e.state.HeldDown
	e.mu.Unlock()
	d.metrics.add(e.name, lastRun)
	d.metrics.routes(e.name, c)
	d.metrics.setHeld(e.name, held)
}

// operatorStore is the store an operator's change (maintenance) is written
// through: one that does not need to own the contract, only to see the
// ledger's latest revision (etcdstore.Store.Unfenced).
func (d *Daemon) operatorStore() store.Backend {
	if u, ok := d.store.(interface{ Unfenced() store.Backend }); ok {
		return u.Unfenced()
	}
	return d.store
}

// owner returns the node that owns contract name, "" without HA.
func (d *Daemon) owner(name string) string {
	if d.cfg.HA == nil {
		return ""
	}
	return d.cfg.HA.Owner(name)
}

// enableHA adds the HA series: contractd_contract_owned and
// contractd_etcd_up.
func (m *metrics) enableHA(h *HA) {
	m.owned = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "contractd_contract_owned",
		Help: "1 while this instance owns the contract and runs it (serve --etcd), 0 while another does.",
	}, []string{"contract"})
	m.reg.MustRegister(m.owned, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "contractd_etcd_up",
		Help: "1 while etcd is reachable with a live lease; 0 while it is not: contracts are probed and reported, nothing is repaired or sent.",
	}, func() float64 {
		if h.Up() {
			return 1
		}
		return 0
	}))
}

func (m *metrics) setOwned(name string, owned bool) {
	if m.owned == nil {
		return
	}
	v := 0.0
	if owned {
		v = 1
	}
	m.owned.WithLabelValues(name).Set(v)
}
