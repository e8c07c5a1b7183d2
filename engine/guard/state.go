package guard

import (
	"sort"
	"time"

	"github.com/contractd/contractd/contracts"
)

// Unit states after hysteresis.
const (
	StateOK      = "ok"
	StateFailing = "failing"
)

// Verify outcomes recorded by RecordVerify.
const (
	Remediated        = "remediated"
	RemediationFailed = "remediation failed"
	// Undecided: the repair's condition cleared but the unit was not yet
	// healthy (a service still starting); a later run decides.
	Undecided = "undecided"
)

// Unit is the persisted guard state of one unit: an agent, or one item of a
// for_each stage. The engine chooses the key (the ledger maps key → *Unit).
// Repairs, debounce, budget, crash-loop and grace are counted per unit,
// because a restart restarts the unit whichever condition asked for it;
// hysteresis for repairs, pending repairs and escalation are per condition.
//
// Unit is plain data so that it serialises to JSON; the rules that read and
// change it live on Chain and the rule types.
type Unit struct {
	// State is StateOK or StateFailing, the unit's status after hysteresis.
	// The empty string (a unit never seen) reads as StateOK.
	State string `json:"state,omitempty"`
	// Severity is the severity the unit settled at when it last became or
	// stayed failing; it is what a failing unit reports while recovering.
	Severity contracts.Severity `json:"severity"`
	// Consecutive counts of runs, reset by the others as Observe documents.
	Failing     int `json:"consecutive_failing,omitempty"`
	Healthy     int `json:"consecutive_healthy,omitempty"`
	Unreachable int `json:"consecutive_unreachable,omitempty"`
	// Unknown counts consecutive runs that judged the unit unknown (a
	// row none of whose cells held, a value missing); any other verdict
	// resets it.
	Unknown int `json:"consecutive_unknown,omitempty"`
	// Repairs are the times repairs ran on this unit, oldest first.
	Repairs []time.Time `json:"repairs,omitempty"`
	// GraceUntil is the end of the post-repair grace; zero when none.
	GraceUntil time.Time `json:"grace_until,omitzero"`
	// Restarts is an externally read restart counter (pm2 `restarts`,
	// systemd `NRestarts`), when the contract maps one.
	Restarts *Counter `json:"restart_counter,omitempty"`
	// Conditions holds per-condition state by condition key.
	Conditions map[string]*Condition `json:"conditions,omitempty"`
	// Slow is the slow-retry guard's count of failed repairs in a row;
	// nil while none has failed since the unit was last healthy.
	Slow *SlowState `json:"slow_retry,omitempty"`
	// Judged is the unit's verdict as its last run left it, which the
	// units that depend on it read (Dependencies).
	Judged *Judgement `json:"judged,omitempty"`
	// FailingSince is when the unit was first seen not healthy, since it
	// was last healthy; zero while it is healthy. A unit that fails after
	// its dependency was last judged waits for the dependency from then.
	FailingSince time.Time `json:"failing_since,omitzero"`
	// Flap is flap detection's record of the unit's last runs; nil
	// before its first run, or with flap detection off.
	Flap *FlapState `json:"flap,omitempty"`
}

// Condition is the persisted state of one action-table condition of a unit,
// from the run it first held until it clears.
type Condition struct {
	// Held counts consecutive runs (with a known result, outside grace) in
	// which the condition held.
	Held int `json:"consecutive_held"`
	// Clear counts consecutive known runs in which it did not hold.
	Clear int `json:"consecutive_clear,omitempty"`
	// Since is when the condition was first seen holding.
	Since time.Time `json:"since"`
	// PendingSince is when a repair for it was first held back as pending;
	// zero when nothing is pending.
	PendingSince time.Time `json:"pending_since,omitzero"`
	// Attempts counts repairs run for this condition since it first held;
	// the engine picks tiered action rows by it.
	Attempts int `json:"attempts,omitempty"`
	// FailedRepairs counts repairs whose verification found the condition
	// still present, since the last one that remediated.
	FailedRepairs int `json:"failed_repairs,omitempty"`
	// Escalated is set once repairs stopped in favour of escalation; it
	// stays until the condition clears or an operator resets the unit.
	Escalated bool `json:"escalated,omitempty"`
	// LastRepair is when a repair for this condition last ran.
	LastRepair time.Time `json:"last_repair,omitzero"`
	// Said is the last guard answer logged for the condition while it was
	// not repaired ("pending/slow-retry", "report-only/report-only"): the
	// log says a held repair when the answer changes, not every run.
	Said string `json:"said,omitempty"`
	// LastVerify is Remediated, RemediationFailed or Undecided after a
	// verification.
	LastVerify string `json:"last_verify,omitempty"`
}

// Counter tracks an external, monotonically increasing restart counter
// across runs. Increments are the per-run deltas, so a window can be summed
// without keeping every raw reading.
type Counter struct {
	Last       int64     `json:"last"`
	LastAt     time.Time `json:"last_at"`
	Increments []Sample  `json:"increments,omitempty"`
}

// Sample is a counter increment observed at a time.
type Sample struct {
	At time.Time `json:"at"`
	N  int64     `json:"n"`
}

// condition returns the state of key, or nil when the condition is not
// tracked (it has not held since it last cleared).
func (u *Unit) condition(key string) *Condition {
	if u == nil || u.Conditions == nil {
		return nil
	}
	return u.Conditions[key]
}

// ensure returns the state of key, creating it when missing.
func (u *Unit) ensure(key string, now time.Time) *Condition {
	if u.Conditions == nil {
		u.Conditions = map[string]*Condition{}
	}
	c := u.Conditions[key]
	if c == nil {
		c = &Condition{Since: now}
		u.Conditions[key] = c
	}
	return c
}

// Attempts returns how many repairs ran for the condition since it first
// held: 0 before the first. The engine uses it to pick tiered rows (see
// PickTier).
func (u *Unit) Attempts(cond string) int {
	if c := u.condition(cond); c != nil {
		return c.Attempts
	}
	return 0
}

// failing reports whether the unit's settled state is failing.
func (u *Unit) failing() bool { return u.State == StateFailing }

// repairsSince counts repairs strictly after t and returns the oldest of them.
func (u *Unit) repairsSince(t time.Time) (int, time.Time) {
	n := 0
	var oldest time.Time
	for _, r := range u.Repairs {
		if r.After(t) {
			if n == 0 {
				oldest = r
			}
			n++
		}
	}
	return n, oldest
}

// lastRepair returns the most recent repair time, or zero.
func (u *Unit) lastRepair() time.Time {
	if len(u.Repairs) == 0 {
		return time.Time{}
	}
	return u.Repairs[len(u.Repairs)-1]
}

// sortedConditions returns the tracked condition keys in a stable order.
func (u *Unit) sortedConditions() []string {
	keys := make([]string, 0, len(u.Conditions))
	for k := range u.Conditions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PickTier returns the index into tiers (the Tier numbers of the action rows
// that share one condition, in any order) of the row to run after attempts
// earlier repairs. Tiers order the rows: the first attempt runs the lowest
// tier, the next attempt the next one, and the highest tier repeats; gaps in
// the numbering do not matter (tiers 1 and 3 are a first and a second row).
// Rows with the same tier keep their order. It returns -1 when tiers is empty.
func PickTier(tiers []int, attempts int) int {
	if len(tiers) == 0 {
		return -1
	}
	order := make([]int, len(tiers))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tiers[order[a]] < tiers[order[b]] })
	return order[min(max(attempts, 0), len(order)-1)]
}
