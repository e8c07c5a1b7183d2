package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
)

// stateFlags are the flags of the commands that read or change a
// contract's state: where the state is, and where contract files are (so
// a mistyped name can be told from a contract that never ran).
type stateFlags struct {
	stateDir string
	dir      string
}

func (s *stateFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&s.stateDir, "state-dir", defaultStateDir(getenv), "state `DIR`")
	fs.StringVar(&s.dir, "dir", getenv("CONTRACTD_DIR"), "contract `DIR` besides /etc/contractd, for telling known contract names from typos")
}

// checkName returns exitOK when name is a contract with state in src or a
// file; otherwise it says so, with the nearest known name, and returns
// exitUsage.
func (m *Main) checkName(cmd string, sf stateFlags, src *stateSource, name string) (*known, int) {
	k := m.known(src, sf.dir)
	if err := k.check(name); err != nil {
		m.errorf("%s: %v", cmd, err)
		return k, exitUsage
	}
	return k, exitOK
}

func (m *Main) cmdStatus(ctx context.Context, args []string) int {
	fs := m.flags("status")
	asJSON := fs.Bool("json", false, "print as JSON")
	var sf stateFlags
	sf.register(fs, m.Getenv)
	var ef etcdFlags
	ef.register(fs, m.Getenv, "read the state of a group of instances (serve --etcd) from etcd at `URL[,URL…]`; without NAME, with each contract's owner")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) > 1 {
		m.errorf("usage: contractd status %s", commands["status"].args)
		return exitUsage
	}
	src, err := m.openState(ctx, sf, ef)
	if err != nil {
		m.fail("status", err)
		return exitFailed
	}
	defer src.close()
	if wc, ok := src.st.(store.WriteChecker); ok {
		if err := wc.CheckWritable(); err != nil {
			// What the daemon's runs meet too: said first, on stdout for
			// people and on stderr beside --json (whose shape it keeps).
			w := m.Stdout
			if *asJSON {
				w = m.Stderr
			}
			say(w, "%v: runs probe and report, and repair and record nothing, until it can be written\n", err)
		}
	}
	if len(names) == 0 {
		return m.statusSummary(ctx, src, *asJSON)
	}
	name := stateName(names[0])
	m.settle(ctx, "status", src, name)
	// The last run, when it was interrupted, is said beside the snapshot:
	// the snapshot is then an older run's, or there is none.
	var last *engine.HistoryRecord
	hist, herr := src.st.History(name, 1)
	if errors.Is(herr, store.ErrUnavailable) {
		m.fail("status", herr)
		return exitFailed
	}
	if len(hist) > 0 {
		last = &hist[len(hist)-1]
	}
	st, err := engine.ReadStatus(src.st, name, time.Now())
	if err != nil {
		if errors.Is(err, engine.ErrNeverRan) {
			if last != nil {
				m.errorf("status: %s has no snapshot: its last run, %s at %s, wrote none (interrupted: %s); `contractd history %s` shows what it did",
					name, last.RunID, last.StartedAt.Format(time.RFC3339), nonEmpty(last.Interrupted, "no reason recorded"), name)
				return exitFailed
			}
			if _, code := m.checkName("status", sf, src, name); code != exitOK {
				return code
			}
			m.errorf("status: %s has not run yet: no snapshot in %s", name, src.where)
			return exitUsage
		}
		m.fail("status", err)
		return exitFailed
	}
	if *asJSON {
		return m.writeJSON(st)
	}
	say(m.Stdout, "%s: snapshot written %s (%s ago)\n", st.Contract, st.WrittenAt.Format(time.RFC3339), time.Duration(st.AgeSec*float64(time.Second)).Round(time.Second))
	if last != nil && last.Interrupted != "" {
		say(m.Stdout, "  (last run %s at %s was interrupted: %s)\n", last.RunID, last.StartedAt.Format(time.RFC3339), last.Interrupted)
	}
	writeTree(m.Stdout, st.Snapshot, "  ")
	return exitOK
}

