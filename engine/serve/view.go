package serve

import (
	"errors"
	"sort"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
)

// The views of a contract — the status page, GET /contracts and GET
// /contracts/NAME — read its state from the store the engine writes: the
// state dir, or with --etcd the group's shared state, so every instance
// of a group shows the same truth for every contract (the owner's last
// run and severity, its open incidents and maintenance windows, its
// history). What only this instance knows is added from its entry: the
// schedule, a run going, a hold-down, and its own last run while that is
// newer than the store's (etcd without quorum: runs report, record
// nothing).

// viewStore returns the store views read: for a shared store, a reader
// whose reads never change what a run's write compares and answer
// without quorum (etcdstore.Store.Reader); else the store itself.
func viewStore(st store.Backend) store.Backend {
	if r, ok := st.(interface{ Reader() store.Backend }); ok {
		return r.Reader()
	}
	return st
}

// contractState is one contract as the store holds it, read once for a
// view.
type contractState struct {
	sum      *engine.Summary
	hist     []engine.HistoryRecord // oldest first, up to the runs asked for
	problems []string
}

// readState reads contract name's summary and its last runs (none when
// runs is 0) from the view store. down, when set, says the store did not
// answer for an earlier contract of the same view: nothing is asked of it
// again, and the problem is said; a store that does not answer sets it.
func (d *Daemon) readState(name string, runs int, now time.Time, down *error) contractState {
	cs := contractState{}
	if *down != nil {
		cs.problems = append(cs.problems, (*down).Error())
		return cs
	}
	sum, err := engine.Summarize(d.view, name, now)
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			*down = err
		}
		cs.problems = append(cs.problems, err.Error())
		return cs
	}
	cs.sum = sum
	cs.problems = append(cs.problems, sum.Problems...)
	if runs > 0 {
		hist, err := d.view.History(name, runs)
		if errors.Is(err, store.ErrUnavailable) {
			*down = err
		}
		if err != nil {
			cs.problems = append(cs.problems, "history: "+err.Error())
		}
		cs.hist = hist
	}
	return cs
}

// lastRun is the run a view shows as a contract's last: the store's last
// record, unless this instance runs the contract and its own last run is
// newer and not in the store (a run that could record nothing). It
// returns when it started, its run id and its severity; the zero time
// when there is none.
func (d *Daemon) lastRun(e *entry, mode Mode, cs contractState) (time.Time, string, contracts.Severity) {
	e.mu.Lock()
	last, st := e.last, e.state
	e.mu.Unlock()
	var at time.Time
	id, sev := "", contracts.SeverityUnknown
	if cs.sum != nil && !cs.sum.LastRun.IsZero() {
		at, id, sev = cs.sum.LastRun, cs.sum.LastRunID, cs.sum.Severity
	}
	if mode == Standby {
		return at, id, sev
	}
	switch {
	case last != nil && last.Skipped == "" && last.RunID != id && last.StartedAt.After(at):
		return last.StartedAt, last.RunID, last.OverallSeverity
	case at.IsZero() && !st.LastStartedAt.IsZero():
		// Runs whose records this store does not hold (a Runner that
		// keeps none): the scheduler's own.
		return st.LastStartedAt, "", st.LastSeverity
	}
	return at, id, sev
}

// contractStatus is the status of one contract as every view shows it:
// its schedule and this instance's part from the entry, its last run,
// incidents and maintenance from the store.
func (d *Daemon) contractStatus(e *entry, cs contractState) ContractStatus {
	mode := d.mode(e.name)
	s := d.status(e)
	at, id, sev := d.lastRun(e, mode, cs)
	s.LastRunAt, s.LastRunID, s.LastSeverity = timePtr(at), id, sev
	s.Incidents = []*guard.Incident{}
	if cs.sum != nil {
		s.Incidents = cs.sum.Incidents
		s.Maintenance = cs.sum.Maintenance
	}
	e.mu.Lock()
	c := e.c
	e.mu.Unlock()
	s.Maintenance = engine.AddDeclaredWindows(s.Maintenance, c, d.clock.Now())
	s.Problems = cs.problems
	return s
}

// sortedWindows lists windows by agent.
func sortedWindows(m map[string]*guard.Window) []pageWindow {
	out := make([]pageWindow, 0, len(m))
	for a, w := range m {
		out = append(out, pageWindow{Agent: a, Window: w})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out
}
