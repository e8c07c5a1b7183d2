package guard

import (
	"fmt"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
)

// Verdict statuses.
const (
	StatusRun        = "run"         // run the repair now
	StatusPending    = "pending"     // held back; runs later by itself if the condition persists
	StatusBlocked    = "blocked"     // not run: logged (over budget, unknown severity)
	StatusReportOnly = "report-only" // report-only agent: recorded, never run
	StatusEscalate   = "escalate"    // repairs exhausted: page a person instead
	StatusAlert      = "alert"       // crash loop or circuit open: alert instead of repair
	StatusDryRun     = "dry-run"     // --dry-run: every guard allowed it, nothing runs
)

// The names of the two steps that close every chain, after the guards of
// the table: each guard's own name is beside its type (GuardDebounce in
// debounce.go, …).
const (
	GuardReportOnly = "report-only"
	GuardDryRun     = "dry-run"
)

// Reminder intervals of an open incident: the first after DefaultRepeat
// (a contract's guards.repeat), doubling up to DefaultMaxRepeat.
const (
	DefaultRepeat    = 4 * time.Hour
	DefaultMaxRepeat = 24 * time.Hour
)

// Step is one guard's answer for one candidate repair.
type Step struct {
	Guard   string `json:"guard"`
	Allowed bool   `json:"allowed"`
	Status  string `json:"status"` // StatusRun when allowed, else what the guard imposes
	Reason  string `json:"reason"`
	// Off says the guard is not in force (its setting is 0): it allows
	// without looking at anything.
	Off bool `json:"off,omitempty"`
}

// String renders the step as "guard: allow (reason)", "guard: status
// (reason)" or, for a guard not in force, "guard: off".
func (s Step) String() string {
	if s.Off {
		return s.Guard + ": off"
	}
	if s.Allowed {
		return fmt.Sprintf("%s: allow (%s)", s.Guard, s.Reason)
	}
	return fmt.Sprintf("%s: %s (%s)", s.Guard, s.Status, s.Reason)
}

func allow(guard, reason string) Step {
	return Step{Guard: guard, Allowed: true, Status: StatusRun, Reason: reason}
}

// off is the step of a guard whose setting turns it off.
func off(guard, reason string) Step {
	return Step{Guard: guard, Allowed: true, Status: StatusRun, Reason: reason, Off: true}
}

func deny(guard, status, reason string) Step {
	return Step{Guard: guard, Status: status, Reason: reason}
}

// Verdict is the chain's decision for one candidate repair.
type Verdict struct {
	Run    bool   `json:"run"`    // true only for StatusRun
	Status string `json:"status"` // one of the Status* constants
	Guard  string `json:"guard"`  // the guard that decided ("" when all allowed and it runs)
	Reason string `json:"reason"`
	Trace  []Step `json:"trace"` // every guard's result, in chain order
}

// TraceLines renders the trace one guard per line, as reports print it:
// "debounce: pending (pending restart since …)".
func (v Verdict) TraceLines() []string {
	lines := make([]string, len(v.Trace))
	for i, s := range v.Trace {
		lines[i] = s.String()
	}
	return lines
}

// String renders the verdict and its trace on several lines.
func (v Verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Status, v.Reason)
	for _, s := range v.Trace {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	return b.String()
}

// Candidate is one repair the action table asks for.
type Candidate struct {
	Condition string             // condition key within the unit, e.g. "response_pipeline=blocked"
	Action    string             // the literal command, for messages
	Severity  contracts.Severity // the unit's settled severity (Settled.Severity)
	Guard     contracts.ActionGuard
	// ReportOnly is set for report_only_agents: the verdict is report-only
	// whatever the other guards say.
	ReportOnly bool
	// DryRun is set for --dry-run: every guard is evaluated and nothing runs.
	// The engine must not record anything in dry-run.
	DryRun bool
	// Fleet is the whole contract's state in this run, for the
	// blast-radius guard.
	Fleet Fleet
	// Maintenance is the window covering the unit, if any: an operator's
	// or one the contract declares (Recurring), whichever ends later.
	Maintenance *Window
	// Suppressed is set when a dependency of the unit fails
	// (Dependencies): its repairs wait for the dependency.
	Suppressed *Suppression
}

