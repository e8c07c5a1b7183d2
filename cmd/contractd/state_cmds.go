package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
)

func (m *Main) cmdStatus(ctx context.Context, args []string) int {
	fs := m.flags("status")
	asJSON := fs.Bool("json", false, "print as JSON")
	stateDir := fs.String("state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	names, err := parse(fs, args)
	if err != nil || len(names) != 1 {
		m.errorf("usage: contractd status [--json] [--state-dir DIR] NAME")
		return exitUsage
	}
	st, err := engine.ReadStatus(*stateDir, names[0], time.Now())
	if err != nil {
		m.errorf("status %s: %v", names[0], err)
		if errors.Is(err, engine.ErrNeverRan) {
			return exitUsage
		}
		return exitFailed
	}
	if *asJSON {
		return m.writeJSON(st)
	}
	say(m.Stdout, "%s: snapshot written %s (%s ago)\n", st.Contract, st.WrittenAt.Format(time.RFC3339), time.Duration(st.AgeSec*float64(time.Second)).Round(time.Second))
	writeTree(m.Stdout, st.Snapshot, "  ")
	return exitOK
}

func (m *Main) cmdHistory(ctx context.Context, args []string) int {
	fs := m.flags("history")
	asJSON := fs.Bool("json", false, "print as JSON lines")
	n := fs.Int("n", 20, "how many runs")
	stateDir := fs.String("state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	names, err := parse(fs, args)
	if err != nil || len(names) != 1 {
		m.errorf("usage: contractd history [-n N] [--json] [--state-dir DIR] NAME")
		return exitUsage
	}
	hist, err := engine.ReadHistory(*stateDir, names[0], *n)
	if err != nil {
		m.errorf("history %s: %v", names[0], err)
		if !errors.Is(err, store.ErrCorrupt) {
			return exitFailed
		}
		// Bad lines were skipped and named; the good runs still show.
	}
	if *asJSON {
		return m.writeJSON(hist)
	}
	for _, h := range hist {
		say(m.Stdout, "%s  %-9s %5d ms  %s\n", h.StartedAt.Format(time.RFC3339), h.OverallSeverity, h.DurationMS, summarizeAgents(h.Agents))
		for _, a := range h.Actions {
			if a.Status == "logged" || a.Status == "monitor" {
				continue
			}
			say(m.Stdout, "    %s %s: %s (%s)\n", a.Agent, a.Status, a.Action, a.Condition)
		}
		for _, a := range h.Alerts {
			retry := ""
			if a.Retry {
				retry = " (retry)"
			}
			say(m.Stdout, "    alert %s%s: %s — %s\n", a.Kind, retry, a.Text, a.Summary())
		}
	}
	return exitOK
}

func (m *Main) cmdWhy(ctx context.Context, args []string) int {
	fs := m.flags("why")
	stateDir := fs.String("state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	names, err := parse(fs, args)
	if err != nil || len(names) != 1 {
		m.errorf("usage: contractd why [--state-dir DIR] NAME")
		return exitUsage
	}
	hist, err := engine.ReadHistory(*stateDir, names[0], 1)
	if err != nil && errors.Is(err, store.ErrCorrupt) && len(hist) > 0 {
		m.errorf("why %s: %v", names[0], err)
	} else if err != nil || len(hist) == 0 {
		m.errorf("why %s: no run recorded (%v)", names[0], err)
		return exitFailed
	}
	h := hist[len(hist)-1]
	say(m.Stdout, "%s run %s at %s: %s\n", names[0], h.RunID, h.StartedAt.Format(time.RFC3339), h.OverallSeverity)
	for step, f := range h.Findings {
		for _, line := range f {
			say(m.Stdout, "  %s: %s\n", step, line)
		}
	}
	engine.WriteTrace(m.Stdout, &engine.Report{RunID: h.RunID, Actions: h.Actions})
	return exitOK
}

func (m *Main) cmdReset(ctx context.Context, args []string) int {
	fs := m.flags("reset")
	stateDir := fs.String("state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	unit := fs.String("unit", "", "reset only this unit (agent)")
	names, err := parse(fs, args)
	if err != nil || len(names) != 1 {
		m.errorf("usage: contractd reset [--unit AGENT] [--state-dir DIR] NAME")
		return exitUsage
	}
	if err := engine.Reset(ctx, *stateDir, names[0], *unit); err != nil {
		m.errorf("reset %s: %v", names[0], err)
		return exitFailed
	}
	if err := serve.Reset(*stateDir, names[0]); err != nil {
		m.errorf("reset %s: %v", names[0], err)
		return exitFailed
	}
	fmt.Fprintf(m.Stdout, "%s: released (hold-down, escalations and pending repairs cleared)\n", names[0])
	return exitOK
}

func (m *Main) cmdMaintenance(ctx context.Context, args []string) int {
	fs := m.flags("maintenance")
	stateDir := fs.String("state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	agent := fs.String("agent", "", "only this `AGENT` (default: the whole contract)")
	dur := fs.Duration("for", 0, "start a window of `DURATION` from now (e.g. 2h); replaces the agent's current one")
	reason := fs.String("reason", "", "why, for the report and the log")
	end := fs.Bool("end", false, "end the window now")
	names, err := parse(fs, args)
	if err != nil || len(names) != 1 || *dur < 0 || (*dur > 0 && *end) {
		m.errorf("usage: contractd maintenance [--agent AGENT] [--for DURATION [--reason TEXT] | --end] [--state-dir DIR] NAME")
		return exitUsage
	}
	name := names[0]
	now := time.Now().UTC()
	var windows map[string]*guard.Window
	switch {
	case *dur > 0 || *end:
		windows, err = engine.SetMaintenance(ctx, *stateDir, name, *agent, *dur, *reason, now)
	default:
		windows, err = engine.Maintenance(*stateDir, name, now)
	}
	if err != nil {
		m.errorf("maintenance %s: %v", name, err)
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
		if k != store.AllAgents {
			who = "agent " + k
		}
		say(m.Stdout, "%s: %s: %s (%s left): repairs blocked, new alerts held\n", name, who, w.String(), w.Until.Sub(now).Round(time.Second))
	}
	return exitOK
}
