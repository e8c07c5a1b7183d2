package engine

import "time"

// save is the last phase: the run's lines in the contract's log: file, the
// Maintains snapshot, the ledger and the run's history record, each written
// atomically.
func (r *run) save() error {
	r.writeRunLog()
	snap := r.snapshot(r.state)
	if err := r.st.WriteSnapshot(r.c.Name, snap); err != nil {
		return err
	}
	r.ledger.PruneWindows(r.e.opts.Now())
	if err := r.st.WriteLedger(r.c.Name, r.ledger); err != nil {
		return err
	}
	return r.st.AppendHistory(r.c.Name, historyRecord(r.rep))
}

// seedFromSnapshot rebuilds the one guard fact the snapshot keeps when the
// ledger was lost: the last repair (`restart_debounce`), recorded on every
// agent the snapshot names, so "never restart more than once per debounce
// window" holds across the loss. It over-counts rather than forgets.
func (r *run) seedFromSnapshot(snap map[string]any) {
	var last time.Time
	for _, key := range []string{"restart_debounce", "last_repair"} {
		if s, ok := snap[key].(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(last) {
				last = t
			}
		}
	}
	if last.IsZero() {
		return
	}
	agents, _ := snap["agents"].(map[string]any)
	for name := range agents {
		u := r.ledger.Unit(name)
		u.Repairs = append(u.Repairs, last)
	}
	for _, sr := range r.stages {
		if sr.agent != "" {
			u := r.ledger.Unit(sr.agent)
			if len(u.Repairs) == 0 {
				u.Repairs = append(u.Repairs, last)
			}
		}
	}
}