// Guard is one rule of the chain: its answer for one candidate repair of a
// unit allows the repair, or says what the guard imposes instead (pending,
// blocked, escalate, alert) and why. Decide reads u and the candidate and
// changes nothing: the engine records what it did afterwards, with the
// chain's Record methods.
type Guard interface {
	// Name is the guard's name in a Step and a Verdict ("debounce").
	Name() string
	// Decide returns the guard's answer for cand on u, under the
	// candidate row's own settings (cand.Guard) where it has some.
	Decide(u *Unit, cand Candidate) Step
}

// Row is one guard of the table guards: how it is built from the chain
// (the contract's guards with defaults applied, the schedule interval,
// the clock), and the settings it adds to a contract's guards: and its
// action rows' Guards cells. A built-in guard's settings are package
// contracts' own (contracts.GuardSettings); a new guard declares its own
// here, and they are registered (contracts.RegisterGuardSetting) when the
// package is initialised, so the decoder, lint, explain, the schema, the
// language server and the docs know them. The guard reads their values
// with Chain.Setting.
type Row struct {
	New      func(*Chain) Guard
	Settings []contracts.GuardSetting
}

// guards lists the chain's guards in the order Decide asks them. The first
// denial in this order decides. A new guard is a file of its own, holding
// its type, its name, its constructor and its settings, and one row here.
var guards = []Row{
	{New: newMaintenance},   // inside a maintenance window (blocked)
	{New: newDependency},    // a dependency fails: the unit is suppressed (blocked)
	{New: newKnownSeverity}, // unknown never acts (blocked)
	{New: newFlapping},      // flapping, unless the contract lets its repairs go on (blocked)
	{New: newTiers},         // escalated, or EscalateAfter failed repairs (escalate)
	{New: newCrashLoop},     // too many restarts in the window (alert)
	{New: newBlastRadius},   // too many units failing at once (alert), or the per-run repair cap reached (pending)
	{New: newGrace},         // inside the post-repair grace (pending)
	{New: newSlowRetry},     // slowed after failed repairs, and not yet due (pending)
	{New: newHysteresis},    // condition not yet held After consecutive runs (pending)
	{New: newBudget},        // N per WINDOW used up (blocked)
	{New: newDebounce},      // inside the per-agent window (pending restart since T)
}

func init() {
	for _, r := range guards {
		for _, s := range r.Settings {
			contracts.RegisterGuardSetting(s)
		}
	}
}

// Chain runs the guards of one contract for each candidate repair and
// records what happened: first every guard of the table guards, in its
// order (maintenance first, debounce last), then two steps that close every
// chain and that no row can move or outrank:
//
//   - report-only — report-only agents never run; the verdict lists what the
//     guards would have said
//   - dry-run — nothing runs; the verdict says what would have
//
// Every guard is evaluated even after one denies, so the Trace is complete;
// the first denial (or report-only, which outranks all) decides.
//
// A Chain is built whole by NewChain and not changed after.
type Chain struct {
	settings contracts.Guards // contract-wide guards with defaults applied
	// every is the contract's schedule interval, which slow_retry's factor
	// multiplies; zero means contracts.DefaultEvery.
	every time.Duration
	clock Clock
	rules []Guard // built from the table guards, in its order
}

// NewChain returns the chain of a contract's guards and schedule, as given:
// the contract's defaults (debounce 300s, grace 30s, …) are applied where
// it is loaded (package contracts), the one place they are decided, so what
// `explain` shows is what runs. A zero debounce, grace, escalate_after,
// crash loop or blast radius is off; only the counts (after,
// unreachable_after, recover_after) are at least 1, and a zero reminder
// interval means DefaultRepeat. The schedule's interval is what slow_retry's
// factor multiplies (zero: contracts.DefaultEvery). A nil clock means
// the system clock in UTC.
func NewChain(g contracts.Guards, s contracts.Schedule, clock Clock) *Chain {
	if clock == nil {
		clock = systemClock()
	}
	if g.Repeat <= 0 {
		g.Repeat = DefaultRepeat
	}
	g.After = atLeastOne(g.After)
	g.UnreachableAfter = atLeastOne(g.UnreachableAfter)
	g.RecoverAfter = atLeastOne(g.RecoverAfter)
	g.UnknownAfter = atLeastOne(g.UnknownAfter)
	return newChain(g, s, clock, guards)
}

