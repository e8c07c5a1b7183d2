package guard

import (
	"fmt"
	"github.com/contractd/contractd/contracts"
	"strings"
	"time"
)

// What an incident observation asks the engine to send.
const (
	SendNothing  = ""
	SendOpen     = "open"
	SendReminder = "reminder"
	SendResolved = "resolved"
)

// Incident sources: what raised an incident, which decides when it may
// resolve (see the engine's alert phase).
const (
	SourceRelay    = "relay"    // a unit relayed by the escalation table (or by default)
	SourceRow      = "row"      // an alert or escalate row of an action table
	SourceGuard    = "guard"    // a guard: crash loop, repairs exhausted, circuit open
	SourceGate     = "gate"     // a gate stage that is down
	SourceContract = "contract" // a contract-wide row of the escalation table
	SourceUnknown  = "unknown"  // a unit judged unknown for unknown_after runs
	// SourceTarget is a target of the contract that cannot be reached,
	// when nothing else watches it: the root cause of the units it
	// suppresses.
	SourceTarget      = "target"
	SourceFlapping    = "flapping"    // a unit that flaps
	SourceMaintenance = "maintenance" // an announced maintenance window, open
)

// AllUnits is the agent part of an incident that belongs to the whole
// contract (an escalation-table alert, the circuit breaker).
const AllUnits = "*"

// Incident is one alert incident, keyed by (contract, agent, condition).
type Incident struct {
	// Agent and Condition are the key's parts, kept so nothing has to
	// split a key to know whose incident it is ("*" is the whole contract).
	Agent     string `json:"agent"`
	Condition string `json:"condition"`
	// Source says what raised it (Source*); Severity what it was raised at.
	Source     string    `json:"source,omitempty"`
	Severity   string    `json:"severity,omitempty"`
	OpenedAt   time.Time `json:"opened_at"`
	LastSent   time.Time `json:"last_sent"`
	Reminders  int       `json:"reminders,omitempty"`
	Resolved   bool      `json:"resolved,omitempty"`
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	// Text is the text of the last message about the incident, which a
	// destination that keeps alerts as state is sent again while it is
	// open (the alertmanager route's resend).
	Text string `json:"text,omitempty"`
	// Unsent says the contract's alert_on keeps the incident's messages
	// from the routes: it is recorded, and never sent again either.
	Unsent bool `json:"unsent,omitempty"`
}

// Action is what Observe decided for one incident key.
type Action struct {
	Send     string   // SendNothing, SendOpen, SendReminder or SendResolved
	Key      string   // the incident key
	Incident Incident // the incident after this observation
	Reason   string
}

// IncidentKey joins (contract, agent, condition) into the ledger's key.
// Condition may be empty for a unit-level incident.
func IncidentKey(contract, agent, condition string) string {
	return strings.Join([]string{contract, agent, condition}, "/")
}

// Incidents is the alert policy over the ledger's incidents: one open
// incident per key; alert once when it opens; a reminder after Repeat
// (default 4h) that doubles each time up to MaxRepeat (default 24h);
// exactly one resolved message when it closes. Because the state lives in
// the ledger, nothing is sent twice across runs or process restarts.
//
// State is the ledger's map and must not be nil; Observe adds and updates
// its entries.
type Incidents struct {
	Repeat    time.Duration
	MaxRepeat time.Duration
	State     map[string]*Incident
	Clock     Clock
}

// interval returns the wait before reminder number n+1.
func (p Incidents) interval(n int) time.Duration {
	repeat, limit := p.Repeat, p.MaxRepeat
	if repeat <= 0 {
		repeat = DefaultRepeat
	}
	if limit <= 0 {
		limit = DefaultMaxRepeat
	}
	d := repeat
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Observe records whether the condition behind key is active this run and
// returns what to send; a new incident starts as a copy of open (its
// agent, condition, source and severity). hold, when not empty, says why
// nothing is sent for an active condition (the unit's gate is down, it is
// inside a maintenance window, another incident of the unit speaks for it):
// no incident opens and an open one sends no reminder, but it still
// resolves when the condition clears; the next reminder comes a whole
// interval after the hold ends. The engine must not call
// Observe for a unit whose settled severity is unknown: unknown neither
// opens nor resolves.
func (p Incidents) Observe(key string, active bool, hold string, open Incident) Action {
	now := p.Clock.Now()
	inc := p.State[key]
	isOpen := inc != nil && !inc.Resolved
	switch {
	case active && !isOpen:
		if hold != "" {
			return Action{Key: key, Reason: "not opened: " + hold}
		}
		inc = &open
		inc.OpenedAt, inc.LastSent = now, now
		p.State[key] = inc
		return Action{Send: SendOpen, Key: key, Incident: *inc, Reason: "opened"}
	case active && isOpen:
		if hold != "" {
			// The reminders wait a whole interval after the hold too:
			// an incident open all through a maintenance window says
			// nothing new when it ends.
			inc.LastSent = now
			return Action{Key: key, Incident: *inc, Reason: fmt.Sprintf("open since %s; no reminder: %s", stamp(inc.OpenedAt), hold)}
		}
		wait := p.interval(inc.Reminders)
		if now.Sub(inc.LastSent) < wait {
			return Action{Key: key, Incident: *inc, Reason: fmt.Sprintf("open since %s; next reminder at %s", stamp(inc.OpenedAt), stamp(inc.LastSent.Add(wait)))}
		}
		inc.Reminders++
		inc.LastSent = now
		return Action{Send: SendReminder, Key: key, Incident: *inc, Reason: fmt.Sprintf("still open since %s (reminder %d)", stamp(inc.OpenedAt), inc.Reminders)}
	case !active && isOpen:
		inc.Resolved, inc.ResolvedAt, inc.LastSent = true, now, now
		return Action{Send: SendResolved, Key: key, Incident: *inc, Reason: fmt.Sprintf("resolved after %s", contracts.FormatDuration(now.Sub(inc.OpenedAt).Round(time.Second)))}
	}
	return Action{Key: key, Reason: "not active"}
}

// Open returns the keys of open incidents, so the engine can resolve those
// whose condition it no longer sees at all (a row removed, a unit gone).
func (p Incidents) Open() []string {
	var keys []string
	for k, inc := range p.State {
		if inc != nil && !inc.Resolved {
			keys = append(keys, k)
		}
	}
	return keys
}

// Prune deletes incidents resolved more than age ago (and null entries,
// which say nothing) and returns how many.
func (p Incidents) Prune(age time.Duration) int {
	cut := p.Clock.Now().Add(-age)
	n := 0
	for k, inc := range p.State {
		if inc == nil || inc.Resolved && inc.ResolvedAt.Before(cut) {
			delete(p.State, k)
			n++
		}
	}
	return n
}
