package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
)

// openStore returns Options.Store, or the files under StateDir.
func (e *Engine) openStore() (store.Backend, error) {
	if e.opts.Store != nil {
		return e.opts.Store, nil
	}
	s, err := store.Open(e.opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("open state dir: %w", err)
	}
	return s.WithClock(e.opts.Clock), nil
}

// lastRepair is the time of the newest repair of any unit: the seed's
// restart_debounce timestamp.
func lastRepair(l *Ledger) time.Time {
	var t time.Time
	for _, u := range l.Units {
		if u == nil {
			continue
		}
		for _, r := range u.Repairs {
			if r.After(t) {
				t = r
			}
		}
	}
	return t
}

// cloneUnit deep-copies a unit so a dry run can evaluate guards without
// changing what is persisted.
func cloneUnit(u *guard.Unit) *guard.Unit {
	b, _ := json.Marshal(u)
	var out guard.Unit
	_ = json.Unmarshal(b, &out)
	return &out
}

func cloneIncidents(m map[string]*guard.Incident) map[string]*guard.Incident {
	out := make(map[string]*guard.Incident, len(m))
	for k, v := range m {
		if v == nil {
			continue
		}
		c := *v
		out[k] = &c
	}
	return out
}

// HistoryRecord is one run in a contract's history (store.RunRecord):
// enough to answer `contractd history` and `contractd why` (every action
// with every guard's answer) without keeping whole reports.
type HistoryRecord = store.RunRecord

func historyRecord(rep *Report) HistoryRecord {
	h := HistoryRecord{RunID: rep.RunID, StartedAt: rep.StartedAt, DurationMS: rep.DurationMS, OverallSeverity: rep.OverallSeverity.String(),
		Agents: map[string]string{}, Findings: map[string][]string{}, Actions: rep.Actions, Alerts: rep.Alerts, Errors: rep.Errors, RequestedBy: rep.RequestedBy}
	for name, a := range rep.Agents {
		h.Agents[name] = a.Severity.String()
		if a.Suppressed != nil {
			if h.Suppressed == nil {
				h.Suppressed = map[string]*store.Suppression{}
			}
			h.Suppressed[name] = &store.Suppression{By: a.Suppressed.By, Root: a.Suppressed.Root, Waiting: a.Suppressed.Waiting, Reason: a.Suppressed.Reason}
		}
		if a.Flapping {
			if h.Flapping == nil {
				h.Flapping = map[string]float64{}
			}
			h.Flapping[name] = a.FlapPercent
		}
	}
	for _, st := range rep.Stages {
		for _, sp := range st.Steps {
			if len(sp.Findings) > 0 {
				h.Findings[st.ID+"/"+sp.ID] = sp.Findings
			}
		}
	}
	return h
}

// Status is a contract's last snapshot and when it was written.
type Status struct {
	Contract  string         `json:"contract"`
	Snapshot  map[string]any `json:"snapshot"`
	WrittenAt time.Time      `json:"written_at"`
	AgeSec    float64        `json:"age_seconds"`
}

// ErrNeverRan is returned for a contract with no state yet.
var ErrNeverRan = errors.New("no run recorded yet")

// ReadStatus returns the last snapshot of contract name in st. It fails
// with ErrNeverRan when the contract never ran, with an error wrapping
// store.ErrCorrupt when the snapshot was corrupt (it is moved aside), and
// with the store's error when it cannot be read.
func ReadStatus(st store.Backend, name string, now time.Time) (*Status, error) {
	snap, at, err := st.ReadSnapshot(name)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		return nil, fmt.Errorf("%s: %w", name, ErrNeverRan)
	}
	return &Status{Contract: name, Snapshot: snap, WrittenAt: at, AgeSec: now.Sub(at).Seconds()}, nil
}