// newChain builds the chain of the given rows; NewChain's are the table
// guards.
func newChain(g contracts.Guards, s contracts.Schedule, clock Clock, rows []Row) *Chain {
	c := &Chain{settings: g, every: s.Every, clock: clock}
	c.rules = make([]Guard, len(rows))
	for i, r := range rows {
		c.rules[i] = r.New(c)
	}
	return c
}

// Guards names the chain's guards in the order Decide asks them, then the
// two steps that close every chain.
func (c *Chain) Guards() []string {
	names := make([]string, 0, len(c.rules)+2)
	for _, r := range c.rules {
		names = append(names, r.Name())
	}
	return append(names, GuardReportOnly, GuardDryRun)
}

// Setting returns the value in force of a registered guard's setting
// (Row.Settings) for a repair under action row g: the row's own, else the
// contract's, else the setting's default; nil when none is set.
func (c *Chain) Setting(key string, g contracts.ActionGuard) any {
	if v, ok := g.Settings[key]; ok {
		return v
	}
	return c.settings.Setting(key)
}

// Hysteresis returns the unit-level hysteresis of the contract.
func (c *Chain) Hysteresis() Hysteresis {
	return Hysteresis{After: c.settings.After, UnreachableAfter: c.settings.UnreachableAfter, RecoverAfter: c.settings.RecoverAfter, Clock: c.clock}
}

// UnknownFor reports whether u has been unknown for unknown_after
// consecutive runs: then it is an incident of its own (SourceUnknown),
// which resolves once the unit is judged again.
func (c *Chain) UnknownFor(u *Unit) bool {
	return u != nil && u.Unknown >= c.settings.UnknownAfter
}

// Flapping returns the contract's flap detection and whether it is on.
func (c *Chain) Flapping() (Flapping, bool) {
	f := c.settings.Flapping
	if f == nil {
		return Flapping{Clock: c.clock}, false
	}
	return Flapping{Low: f.Low, High: f.High, Runs: f.Runs, Repair: f.Repair, Clock: c.clock}, true
}

// Incidents returns the contract's alert policy over the given incidents
// (the ledger's map, which must not be nil).
func (c *Chain) Incidents(state map[string]*Incident) Incidents {
	return Incidents{Repeat: c.settings.Repeat, MaxRepeat: DefaultMaxRepeat, State: state, Clock: c.clock}
}

// Observe folds one run's observation of u into its state (see
// Hysteresis), and decides a repair the slow-retry guard left undecided
// (see SlowRetry.Observe).
func (c *Chain) Observe(u *Unit, o Observation) Settled {
	s := c.Hysteresis().Observe(u, o)
	c.SlowRetry(contracts.ActionGuard{}).Observe(u, o, s)
	return s
}

// SlowRetry returns the slow-retry guard for a row: its own slow_retry,
// else the contract's (off when neither sets one).
func (c *Chain) SlowRetry(g contracts.ActionGuard) SlowRetry {
	s := SlowRetry{Every: c.every, Clock: c.clock}
	if sr := c.settings.SlowRetry; sr.On() {
		s.After, s.Factor = sr.After, sr.Factor
	}
	return s.forRow(g)
}

// RecordSlowRetry folds the verification of a repair of row g's condition
// into the slow-retry count (SlowRetry.Verified): remediated is the
// verification's outcome, healthy whether the unit was healthy then. It
// reports whether the unit's repairs slowed with it.
func (c *Chain) RecordSlowRetry(u *Unit, cond string, g contracts.ActionGuard, remediated, healthy bool) bool {
	s := c.SlowRetry(g)
	if s.After == 0 {
		return false // off for this row: nothing to count
	}
	return s.Verified(u, cond, remediated, healthy)
}