// settle writes the history record of a run of name that was stopped
// before its end (engine.RecordStopped), so what the command reads next
// agrees with the ledger, and says on stderr what it did, or that a run is
// in progress. Only the state dir: with --etcd the contract's owner does
// it in its next run (a reader there holds no run lock to do it under).
func (m *Main) settle(ctx context.Context, cmd string, src *stateSource, name string) {
	if src.shared {
		return
	}
	h, err := engine.RecordStopped(ctx, src.st, name, time.Now())
	switch {
	case errors.Is(err, engine.ErrRunning):
		m.errorf("%s: %v; it records its end when it finishes", cmd, err)
	case err != nil:
		m.errorf("%s: %s: the record of a run stopped before its end could not be written: %v", cmd, name, err)
	case h != nil:
		m.errorf("%s: %s: run %s (started %s) was stopped before it recorded its end; its record, rebuilt from the ledger, is now in the history",
			cmd, name, h.RunID, h.StartedAt.Format(time.RFC3339))
	}
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// statusSummary prints one line per contract with state, like `monit
// summary`: severity, agents healthy of all, the last run's age, open
// incidents and maintenance; with --etcd, each contract's owner too.
func (m *Main) statusSummary(ctx context.Context, src *stateSource, asJSON bool) int {
	names, err := src.st.Contracts()
	if err != nil {
		m.fail("status", err)
		return exitFailed
	}
	var owners map[string]string
	if src.owners != nil {
		if owners, err = src.owners(); err != nil {
			m.fail("status", err)
			return exitFailed
		}
	}
	now := time.Now()
	sums := make([]*engine.Summary, 0, len(names))
	for _, n := range names {
		m.settle(ctx, "status", src, n)
		s, err := engine.Summarize(src.st, n, now)
		if errors.Is(err, store.ErrUnavailable) {
			m.fail("status", err)
			return exitFailed
		}
		if err != nil {
			m.errorf("status: %s: %v", n, err)
			continue
		}
		if src.shared {
			s.Owner = nonEmpty(owners[n], "none")
		}
		sums = append(sums, s)
	}
	return m.printSummaries(sums, asJSON, "no contract has state in "+src.where+" yet")
}

// printSummaries prints the summary table (or JSON), with an OWNER column
// when the summaries name owners; none says what an empty table means.
func (m *Main) printSummaries(sums []*engine.Summary, asJSON bool, none string) int {
	now := time.Now()
	if asJSON {
		return m.writeJSON(sums)
	}
	if len(sums) == 0 {
		say(m.Stdout, "%s\n", none)
		return exitOK
	}
	owners := sums[0].Owner != ""
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	head := "CONTRACT\tSTATUS\tAGENTS OK\tLAST RUN\tINCIDENTS\tNOTE"
	if owners {
		head = "CONTRACT\tOWNER\tSTATUS\tAGENTS OK\tLAST RUN\tINCIDENTS\tNOTE"
	}
	fmt.Fprintln(tw, head)
	for _, s := range sums {
		last := "never"
		if !s.LastRun.IsZero() {
			last = serve.Ago(now.Sub(s.LastRun)) + " ago"
		}
		var notes []string
		if s.Interrupted != "" {
			notes = append(notes, "last run interrupted")
		}
		if len(s.Maintenance) > 0 {
			notes = append(notes, "maintenance")
		}
		for _, inc := range s.Incidents {
			notes = append(notes, incidentLabel(inc))
		}
		notes = append(notes, s.Problems...)
		if owners {
			// Each cell through say, never a tab inside one: say escapes
			// what a cell holds, a tab included.
			say(tw, "%s\t%s\t", s.Contract, s.Owner)
		} else {
			say(tw, "%s\t", s.Contract)
		}
		say(tw, "%s %s\t%d/%d\t%s\t%d\t%s\n", engine.Mark(s.Severity), s.Severity, s.AgentsOK, s.AgentTotal, last, len(s.Incidents), strings.Join(notes, "; "))
	}
	tw.Flush()
	return exitOK
}

func incidentLabel(inc *guard.Incident) string {
	who := inc.Agent
	if who == engine.AllAgents || who == "" {
		who = "contract"
	}
	return who + ": " + inc.Condition
}

func (m *Main) cmdHistory(ctx context.Context, args []string) int {
	fs := m.flags("history")
	asJSON := fs.Bool("json", false, "print as JSON lines")
	n := fs.Int("n", 20, "how many runs")
	var sf stateFlags
	sf.register(fs, m.Getenv)
	var ef etcdFlags
	ef.register(fs, m.Getenv, "read the history a group of instances (serve --etcd) keeps in etcd at `URL[,URL…]`")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) != 1 {
		m.errorf("usage: contractd history %s", commands["history"].args)
		return exitUsage
	}
	names[0] = stateName(names[0])
	src, err := m.openState(ctx, sf, ef)
	if err != nil {
		m.fail("history", err)
		return exitFailed
	}
	defer src.close()
	m.settle(ctx, "history", src, names[0])
	hist, err := src.st.History(names[0], *n)
	if err != nil {
		m.errorf("history: %s: %v", names[0], err)
		if !errors.Is(err, store.ErrCorrupt) {
			return exitFailed
		}
		// Bad lines were skipped and named; the good runs still show.
	}
	if len(hist) == 0 && err == nil {
		if _, code := m.checkName("history", sf, src, names[0]); code != exitOK {
			return code
		}
	}
	if *asJSON {
		return m.writeJSON(hist)
	}
	if len(hist) == 0 {
		say(m.Stdout, "%s has no recorded run in %s\n", names[0], src.where)
		return exitOK
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	for _, h := range hist {
		say(tw, "%s\t%s\t%d ms\t%s\n", h.StartedAt.Format(time.RFC3339), h.OverallSeverity, h.DurationMS, summarizeAgents(h.Agents))
		if h.Interrupted != "" {
			say(tw, "\t  interrupted: %s\n", h.Interrupted)
		}
		if h.RequestedBy != "" {
			say(tw, "\t  requested by %s\n", h.RequestedBy)
		}
		for _, ev := range h.Operator {
			say(tw, "\t  before it: %s\n", ev.String())
		}
		for _, a := range h.Actions {
			if a.Status == engine.ActionLogged || a.Status == engine.ActionMonitor {
				continue
			}
			say(tw, "\t  %s %s: %s (%s)\n", a.Agent, a.Status, a.Action, a.Condition)
		}
		for _, a := range h.Alerts {
			retry := ""
			if a.Retry {
				retry = " (retry)"
			}
			say(tw, "\t  alert %s%s: %s — %s\n", a.Kind, retry, a.Text, a.Summary())
		}
	}
	tw.Flush()
	return exitOK
}

func (m *Main) cmdWhy(ctx context.Context, args []string) int {
	fs := m.flags("why")
	var sf stateFlags
	sf.register(fs, m.Getenv)
	var ef etcdFlags
	ef.register(fs, m.Getenv, "read the last run a group of instances (serve --etcd) recorded in etcd at `URL[,URL…]`")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) != 1 {
		m.errorf("usage: contractd why %s", commands["why"].args)
		return exitUsage
	}
	name := stateName(names[0])
	src, err := m.openState(ctx, sf, ef)
	if err != nil {
		m.fail("why", err)
		return exitFailed
	}
	defer src.close()
	m.settle(ctx, "why", src, name)
	hist, err := src.st.History(name, 1)
	switch {
	case err != nil && errors.Is(err, store.ErrCorrupt) && len(hist) > 0:
		m.errorf("why: %s: %v", name, err)
	case err != nil:
		m.errorf("why: %s: %v", name, err)
		return exitFailed
	case len(hist) == 0:
		if _, code := m.checkName("why", sf, src, name); code != exitOK {
			return code
		}
		m.errorf("why: %s has not run yet: no run history in %s", name, src.where)
		return exitFailed
	}
	var since []store.OperatorEvent
	if l, err := engine.ReadLedger(src.st, name); err == nil {
		since = l.Operator
	}
	engine.WriteWhy(m.Stdout, name, hist[len(hist)-1], since)
	return exitOK
}

