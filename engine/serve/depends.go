package serve

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
)

// Dependencies across contracts (depends_on, via chains): every run is
// given the fleet of the loaded contracts (engine.WithFleet), and the
// daemon judges a contract again at once, not at its next tick:
//
//   - when something it depends on changes its verdict (fails, or is back:
//     the units that fail on their own then open their incidents at once);
//   - when it waits for a dependency to be judged (a unit failed after the
//     dependency was last judged healthy), the dependency is judged at once
//     first, and the waiting contract again when that is done.
//
// A verdict is read from the store (the units' judgements in the ledger),
// so under --etcd a dependency owned by another node is its owner's word:
// its changes are seen by polling its ledger every DepPoll.

// DefaultDepPoll is how often a daemon reads the judgements of the
// dependencies that another node of an --etcd group runs.
const DefaultDepPoll = 2 * time.Second

// deps is the daemon's view of the dependencies between its contracts.
type deps struct {
	mu    sync.Mutex
	gen   int            // bumped when the loaded contracts change
	built int            // the gen fleet was built at
	fleet *engine.Fleet  // of the loaded contracts
	seen  map[string]sig // each dependency's verdict as last seen
	// waiting holds, by dependency, the contracts that wait for it to
	// be judged again.
	waiting map[string]map[string]bool
}

// sig is a contract's verdict as its dependents see it: the units that
// fail, and when it was last judged.
type sig struct {
	failing string
	at      time.Time
}

// changed marks the loaded contracts as changed: the fleet is built again
// when next asked for.
func (d *Daemon) fleetChanged() {
	d.deps.mu.Lock()
	d.deps.gen++
	d.deps.mu.Unlock()
}

// fleet is the loaded contracts as a fleet, built again only after they
// changed.
func (d *Daemon) fleet() *engine.Fleet {
	d.deps.mu.Lock()
	defer d.deps.mu.Unlock()
	if d.deps.fleet != nil && d.deps.built == d.deps.gen {
		return d.deps.fleet
	}
	gen := d.deps.gen
	d.mu.Lock()
	cs := make([]*contracts.Contract, 0, len(d.entries))
	for _, e := range d.entries {
		e.mu.Lock()
		cs = append(cs, e.c)
		e.mu.Unlock()
	}
	d.mu.Unlock()
	d.deps.fleet, d.deps.built = engine.NewFleet(cs), gen
	return d.deps.fleet
}

// verdict reads contract name's verdict from the store, for its
// dependents; ok is false when it cannot be read.
func (d *Daemon) verdict(name string) (sig, bool) {
	l, err := engine.ReadLedger(d.view, name)
	if err != nil {
		return sig{}, false
	}
	var s sig
	var failing []string
	for key, u := range l.Units {
		if u == nil || u.Judged == nil {
			continue
		}
		if u.Judged.Failing() {
			failing = append(failing, key+"="+u.Judged.Severity.String()+">"+u.Judged.Root)
		}
		if u.Judged.At.After(s.at) {
			s.at = u.Judged.At
		}
	}
	sort.Strings(failing)
	s.failing = strings.Join(failing, ",")
	return s, true
}

// judged is called when contract name has been judged (here after its
// run, or as read from the store for one another node runs): when its
// verdict changed, the contracts that depend on it are judged at once,
// and those that waited for it in any case.
func (d *Daemon) judged(name string) {
	d.deps.mu.Lock()
	_, waited := d.deps.waiting[name]
	d.deps.mu.Unlock()
	if !waited && !d.fleet().HasDependents(name) {
		return // nobody reads its verdict
	}
	s, ok := d.verdict(name)
	if !ok {
		return
	}
	d.deps.mu.Lock()
	if d.deps.seen == nil {
		d.deps.seen = map[string]sig{}
	}
	old, had := d.deps.seen[name]
	d.deps.seen[name] = s
	waiters := d.deps.waiting[name]
	if !s.at.Equal(old.at) {
		delete(d.deps.waiting, name)
	} else {
		waiters = nil
	}
	d.deps.mu.Unlock()
	again := map[string]bool{}
	for w := range waiters {
		again[w] = true
	}
	if had && old.failing != s.failing {
		f := d.fleet()
		d.mu.Lock()
		for other := range d.entries {
			if other != name && f.DependsOn(other, name) {
				again[other] = true
			}
		}
		d.mu.Unlock()
	}
	for _, other := range sortedKeysOf(again) {
		d.judgeNow(other, "a dependency, "+name+", was judged again")
	}
}

// waits records that contract name waits for the dependencies its report
// names, and has each that this instance runs judged at once.
func (d *Daemon) waits(name string, rep *engine.Report) {
	if rep == nil {
		return
	}
	on := map[string]bool{}
	for _, a := range rep.Agents {
		if a == nil || a.Suppressed == nil || !a.Suppressed.Waiting {
			continue
		}
		dep, _, _ := strings.Cut(a.Suppressed.By, "/")
		if strings.HasPrefix(a.Suppressed.By, contracts.TargetPrefix) || dep == name {
			continue
		}
		on[dep] = true
	}
	if len(on) == 0 {
		return
	}
	d.deps.mu.Lock()
	if d.deps.waiting == nil {
		d.deps.waiting = map[string]map[string]bool{}
	}
	for dep := range on {
		if d.deps.waiting[dep] == nil {
			d.deps.waiting[dep] = map[string]bool{}
		}
		d.deps.waiting[dep][name] = true
	}
	d.deps.mu.Unlock()
	for _, dep := range sortedKeysOf(on) {
		d.judgeNow(dep, name+" waits for it")
	}
}

// judgeNow has contract name run at once (after the run going, when one
// is): the trigger says why. A contract another node runs, or held down,
// is left alone.
func (d *Daemon) judgeNow(name, why string) {
	e := d.entry(name)
	if e == nil || d.mode(name) == Standby {
		return
	}
	e.mu.Lock()
	if e.state.HeldDown {
		e.mu.Unlock()
		return
	}
	if e.running {
		e.again = why
	} else {
		e.next, e.why = d.clock.Now(), why
	}
	e.mu.Unlock()
	e.poke()
}

// pollDeps reads, every DepPoll, the verdicts of the dependencies of this
// instance's contracts that another node runs (--etcd), and reacts to
// their changes as to a run of its own (judged).
func (d *Daemon) pollDeps(ctx context.Context) {
	if d.cfg.HA == nil {
		return
	}
	every := d.cfg.DepPoll
	if every <= 0 {
		every = DefaultDepPoll
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.clock.After(every):
		}
		f := d.fleet()
		d.mu.Lock()
		names := make([]string, 0, len(d.entries))
		for n := range d.entries {
			names = append(names, n)
		}
		d.mu.Unlock()
		for _, dep := range names {
			if d.mode(dep) != Standby {
				continue // its runs here say when it changes
			}
			for _, other := range names {
				if other != dep && d.mode(other) != Standby && f.DependsOn(other, dep) {
					d.protect(dep, "reading a dependency", func() { d.judged(dep) })
					break
				}
			}
		}
	}
}