// Grace returns the post-repair grace for a row: its own, else the contract's.
func (c *Chain) Grace(g contracts.ActionGuard) time.Duration {
	if g.Grace > 0 {
		return g.Grace
	}
	return c.settings.Grace
}

// Decide runs every guard for one candidate repair of unit u and returns the
// verdict. It does not change u: the engine records what it did with
// RecordRepair, RecordPending or RecordEscalated. Built-in rows (log, alert,
// monitor, escalate) run nothing and need no verdict.
func (c *Chain) Decide(u *Unit, cand Candidate) Verdict {
	if u == nil {
		u = &Unit{}
	}
	trace := make([]Step, 0, len(c.rules)+2)
	for _, g := range c.rules {
		s := g.Decide(u, cand)
		s.Guard = g.Name()
		trace = append(trace, s)
	}
	var first *Step
	for i := range trace {
		if !trace[i].Allowed {
			first = &trace[i]
			break
		}
	}
	dry := allow(GuardDryRun, "live run")
	if cand.DryRun {
		dry = deny(GuardDryRun, StatusDryRun, "dry-run: nothing runs")
	}

	if cand.ReportOnly {
		var reason string
		if first == nil {
			reason = fmt.Sprintf("report-only: would run %s (guards: %s)", cand.Action, summary(trace))
		} else {
			reason = fmt.Sprintf("report-only: would not run %s, %s says %s (guards: %s)", cand.Action, first.Guard, first.Status, summary(trace))
		}
		trace = append(trace, deny(GuardReportOnly, StatusReportOnly, "report-only agent: never repaired"), dry)
		return Verdict{Status: StatusReportOnly, Guard: GuardReportOnly, Reason: reason, Trace: trace}
	}
	trace = append(trace, allow(GuardReportOnly, "agent may be repaired"), dry)

	switch {
	case first != nil:
		return Verdict{Status: first.Status, Guard: first.Guard, Reason: first.Reason, Trace: trace}
	case cand.DryRun:
		return Verdict{Status: StatusDryRun, Guard: GuardDryRun, Reason: "dry-run: would run " + cand.Action, Trace: trace}
	}
	return Verdict{Run: true, Status: StatusRun, Reason: "all guards allow: run " + cand.Action, Trace: trace}
}

// summary renders the guards' answers compactly: "debounce=pending budget=allow".
func summary(trace []Step) string {
	parts := make([]string, 0, len(trace))
	for _, s := range trace {
		if s.Allowed {
			parts = append(parts, s.Guard+"=allow")
		} else {
			parts = append(parts, s.Guard+"="+s.Status)
		}
	}
	return strings.Join(parts, " ")
}

// keep is how long repair times and counter increments are kept: the
// longest window any guard reads, and at least a day.
func (c *Chain) keep() time.Duration {
	k := 24 * time.Hour
	for _, d := range []time.Duration{c.settings.CrashLoop.Per, c.settings.Debounce} {
		k = max(k, d)
	}
	if c.settings.Budget != nil {
		k = max(k, c.settings.Budget.Window)
	}
	return k
}

// RecordRepair records that a repair for cond ran on u now: it counts
// toward debounce, budget and crash-loop, starts the post-repair grace
// (Grace for the row), clears the pending mark and counts an attempt.
func (c *Chain) RecordRepair(u *Unit, cond string, grace time.Duration) {
	now := c.clock.Now()
	u.Repairs = append(u.Repairs, now)
	cut := now.Add(-c.keep())
	i := 0
	for i < len(u.Repairs) && !u.Repairs[i].After(cut) {
		i++
	}
	u.Repairs = u.Repairs[i:]
	if grace > 0 {
		u.GraceUntil = now.Add(grace)
	}
	k := u.ensure(cond, now)
	k.PendingSince = time.Time{}
	k.Said = ""
	k.Attempts++
	k.LastRepair = now
}