// changeState opens the state a state-changing command changes (the state
// dir, or the group's etcd) and checks the contract name and the agent
// (empty: the whole contract) it names. It returns a usage or failure exit
// code when it cannot; the caller must close what it returns.
func (m *Main) changeState(ctx context.Context, cmd string, sf stateFlags, ef etcdFlags, name, agent string) (*stateSource, int) {
	src, err := m.openState(ctx, sf, ef)
	if err != nil {
		m.fail(cmd, err)
		return nil, exitFailed
	}
	k, code := m.checkName(cmd, sf, src, name)
	if code != exitOK {
		src.close()
		return nil, code
	}
	if err := k.checkAgent(name, agent); err != nil {
		m.errorf("%s: %v", cmd, err)
		src.close()
		return nil, exitUsage
	}
	return src, exitOK
}

func (m *Main) cmdReset(ctx context.Context, args []string) int {
	fs := m.flags("reset")
	var sf stateFlags
	sf.register(fs, m.Getenv)
	unit := fs.String("unit", "", "reset only this unit (`AGENT`)")
	var ef etcdFlags
	ef.register(fs, m.Getenv, "reset the ledger a group of instances (serve --etcd) keeps in etcd at `URL[,URL…]`")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) != 1 {
		m.errorf("usage: contractd reset %s", commands["reset"].args)
		return exitUsage
	}
	name := stateName(names[0])
	src, code := m.changeState(ctx, "reset", sf, ef, name, *unit)
	if code != exitOK {
		return code
	}
	defer src.close()
	if err := engine.ReleaseLedger(ctx, src.st, name, *unit, time.Now()); err != nil {
		m.fail("reset", err)
		return exitFailed
	}
	if err := serve.ReleaseHoldDown(ctx, sf.stateDir, name); err != nil {
		m.fail("reset", err)
		return exitFailed
	}
	fmt.Fprintf(m.Stdout, "%s: released (hold-down, escalations and pending repairs cleared)\n", name)
	return exitOK
}

