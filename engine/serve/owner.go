package serve

import (
	"time"

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
// contract. A new owner carries on the cadence the state shows: the
// contract runs one interval after the last snapshot any instance wrote,
// at once when that is past, and as a fresh start when there is none.
func (d *Daemon) ownershipChanged(name string, owned bool) {
	d.metrics.setOwned(name, owned)
	e := d.entry(name)
	if e == nil || !owned {
		return
	}
	_, last, err := d.store.ReadSnapshot(name)
	if err != nil {
		d.log.Error("snapshot unreadable", "contract", name, "error", err)
	}
	now := d.clock.Now()
	e.mu.Lock()
	iv := every(e.c)
	var next time.Time
	switch {
	case !last.IsZero():
		next = last.Add(iv)
		if next.Before(now) {
			next = now
		}
	case e.c.Schedule.OnStart:
		next = now.Add(e.phase)
	default:
		next = now.Add(e.phase + iv)
	}
	e.next = d.afterStartDelay(e.c, next, e.phase)
	e.mu.Unlock()
	e.poke()
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
