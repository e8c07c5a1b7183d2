package engine

import (
	"errors"
	"sort"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
)

// Agents returns the agents contract c's stages name, for_each items
// expanded, sorted; gates and other agentless stages name none.
func Agents(c *contracts.Contract) []string {
	set := map[string]bool{}
	for _, sr := range expandStages(c) {
		if sr.agent != "" {
			set[sr.agent] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Summary is one contract at a glance (`contractd status`, the status
// page): its last run's severity, how many agents are healthy, when it
// last ran, and its open incidents and maintenance windows.
type Summary struct {
	Contract string `json:"contract"`
	// Severity is the last run's overall severity ("unknown" before any).
	Severity   contracts.Severity `json:"severity"`
	AgentsOK   int                `json:"agents_ok"`
	AgentTotal int                `json:"agents_total"`
	// Agents is each agent's severity after the last run.
	Agents map[string]string `json:"agents"`
	// Suppressed says, for each agent the last run suppressed, which
	// dependency held it and its root cause.
	Suppressed map[string]*store.Suppression `json:"suppressed,omitempty"`
	// Flapping holds each agent flapping in the last run, with the share
	// of its last runs whose state changed.
	Flapping  map[string]float64 `json:"flapping,omitempty"`
	LastRun   time.Time          `json:"last_run,omitzero"`
	AgeSec    float64            `json:"age_seconds,omitempty"`
	LastRunID string             `json:"last_run_id,omitempty"`
	// Interrupted says why the last run stopped before its end, when it
	// did (see HistoryRecord.Interrupted).
	Interrupted string `json:"interrupted,omitempty"`
	// Incidents are the open ones, oldest first.
	Incidents   []*guard.Incident        `json:"open_incidents"`
	Maintenance map[string]*guard.Window `json:"maintenance,omitempty"`
	// Problems says what could not be read (a corrupt file moved aside).
	Problems []string `json:"problems,omitempty"`
	// Owner is the instance that runs the contract (`status --etcd`).
	Owner string `json:"owner,omitempty"`
}

// Summarize reads contract name's summary from st at now. It fails when
// the name is not one state can have, and with an error wrapping
// store.ErrUnavailable when a shared store cannot be reached; what cannot
// be read otherwise (a corrupt file moved aside) is named in Problems.
func Summarize(s store.Backend, name string, now time.Time) (*Summary, error) {
	sum := &Summary{Contract: name, Agents: map[string]string{}, Incidents: []*guard.Incident{}}
	hist, err := s.History(name, 1)
	if errors.Is(err, store.ErrName) || errors.Is(err, store.ErrUnavailable) {
		return nil, err
	}
	if err != nil {
		sum.Problems = append(sum.Problems, "history: "+err.Error())
	}
	if len(hist) > 0 {
		h := hist[len(hist)-1]
		sum.LastRun, sum.LastRunID, sum.Interrupted = h.StartedAt, h.RunID, h.Interrupted
		sum.Suppressed, sum.Flapping = h.Suppressed, h.Flapping
		sum.AgeSec = now.Sub(h.StartedAt).Seconds()
		_ = sum.Severity.UnmarshalText([]byte(h.OverallSeverity))
		for a, sev := range h.Agents {
			sum.Agents[a] = sev
			sum.AgentTotal++
			if sev == contracts.SeverityHealthy.String() {
				sum.AgentsOK++
			}
		}
	}
	l, err := ReadLedger(s, name)
	if errors.Is(err, store.ErrUnavailable) {
		return nil, err
	}
	if err != nil {
		sum.Problems = append(sum.Problems, "ledger: "+err.Error())
	}
	if l != nil {
		for _, inc := range l.Incidents {
			if inc != nil && !inc.Resolved {
				sum.Incidents = append(sum.Incidents, inc)
			}
		}
		sort.Slice(sum.Incidents, func(i, j int) bool {
			a, b := sum.Incidents[i], sum.Incidents[j]
			if !a.OpenedAt.Equal(b.OpenedAt) {
				return a.OpenedAt.Before(b.OpenedAt)
			}
			return a.Agent+a.Condition < b.Agent+b.Condition
		})
		l.PruneWindows(now)
		if len(l.Maintenance) > 0 {
			sum.Maintenance = l.Maintenance
		}
	}
	return sum, nil
}

// AgentHistory is one agent's severities over recent runs, oldest first:
// the status page's history strip.
type AgentHistory struct {
	Agent string      `json:"agent"`
	Runs  []AgentMark `json:"runs"`
}

// AgentMark is one agent in one run.
type AgentMark struct {
	RunID    string    `json:"run_id"`
	At       time.Time `json:"at"`
	Severity string    `json:"severity"` // "" when the agent was not in that run
	Repaired bool      `json:"repaired,omitempty"`
}

// HistoryByAgent turns run records (oldest first) into one strip per
// agent, sorted by agent.
func HistoryByAgent(hist []HistoryRecord) []AgentHistory {
	set := map[string]bool{}
	for _, h := range hist {
		for a := range h.Agents {
			set[a] = true
		}
	}
	names := make([]string, 0, len(set))
	for a := range set {
		names = append(names, a)
	}
	sort.Strings(names)
	out := make([]AgentHistory, 0, len(names))
	for _, a := range names {
		ah := AgentHistory{Agent: a, Runs: make([]AgentMark, 0, len(hist))}
		for _, h := range hist {
			mark := AgentMark{RunID: h.RunID, At: h.StartedAt, Severity: h.Agents[a]}
			for _, act := range h.Actions {
				if act.Agent == a && act.Status == ActionRan {
					mark.Repaired = true
				}
			}
			ah.Runs = append(ah.Runs, mark)
		}
		out = append(out, ah)
	}
	return out
}

// AddDeclaredWindows adds to windows (by agent, "*" for the whole
// contract: an operator's, say) the maintenance windows contract c
// declares that are open at now, keeping of two over one agent the one
// that ends later. It returns the map, made when windows is nil and a
// declared window is open; nil when there is none at all.
func AddDeclaredWindows(windows map[string]*guard.Window, c *contracts.Contract, now time.Time) map[string]*guard.Window {
	out := windows
	for _, mw := range c.Maintenance {
		since, until, ok := mw.Active(now)
		if !ok {
			continue
		}
		w := &guard.Window{Since: since, Until: until, Reason: mw.Reason, By: guard.ByContract}
		agents := mw.Agents
		if len(agents) == 0 {
			agents = []string{AllAgents}
		}
		if out == nil {
			out = map[string]*guard.Window{}
		}
		for _, a := range agents {
			out[a] = guard.Later(out[a], w)
		}
	}
	return out
}
