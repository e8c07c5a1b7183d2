package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
)

// The ledger document: everything the guards and alerts remember about one
// contract between runs, and how it is read and written. The store keeps
// it as bytes (store.Backend.ReadLedger and WriteLedger), atomically, and
// moves aside a copy DecodeLedger refuses; what it holds is the engine's.

// LedgerVersion is the ledger format this build reads and writes.
const LedgerVersion = 1

// Ledger is everything the guards and alerts remember about one contract
// between runs. It is plain JSON; the rules that change it live in
// engine/guard and engine/notify.
type Ledger struct {
	Version  int    `json:"version"`
	Contract string `json:"contract"`
	// Units holds guard state per unit key (agent, or agent/item for
	// for_each stages): consecutive counts, repair times, pending repairs,
	// failed repairs, escalation, grace, the external restart counter.
	Units map[string]*guard.Unit `json:"units"`
	// Incidents holds alert incidents by guard.IncidentKey.
	Incidents map[string]*guard.Incident `json:"incidents"`
	// Outbox holds messages a notifier failed to deliver.
	Outbox notify.Outbox `json:"outbox"`
	// Maintenance holds the operator's maintenance windows by agent; the
	// key "*" covers the whole contract (`contractd maintenance`).
	Maintenance map[string]*guard.Window `json:"maintenance,omitempty"`
	// Intents are repairs recorded before their command starts: the
	// write-ahead record. An intent without an outcome is a repair that a
	// crash interrupted: the next run counts it and verifies it, and never
	// runs it again inside the guards.
	Intents []*Intent `json:"intents,omitempty"`
	// Sending holds a run's messages from the moment their incidents are
	// decided until the routes have them (delivered or queued): a crash in
	// between leaves them here, and the next run queues them for every route.
	Sending []notify.Message `json:"sending,omitempty"`
	// ResendErrors holds, by route, why the route's last resend of the open
	// incidents failed (the alertmanager route posts them again every
	// resend), so a failure is reported once, when it first happens or
	// changes, not at every resend. A route whose resend works is absent.
	ResendErrors map[string]string `json:"resend_errors,omitempty"`
	// Run is the run that has written this ledger ahead of its end: set by
	// its first write-ahead write (a repair's intent, messages being sent),
	// cleared by its last write, which comes after its history record. A
	// Run that outlives its process is a run that was stopped before it
	// recorded its end; the next reader that holds the run lock writes its
	// history record from what the ledger holds (engine: interrupted).
	Run *RunMark `json:"run,omitempty"`
	// ReleasedAt is when an operator last reset the contract (`contractd
	// reset`): the daemon that runs it releases its hold-down and failure
	// streak when this is newer than the last release it applied, so a
	// reset made on any host reaches the owner of a shared contract.
	ReleasedAt time.Time `json:"released_at,omitzero"`
	// Operator holds what callers who name themselves (the MCP tools)
	// changed since the last run recorded: maintenance started or ended,
	// a release. The next run's history record takes them (RunRecord.Operator),
	// so `history` and `why` say who changed what, and when.
	Operator []store.OperatorEvent `json:"operator,omitempty"`
}

// MaxOperatorEvents bounds Ledger.Operator: the oldest go first.
const MaxOperatorEvents = 50

// AddOperator records an operator's change, keeping the newest
// MaxOperatorEvents.
func (l *Ledger) AddOperator(e store.OperatorEvent) {
	l.Operator = append(l.Operator, e)
	if n := len(l.Operator) - MaxOperatorEvents; n > 0 {
		l.Operator = append([]store.OperatorEvent(nil), l.Operator[n:]...)
	}
}

// RunMark names a run whose effects are in the ledger before its history
// record is written.
type RunMark struct {
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	// Messages are the run's messages, recorded with their incidents
	// before any route gets them, so a run stopped after that still says
	// what it sent.
	Messages []notify.Message `json:"messages,omitempty"`
}

// Validate checks a run mark read back from storage.
func (m *RunMark) Validate() error {
	switch {
	case m.RunID == "":
		return errors.New("run_id missing")
	case m.StartedAt.IsZero():
		return errors.New("started_at missing")
	}
	return nil
}

// Intent is one repair, written to the ledger before its command starts and
// again when it ends.
type Intent struct {
	RunID     string    `json:"run_id"`
	Unit      string    `json:"unit"`      // the unit's ledger key
	Condition string    `json:"condition"` // the condition key the repair answers
	Command   string    `json:"command"`   // as reports show it
	Target    string    `json:"target"`
	Started   time.Time `json:"started"`
	// Ended is set when the command returned; ExitCode is -1 when it could
	// not reach its target.
	Ended    time.Time `json:"ended,omitzero"`
	ExitCode int       `json:"exit_code,omitempty"`
}

// Done reports whether the intent's command returned.
func (i *Intent) Done() bool { return !i.Ended.IsZero() }

// Validate checks an intent read back from storage.
func (i *Intent) Validate() error {
	switch {
	case i == nil:
		return errors.New("is null")
	case i.Unit == "" || i.Condition == "":
		return errors.New("unit or condition missing")
	case i.Started.IsZero():
		return errors.New("started missing")
	}
	return nil
}

// AllAgents is the Maintenance key of a window over the whole contract.
const AllAgents = "*"