func (m *Main) cmdMaintenance(ctx context.Context, args []string) int {
	fs := m.flags("maintenance")
	var sf stateFlags
	sf.register(fs, m.Getenv)
	agent := fs.String("agent", "", "only this `AGENT` (default: the whole contract)")
	var dur time.Duration
	durationVar(fs, &dur, "for", 0, "start a window of `DURATION` from now (e.g. 2h, 90m, 1d); replaces the agent's current one")
	reason := fs.String("reason", "", "why, for the report and the log")
	end := fs.Bool("end", false, "end the window now")
	var ef etcdFlags
	ef.register(fs, m.Getenv, "change the ledger a group of instances (serve --etcd) keeps in etcd at `URL[,URL…]`")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) != 1 || dur < 0 || (dur > 0 && *end) {
		m.errorf("usage: contractd maintenance %s", commands["maintenance"].args)
		return exitUsage
	}
	name := stateName(names[0])
	src, code := m.changeState(ctx, "maintenance", sf, ef, name, *agent)
	if code != exitOK {
		return code
	}
	defer src.close()
	st := src.st
	now := time.Now().UTC()
	var windows map[string]*guard.Window
	switch {
	case dur > 0 || *end:
		windows, err = engine.SetMaintenance(ctx, st, name, *agent, dur, *reason, now)
	default:
		windows, err = engine.Maintenance(st, name, now)
	}
	if err != nil {
		m.fail("maintenance", err)
		return exitFailed
	}
	if len(windows) == 0 {
		fmt.Fprintf(m.Stdout, "%s: no maintenance window; repairs and alerts run as the contract says\n", name)
		return exitOK
	}
	keys := make([]string, 0, len(windows))
	for k := range windows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := windows[k]
		who := "whole contract"
		if k != engine.AllAgents {
			who = "agent " + k
		}
		say(m.Stdout, "%s: %s: %s (%s left): repairs blocked, new alerts held\n", name, who, w.String(), w.Until.Sub(now).Round(time.Second))
	}
	return exitOK
}
