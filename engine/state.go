package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	return s.WithClock(clockFunc(e.opts.Now)).WithRecordCheck(checkHistoryRecord), nil
}

// lastRepair is the time of the newest repair of any unit: the seed's
// restart_debounce timestamp.
func lastRepair(l *store.Ledger) time.Time {
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

// HistoryRecord is one line of a contract's run history: enough to answer
// `contractd history` and `contractd why` (every action with every guard's
// answer) without keeping whole reports.
type HistoryRecord struct {
	RunID           string              `json:"run_id"`
	StartedAt       time.Time           `json:"started_at"`
	DurationMS      int64               `json:"duration_ms"`
	DryRun          bool                `json:"dry_run,omitempty"`
	OverallSeverity string              `json:"overall_severity"`
	Agents          map[string]string   `json:"agents"`
	Findings        map[string][]string `json:"findings,omitempty"`
	Actions         []*ActionReport     `json:"actions,omitempty"`
	Alerts          []*AlertReport      `json:"alerts,omitempty"`
	Errors          []string            `json:"errors,omitempty"`
	// Interrupted says why the run stopped before its end, when it did: a
	// signal or a daemon's shutdown (the run then recorded what it did),
	// an engine panic, or a process that died during it (the record is
	// then rebuilt from the ledger by the next holder of the run lock,
	// severity unknown).
	Interrupted string `json:"interrupted,omitempty"`
}

func historyRecord(rep *Report) HistoryRecord {
	h := HistoryRecord{RunID: rep.RunID, StartedAt: rep.StartedAt, DurationMS: rep.DurationMS, OverallSeverity: rep.OverallSeverity.String(),
		Agents: map[string]string{}, Findings: map[string][]string{}, Actions: rep.Actions, Alerts: rep.Alerts, Errors: rep.Errors}
	for name, a := range rep.Agents {
		h.Agents[name] = a.Severity.String()
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

// ReadStatus returns the last snapshot of contract name under stateDir. It
// fails with ErrNeverRan when the contract never ran, and with an error
// wrapping store.ErrCorrupt when the snapshot was corrupt (it is moved aside).
func ReadStatus(stateDir, name string, now time.Time) (*Status, error) {
	s, err := store.Open(stateDir)
	if err != nil {
		return nil, err
	}
	return ReadStatusIn(s, name, now)
}

// ReadStatusIn is ReadStatus on the state in s.
func ReadStatusIn(s store.Backend, name string, now time.Time) (*Status, error) {
	snap, at, err := s.ReadSnapshot(name)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		return nil, fmt.Errorf("%s: %w", name, ErrNeverRan)
	}
	return &Status{Contract: name, Snapshot: snap, WrittenAt: at, AgeSec: now.Sub(at).Seconds()}, nil
}

// CheckHistoryRecord is the check every backend makes of a run record it
// reads back (store.Store.WithRecordCheck, etcdstore.Options.RecordCheck):
// it fails unless the record is a run record.
func CheckHistoryRecord(b json.RawMessage) error { return checkHistoryRecord(b) }

// checkHistoryRecord is the store's check of a history line: it must
// decode as a HistoryRecord with a run id and a start time, and no null
// action or alert.
func checkHistoryRecord(b json.RawMessage) error {
	var h HistoryRecord
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("not a run record: %v", err)
	}
	switch {
	case h.RunID == "":
		return errors.New("not a run record: run_id missing")
	case h.StartedAt.IsZero():
		return errors.New("not a run record: started_at missing")
	}
	for i, a := range h.Actions {
		if a == nil {
			return fmt.Errorf("actions[%d] is null", i)
		}
	}
	for i, a := range h.Alerts {
		if a == nil {
			return fmt.Errorf("alerts[%d] is null", i)
		}
	}
	return nil
}

// ReadHistory returns up to n of the contract's most recent runs, oldest
// first. Lines that are not run records are skipped: the records come back
// with an error wrapping store.ErrCorrupt (a *store.SkippedError) that names
// them. It fails without records when the state dir or the file cannot be
// read.
func ReadHistory(stateDir, name string, n int) ([]HistoryRecord, error) {
	s, err := store.Open(stateDir)
	if err != nil {
		return nil, err
	}
	return ReadHistoryIn(s.WithRecordCheck(checkHistoryRecord), name, n)
}

// ReadHistoryIn is ReadHistory on the state in st, whose reads check
// records with CheckHistoryRecord.
func ReadHistoryIn(s store.Backend, name string, n int) ([]HistoryRecord, error) {
	raw, skipped := s.History(name, n)
	if skipped != nil && !errors.Is(skipped, store.ErrCorrupt) {
		return nil, skipped
	}
	out := make([]HistoryRecord, 0, len(raw))
	for _, r := range raw {
		var h HistoryRecord
		if err := json.Unmarshal(r, &h); err != nil {
			// checkHistoryRecord decoded it already.
			return nil, fmt.Errorf("history of %s: %w", name, err)
		}
		out = append(out, h)
	}
	return out, skipped
}

// SetMaintenance starts (d > 0: from now for d, replacing the current one)
// or ends (d == 0) the maintenance window of one agent of a contract, or of
// the whole contract when agent is "", under the contract's run lock
// (waiting up to 30 s for a run to finish). Windows that have ended by now
// are dropped on the way. It returns the windows in force afterwards, keyed
// by agent (store.AllAgents for the whole contract).
func SetMaintenance(ctx context.Context, stateDir, name, agent string, d time.Duration, reason string, now time.Time) (map[string]*guard.Window, error) {
	s, err := store.Open(stateDir)
	if err != nil {
		return nil, err
	}
	return SetMaintenanceIn(ctx, s, name, agent, d, reason, now)
}

// SetMaintenanceIn is SetMaintenance on the state in st.
func SetMaintenanceIn(ctx context.Context, s store.Backend, name, agent string, d time.Duration, reason string, now time.Time) (map[string]*guard.Window, error) {
	if agent == "" {
		agent = store.AllAgents
	}
	unlock, err := s.Lock(ctx, name, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("maintenance %s: %w", name, err)
	}
	defer unlock()
	l, err := s.ReadLedger(name)
	if err != nil {
		return nil, err
	}
	if l.Maintenance == nil {
		l.Maintenance = map[string]*guard.Window{}
	}
	if d > 0 {
		l.Maintenance[agent] = &guard.Window{Since: now, Until: now.Add(d), Reason: reason}
	} else {
		delete(l.Maintenance, agent)
	}
	l.PruneWindows(now)
	if err := s.WriteLedger(name, l); err != nil {
		return nil, err
	}
	return l.Maintenance, nil
}

// Maintenance returns a contract's maintenance windows that have not ended
// by now, by agent.
func Maintenance(stateDir, name string, now time.Time) (map[string]*guard.Window, error) {
	s, err := store.Open(stateDir)
	if err != nil {
		return nil, err
	}
	return MaintenanceIn(s, name, now)
}

// MaintenanceIn is Maintenance on the state in st.
func MaintenanceIn(s store.Backend, name string, now time.Time) (map[string]*guard.Window, error) {
	l, err := s.ReadLedger(name)
	if err != nil {
		return nil, err
	}
	l.PruneWindows(now)
	return l.Maintenance, nil
}

// Reset is the operator's release of a contract (`contractd reset NAME`):
// escalations, failed-repair counts and pending repairs of every unit (or
// of the named unit) are cleared (store.Ledger.Reset), under the run lock.
// Repair times stay, so budgets and the crash-loop guard still hold. The
// daemon's hold-down is released by serve.Reset, which the CLI also calls.
func Reset(ctx context.Context, stateDir, name, unit string) error {
	s, err := store.Open(stateDir)
	if err != nil {
		return err
	}
	return ResetIn(ctx, s, name, unit)
}

// ResetIn is Reset on the state in st.
func ResetIn(ctx context.Context, s store.Backend, name, unit string) error {
	unlock, err := s.Lock(ctx, name, 5*time.Second)
	if err != nil {
		return fmt.Errorf("reset %s: %w", name, err)
	}
	defer unlock()
	l, err := s.ReadLedger(name)
	if err != nil {
		return err
	}
	l.Reset(unit)
	return s.WriteLedger(name, l)
}
