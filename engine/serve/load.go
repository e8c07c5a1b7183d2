package serve

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
)

// fileState is what the daemon knows of one *.md file in Dir.
type fileState struct {
	path  string
	sum   [sha256.Size]byte
	name  string   // the contract it provides, when it loaded (or last loaded) clean
	diags []string // lint output of the current content when it failed
	// duplicate is set when the file was kept out only because another
	// file provides the same contract name; it is retried when that other
	// file goes away.
	duplicate bool
}

// reload reads Dir and reconciles the running set with it: new files start,
// edited files swap in, a file that fails lint is kept out (or, when an
// older good version of it is running, keeps that version running and
// records the diagnostics), and deleted files stop.
func (d *Daemon) reload() {
	paths, err := contracts.ContractFiles(d.cfg.Dir)
	if err != nil {
		d.log.Error("contract directory unreadable", "dir", d.cfg.Dir, "error", err)
		return
	}
	seen := map[string]bool{}
	for _, path := range paths {
		seen[path] = true
	}
	// Removals first, so a renamed file, or a duplicate whose twin went
	// away, loads in this same pass instead of clashing with its old self.
	d.mu.Lock()
	var gone []*fileState
	for path, fs := range d.files {
		if !seen[path] {
			gone = append(gone, fs)
			delete(d.files, path)
		}
	}
	d.mu.Unlock()
	removed := false
	for _, fs := range gone {
		if fs.name != "" && d.removeEntry(fs.name, fs.path) {
			removed = true
			d.log.Info("contract file removed; contract stopped", "contract", fs.name, "path", fs.path)
		}
	}
	for _, path := range paths {
		d.protect("", "loading "+path, func() { d.reloadFile(path, removed) })
	}
	d.updateCounts()
	if d.cfg.HA != nil {
		d.mu.Lock()
		names := make([]string, 0, len(d.entries))
		for name := range d.entries {
			names = append(names, name)
		}
		d.mu.Unlock()
		d.cfg.HA.setContracts(names)
	}
}

// reloadFile loads path when its content changed, or when it was kept out
// as a duplicate and retryDuplicates says a contract went away meanwhile.
func (d *Daemon) reloadFile(path string, retryDuplicates bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		d.log.Error("contract file unreadable", "path", path, "error", err)
		return
	}
	sum := sha256.Sum256(b)
	d.mu.Lock()
	prev := d.files[path]
	d.mu.Unlock()
	if prev != nil && prev.sum == sum && !(retryDuplicates && prev.duplicate) {
		return
	}
	fs := &fileState{path: path, sum: sum}
	if prev != nil {
		fs.name = prev.name
	}

	c, diags, crashed := d.load(path)
	if c == nil || diags.HasErrors() {
		for _, dg := range diags {
			fs.diags = append(fs.diags, dg.String())
		}
		if crashed != nil {
			fs.diags = append(fs.diags, fmt.Sprintf("%s:1:1: error: the loader panicked (a bug in contractd; the stack is in the log): %v", path, crashed))
		}
		if len(fs.diags) == 0 {
			fs.diags = []string{path + ":1:1: error: the loader returned no contract"}
		}
		d.mu.Lock()
		d.files[path] = fs
		e := d.entries[fs.name]
		d.mu.Unlock()
		if e != nil && e.path == path {
			e.mu.Lock()
			e.rejected = fs.diags
			e.mu.Unlock()
			for _, line := range fs.diags {
				d.log.Error("contract edit rejected, the last good version keeps running", "contract", fs.name, "path", path, "diagnostic", line)
			}
		} else {
			for _, line := range fs.diags {
				d.log.Error("contract rejected, not scheduled", "path", path, "diagnostic", line)
			}
		}
		return
	}
	for _, dg := range diags {
		d.log.Warn("contract lint warning", "path", path, "diagnostic", dg.String())
	}

	name := c.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), ".md")
	}
	if name != filepath.Base(name) || name == "." || name == ".." {
		fs.diags = []string{fmt.Sprintf("%s:1:1: error: contract name %q cannot name a state file", path, name)}
		d.mu.Lock()
		d.files[path] = fs
		d.mu.Unlock()
		d.log.Error("contract rejected, not scheduled", "path", path, "diagnostic", fs.diags[0])
		return
	}

	d.mu.Lock()
	other := d.entries[name]
	if other != nil && other.path != path {
		d.mu.Unlock()
		fs.diags = []string{fmt.Sprintf("%s:1:1: error: duplicate contract name %q (already loaded from %s)", path, name, other.path)}
		fs.duplicate = true
		d.mu.Lock()
		d.files[path] = fs
		d.mu.Unlock()
		d.log.Error("contract rejected, not scheduled", "path", path, "diagnostic", fs.diags[0])
		return
	}
	oldName := fs.name
	fs.name = name
	d.files[path] = fs
	d.mu.Unlock()

	if oldName != "" && oldName != name {
		d.removeEntry(oldName, path)
		d.log.Info("contract renamed", "contract", name, "was", oldName, "path", path)
	}
	if other != nil {
		d.swap(other, c)
		return
	}
	d.addEntry(d.newEntry(c, path, name))
}