// Window returns the maintenance window that covers agent at now: its own
// or the contract-wide one, whichever ends later; nil when none is active.
func (l *Ledger) Window(agent string, now time.Time) *guard.Window {
	var best *guard.Window
	for _, key := range []string{agent, AllAgents} {
		if w := l.Maintenance[key]; w.Active(now) && (best == nil || w.Until.After(best.Until)) {
			best = w
		}
	}
	return best
}

// PruneWindows drops maintenance windows that have ended by now.
func (l *Ledger) PruneWindows(now time.Time) {
	for k, w := range l.Maintenance {
		if w == nil || !now.Before(w.Until) {
			delete(l.Maintenance, k)
		}
	}
}

// NewLedger returns an empty ledger for a contract.
func NewLedger(contract string) *Ledger {
	return &Ledger{
		Version:   LedgerVersion,
		Contract:  contract,
		Units:     map[string]*guard.Unit{},
		Incidents: map[string]*guard.Incident{},
	}
}

// Unit returns the state of a unit, creating it when missing.
func (l *Ledger) Unit(key string) *guard.Unit {
	if l.Units == nil {
		l.Units = map[string]*guard.Unit{}
	}
	u := l.Units[key]
	if u == nil {
		u = &guard.Unit{}
		l.Units[key] = u
	}
	return u
}

// ReadLedger returns the contract's ledger from st; a contract that never
// wrote one gets an empty ledger. When the stored copy is corrupt (bad
// JSON, a version this build does not read, another contract's ledger, an
// entry that fails Validate) the store moves it aside and ReadLedger
// returns an empty ledger together with an error wrapping
// store.ErrCorrupt: the caller decides, and the engine repairs nothing in
// that run and alerts. Other read errors return a nil ledger.
func ReadLedger(st store.Backend, name string) (*Ledger, error) {
	var l *Ledger
	err := st.ReadLedger(name, func(b []byte) error {
		var err error
		l, err = DecodeLedger(name, b)
		return err
	})
	switch {
	case errors.Is(err, store.ErrCorrupt):
		return NewLedger(name), err
	case err != nil:
		return nil, err
	case l == nil:
		return NewLedger(name), nil
	}
	return l, nil
}

// WriteLedger replaces the contract's ledger in st in one write, as
// EncodeLedger writes it. It fails when the name is invalid or the store
// cannot write; the old ledger then stays.
func WriteLedger(st store.Backend, name string, l *Ledger) error {
	b, err := EncodeLedger(name, l)
	if err != nil {
		return err
	}
	return st.WriteLedger(name, b)
}

// DecodeLedger decodes a ledger read back from any backend and checks it:
// JSON, this build's version, the contract's own, every entry well formed
// (Validate). It returns what is wrong with it otherwise; the backend sets
// the bad copy aside.
func DecodeLedger(name string, b []byte) (*Ledger, error) {
	var l Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	switch {
	case l.Version != LedgerVersion:
		return nil, fmt.Errorf("ledger version %d, this build reads %d", l.Version, LedgerVersion)
	case l.Contract != name:
		return nil, fmt.Errorf("ledger of contract %q", l.Contract)
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if l.Units == nil {
		l.Units = map[string]*guard.Unit{}
	}
	if l.Incidents == nil {
		l.Incidents = map[string]*guard.Incident{}
	}
	return &l, nil
}

// Validate checks a ledger read back from storage: every unit, condition,
// incident and maintenance window is present (not null) and well formed
// (see guard.Unit.Validate), and queued messages have a non-negative
// attempt count. It returns the first problem, naming the entry, or nil.
// The guards trust what it accepts.
func (l *Ledger) Validate() error {
	for _, k := range sortedKeys(l.Units) {
		if err := l.Units[k].Validate(); err != nil {
			return fmt.Errorf("units[%q]: %w", k, err)
		}
	}
	for _, k := range sortedKeys(l.Incidents) {
		if err := l.Incidents[k].Validate(); err != nil {
			return fmt.Errorf("incidents[%q]: %w", k, err)
		}
	}
	for _, k := range sortedKeys(l.Maintenance) {
		if err := l.Maintenance[k].Validate(); err != nil {
			return fmt.Errorf("maintenance[%q]: %w", k, err)
		}
	}
	for i, in := range l.Intents {
		if err := in.Validate(); err != nil {
			return fmt.Errorf("intents[%d]: %w", i, err)
		}
	}
	for i, q := range l.Outbox.Queue {
		if q.Attempts < 0 {
			return fmt.Errorf("outbox.queue[%d].attempts: negative count %d", i, q.Attempts)
		}
	}
	if l.Run != nil {
		if err := l.Run.Validate(); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	return nil
}

// EncodeLedger returns the ledger as every backend stores it.
func EncodeLedger(name string, l *Ledger) ([]byte, error) {
	c := *l
	c.Version, c.Contract = LedgerVersion, name
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode ledger %s: %w", name, err)
	}
	return append(b, '\n'), nil
}

// ClearUnits is the operator's `contractd reset NAME [UNIT]`: it clears
// escalations, failed-repair counts, pending repairs and graces of one unit
// (or of every unit when unit is ""). Repair times stay, so budgets and the
// crash-loop guard still hold. It returns the units it reset, sorted. (The
// daemon's hold-down lives in its own state file; see serve.ReleaseHoldDown.)
func (l *Ledger) ClearUnits(unit string) []string {
	var done []string
	for key, u := range l.Units {
		if unit == "" || key == unit {
			guard.ClearUnit(u)
			done = append(done, key)
		}
	}
	sort.Strings(done)
	return done
}