// SetMaintenance starts (d > 0: from now for d, replacing the current one)
// or ends (d == 0) the maintenance window of one agent of a contract, or of
// the whole contract when agent is "", in st under the contract's run lock
// (waiting up to 30 s for a run to finish). Windows that have ended by now
// are dropped on the way. It returns the windows in force afterwards, keyed
// by agent (AllAgents for the whole contract); it fails when the
// lock cannot be had or the ledger cannot be read or written. A caller
// that named itself (WithRequester) is kept in the window (By) and in the
// ledger's operator events, which the next run's history record takes.
func SetMaintenance(ctx context.Context, st store.Backend, name, agent string, d time.Duration, reason string, now time.Time) (map[string]*guard.Window, error) {
	if agent == "" {
		agent = AllAgents
	}
	unlock, err := st.Lock(ctx, name, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("maintenance %s: %w", name, err)
	}
	defer unlock()
	l, err := ReadLedger(st, name)
	if err != nil {
		return nil, err
	}
	if l.Maintenance == nil {
		l.Maintenance = map[string]*guard.Window{}
	}
	by := Requester(ctx)
	if d > 0 {
		l.Maintenance[agent] = &guard.Window{Since: now, Until: now.Add(d), Reason: reason, By: by}
	} else {
		delete(l.Maintenance, agent)
	}
	if by != "" {
		l.AddOperator(store.OperatorEvent{At: now.UTC(), By: by, What: maintenanceEvent(agent, d, reason)})
	}
	l.PruneWindows(now)
	if err := WriteLedger(st, name, l); err != nil {
		return nil, err
	}
	return l.Maintenance, nil
}

// maintenanceEvent says what SetMaintenance did, for the operator events:
// "maintenance of the whole contract for 2h: upgrade", "maintenance of web
// ended".
func maintenanceEvent(agent string, d time.Duration, reason string) string {
	who := "agent " + agent
	if agent == AllAgents {
		who = "the whole contract"
	}
	if d <= 0 {
		return "maintenance of " + who + " ended"
	}
	s := "maintenance of " + who + " for " + contracts.FormatDuration(d)
	if reason != "" {
		s += ": " + reason
	}
	return s
}

// Maintenance returns a contract's maintenance windows in st that have not
// ended by now, by agent. It fails when the ledger cannot be read.
func Maintenance(st store.Backend, name string, now time.Time) (map[string]*guard.Window, error) {
	l, err := ReadLedger(st, name)
	if err != nil {
		return nil, err
	}
	l.PruneWindows(now)
	return l.Maintenance, nil
}

// ReleaseLedger is the operator's release of a contract (`contractd reset
// NAME`) in its ledger: escalations, failed-repair counts and pending
// repairs of every unit (or of the named unit) are cleared in st
// (Ledger.ClearUnits), under the run lock. Repair times stay, so
// budgets and the crash-loop guard still hold. The ledger records the
// release at now (Ledger.ReleasedAt): a daemon that runs the contract
// from a shared store releases its hold-down when it reads it;
// serve.ReleaseHoldDown releases a daemon's in its state dir. A caller that
// named itself (WithRequester) is kept in the ledger's operator events. It
// fails when the lock cannot be had within 5 s or the ledger cannot be read
// or written.
func ReleaseLedger(ctx context.Context, st store.Backend, name, unit string, now time.Time) error {
	unlock, err := st.Lock(ctx, name, 5*time.Second)
	if err != nil {
		return fmt.Errorf("reset %s: %w", name, err)
	}
	defer unlock()
	l, err := ReadLedger(st, name)
	if err != nil {
		return err
	}
	l.ClearUnits(unit)
	l.ReleasedAt = now.UTC()
	if by := Requester(ctx); by != "" {
		what := "released (hold-down, escalations and pending repairs cleared)"
		if unit != "" {
			what = "released agent " + unit + " (escalations and pending repairs cleared)"
		}
		l.AddOperator(store.OperatorEvent{At: now.UTC(), By: by, What: what})
	}
	return WriteLedger(st, name, l)
}