// load is Config.Load with a panic (a file that reaches a bug in the
// parser) made a file kept out: it returns the panic's value, logged with
// its stack, and no contract.
func (d *Daemon) load(path string) (c *contracts.Contract, diags contracts.Diagnostics, crashed any) {
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("the loader panicked (recovered; the file is kept out)", "path", path, "error", fmt.Sprint(v), "stack", string(debug.Stack()))
			c, diags, crashed = nil, nil, v
		}
	}()
	c, diags = d.cfg.Load(path)
	return c, diags, nil
}

// swap puts a new version of a running contract in place. Its state (failure
// streak, hold-down) carries over; a changed interval takes effect now.
func (d *Daemon) swap(e *entry, c *contracts.Contract) {
	e.mu.Lock()
	oldEvery := every(e.c)
	e.c = c
	e.rejected = nil
	d.planResend(e, d.clock.Now())
	if iv := every(c); iv != oldEvery {
		e.phase = Stagger{Max: d.cfg.Stagger}.Phase(iv)
		if n := d.afterStartDelay(c, d.clock.Now().Add(iv), e.phase); n.Before(e.next) || !e.running {
			e.next = n
		}
	}
	e.mu.Unlock()
	d.fleetChanged()
	d.metrics.routes(e.name, c)
	e.poke()
	d.log.Info("contract reloaded", "contract", e.name, "path", e.path, "version", c.Version, "every", contracts.FormatDuration(every(c)))
}

func (d *Daemon) addEntry(e *entry) {
	d.mu.Lock()
	if d.stopping.Load() {
		d.mu.Unlock()
		return
	}
	d.entries[e.name] = e
	d.mu.Unlock()
	d.fleetChanged()
	e.mu.Lock()
	var lastRun time.Time
	if st := e.state; !st.LastStartedAt.IsZero() {
		lastRun = st.LastStartedAt.Add(time.Duration(st.LastDurationMS) * time.Millisecond)
	}
	e.mu.Unlock()
	d.metrics.add(e.name, lastRun)
	d.metrics.routes(e.name, e.c)
	d.metrics.setHeld(e.name, e.state.HeldDown)
	e.mu.Lock()
	next, held := e.next, e.state.HeldDown
	e.mu.Unlock()
	if held {
		d.log.Warn("contract loaded, held down; `contractd reset "+e.name+"` releases it", "contract", e.name, "path", e.path, "held_since", e.state.HeldSince.UTC().Format(time.RFC3339))
	} else {
		d.log.Info("contract loaded", "contract", e.name, "path", e.path, "every", contracts.FormatDuration(every(e.c)), "first_run", next.UTC().Format(time.RFC3339))
	}
	d.recordStopped(e.name)
	go d.loop(d.loopCtx, e)
	if held && !e.state.Alerted {
		// A hold-down whose alert was not delivered before a restart.
		e.mu.Lock()
		e.state.Alerted = true
		e.mu.Unlock()
		go d.protect(e.name, "the hold-down alert", func() { d.holdDownAlert(e) })
	}
}

// recordStopped writes the history record of a run of the contract that
// was stopped before its end (a daemon or a one-shot run killed during
// it), so the status page, the history and the ledger agree from the
// start (engine.RecordStopped). With HA the contract's owner does it
// in its next run.
func (d *Daemon) recordStopped(name string) {
	if d.cfg.HA != nil {
		return
	}
	h, err := engine.RecordStopped(d.runCtx, d.store, name, d.clock.Now())
	switch {
	case err != nil:
		d.log.Error("the record of a run stopped before its end not written", "contract", name, "error", err)
	case h != nil:
		d.log.Warn("a run was stopped before it recorded its end; its history record is written from the ledger",
			"contract", name, "stopped_run", h.RunID, "started", h.StartedAt.UTC().Format(time.RFC3339))
	}
}

// removeEntry stops the contract name when path provides it, and reports
// whether it did.
func (d *Daemon) removeEntry(name, path string) bool {
	d.mu.Lock()
	e := d.entries[name]
	if e == nil || e.path != path {
		d.mu.Unlock()
		return false
	}
	delete(d.entries, name)
	d.mu.Unlock()
	d.fleetChanged()
	close(e.stop)
	d.metrics.forget(name)
	return true
}

func (d *Daemon) counts() (loaded, rejected int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, fs := range d.files {
		if len(fs.diags) > 0 && (fs.name == "" || d.entries[fs.name] == nil || d.entries[fs.name].path != fs.path) {
			rejected++
		}
	}
	return len(d.entries), rejected
}

func (d *Daemon) updateCounts() {
	loaded, rejected := d.counts()
	stale := 0
	d.mu.Lock()
	for _, e := range d.entries {
		e.mu.Lock()
		if len(e.rejected) > 0 {
			stale++
		}
		e.mu.Unlock()
	}
	d.mu.Unlock()
	d.metrics.contracts.WithLabelValues("loaded").Set(float64(loaded))
	d.metrics.contracts.WithLabelValues("rejected").Set(float64(rejected))
	d.metrics.contracts.WithLabelValues("stale").Set(float64(stale))
}
