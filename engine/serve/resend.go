package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/store"
)

// Resender is a Runner that can post a contract's open incidents again
// between runs, to the routes that keep alerts as state (alertmanager),
// so none expires there while the contract is not running. *engine.Engine
// is one; the daemon resends only when its Runner is.
type Resender interface {
	// ResendEvery returns how often c's open incidents must be posted
	// again; 0 when c has no such route.
	ResendEvery(c *contracts.Contract) time.Duration
	// Resend posts them again under c's run lock, failing with an error
	// wrapping store.ErrLocked when a run holds it (see engine.Resend).
	Resend(ctx context.Context, c *contracts.Contract) ([]engine.Resend, error)
}

// maxResendTime bounds one resend of a contract's open incidents.
const maxResendTime = 30 * time.Second

// planResend sets when the entry next resends: one interval after now,
// since a run resends at its end; never when its routes need none. The
// caller holds e.mu or owns e.
func (d *Daemon) planResend(e *entry, now time.Time) {
	rs, ok := d.cfg.Runner.(Resender)
	if !ok {
		return
	}
	e.resendEvery = rs.ResendEvery(e.c)
	e.resendAt = time.Time{}
	if e.resendEvery > 0 {
		e.resendAt = now.Add(e.resendEvery)
	}
}

// resendDue starts a resend of the entry's open incidents when one is due:
// in its own goroutine, so a slow Alertmanager never stalls the schedule,
// and never beside a run of the contract (which resends at its end) or
// another resend, nor on an instance that does not own the contract.
func (d *Daemon) resendDue(e *entry) {
	rs, ok := d.cfg.Runner.(Resender)
	if !ok {
		return
	}
	now := d.clock.Now()
	e.mu.Lock()
	if e.resendAt.IsZero() || now.Before(e.resendAt) {
		e.mu.Unlock()
		return
	}
	e.resendAt = now.Add(e.resendEvery)
	busy, c, every := e.running || e.resending, e.c, e.resendEvery
	var done chan struct{}
	if !busy {
		done = make(chan struct{})
		e.resending, e.resendDone = true, done
	}
	e.mu.Unlock()
	if busy {
		return
	}
	end := func() {
		e.mu.Lock()
		e.resending = false
		e.mu.Unlock()
		close(done)
	}
	if d.mode(e.name) == Standby {
		end()
		return
	}
	d.runs.Add(1)
	go func() {
		defer d.runs.Done()
		defer end()
		d.protect(e.name, "a resend", func() { d.resend(e.name, rs, c, min(every, maxResendTime)) })
	}()
}

// resend posts contract c's open incidents again and reports what
// happened: a route's failure is counted in
// contractd_notify_failures_total each time and logged when it is new; a
// run holding the lock is no failure (the run resends).
func (d *Daemon) resend(name string, rs Resender, c *contracts.Contract, limit time.Duration) {
	ctx, cancel := context.WithTimeout(d.runCtx, limit)
	defer cancel()
	out, err := rs.Resend(ctx, c)
	switch {
	case errors.Is(err, store.ErrLocked), errors.Is(err, store.ErrUnavailable):
		return // a run resends at its end; etcd_up says etcd is away
	case err != nil:
		d.log.Error("resend of the open incidents failed", "contract", name, "error", err)
	}
	for _, r := range out {
		switch {
		case r.Err != nil:
			d.metrics.failures.WithLabelValues(name, r.Route).Inc()
			if r.New {
				d.log.Warn(fmt.Sprintf("notify %s: resend of %d open incident(s) failed: %v", r.Route, r.Incidents, r.Err), "contract", name, "route", r.Route, "incidents", r.Incidents)
			}
		case r.Recovered:
			d.log.Info(fmt.Sprintf("notify %s: resend works again (%d open incident(s))", r.Route, r.Incidents), "contract", name, "route", r.Route, "incidents", r.Incidents)
		}
	}
}

// PageURL returns the status page's base URL for a daemon listening on
// listen, which the alertmanager route's alerts link to (generatorURL):
// http://HOST:PORT, with the host's name for an address that listens on
// every interface (":9464", "0.0.0.0:9464"). It returns "" for an address
// it cannot read.
func PageURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return ""
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