// RecordPending marks the repair for cond as pending from now, unless it is
// already pending (the first time is kept, so reports say "since T").
func (c *Chain) RecordPending(u *Unit, cond string) {
	now := c.clock.Now()
	k := u.ensure(cond, now)
	if k.PendingSince.IsZero() {
		k.PendingSince = now
	}
}

// RecordVerify records the verification after a repair for cond:
// remediated resets the failed-repair count; otherwise it grows toward
// escalation. Either way the post-repair grace ends.
func (c *Chain) RecordVerify(u *Unit, cond string, remediated bool) {
	k := u.ensure(cond, c.clock.Now())
	u.GraceUntil = time.Time{}
	if remediated {
		k.LastVerify = Remediated
		k.FailedRepairs = 0
		// A verified repair starts the condition's count afresh: under
		// `after: N` the next repair waits for N failing runs again.
		k.Held, k.PendingSince = 0, time.Time{}
		return
	}
	k.LastVerify = RemediationFailed
	k.FailedRepairs++
}

// RecordUndecided records a verification that found cond gone but the
// unit not yet healthy (a pending state): neither a success nor a failure,
// so FailedRepairs stays as it was; the condition's count starts afresh,
// since it was seen not holding.
func (c *Chain) RecordUndecided(u *Unit, cond string) {
	k := u.ensure(cond, c.clock.Now())
	u.GraceUntil = time.Time{}
	k.LastVerify = Undecided
	k.Held, k.PendingSince = 0, time.Time{}
}

// SettleHealthy records that a repair was verified to leave the unit
// healthy: the unit counts healthy again at once, without waiting for
// RecoverAfter healthy runs, because the repair is why it changed.
func (c *Chain) SettleHealthy(u *Unit) {
	u.State, u.Severity = StateOK, contracts.SeverityHealthy
	u.Failing, u.Unreachable = 0, 0
	u.Healthy = max(u.Healthy, 1)
}

// RecordEscalated marks cond as escalated: repairs stop until it clears or
// ClearUnit. It reports whether the mark is new, so the engine pages once.
func (c *Chain) RecordEscalated(u *Unit, cond string) bool {
	k := u.ensure(cond, c.clock.Now())
	if k.Escalated {
		return false
	}
	k.Escalated = true
	return true
}

// RecordRestartCounter records a reading of the unit's external restart
// counter (pm2 `restarts`, systemd `NRestarts`): the engine evaluates the
// row's ActionGuard.RestartCount expression each run and passes the value. The first reading is a
// baseline; later ones add their increase as a sample; a reading lower than
// the last means the counter was reset (the process manager restarted), and
// the reading itself counts as the increase since.
func (c *Chain) RecordRestartCounter(u *Unit, value int64) {
	now := c.clock.Now()
	if u.Restarts == nil {
		u.Restarts = &Counter{Last: value, LastAt: now}
		return
	}
	delta := value - u.Restarts.Last
	if delta < 0 {
		delta = value
	}
	cut := now.Add(-c.keep())
	kept := u.Restarts.Increments[:0]
	for _, s := range u.Restarts.Increments {
		if s.At.After(cut) {
			kept = append(kept, s)
		}
	}
	if delta > 0 {
		kept = append(kept, Sample{At: now, N: delta})
	}
	u.Restarts.Increments = kept
	u.Restarts.Last, u.Restarts.LastAt = value, now
}

// ClearUnit is the operator's release of a unit: escalations, failed-repair
// counts (the slow-retry streak too), pending repairs and the grace are
// cleared. Repair times stay, so budgets and the crash-loop guard still
// hold.
func ClearUnit(u *Unit) {
	u.GraceUntil = time.Time{}
	u.Slow = nil
	for _, k := range u.Conditions {
		if k == nil {
			continue
		}
		k.Escalated = false
		k.FailedRepairs = 0
		k.Attempts = 0
		k.PendingSince = time.Time{}
	}
}
