package guard

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Validate checks a unit read back from a state file: no null condition,
// no negative count, repair times oldest first, a known state and verify
// outcome. It returns the first problem found, naming the field, or nil.
// The rules trust this shape; a state store calls Validate before handing a
// unit to them.
func (u *Unit) Validate() error {
	if u == nil {
		return errors.New("is null")
	}
	switch u.State {
	case "", StateOK, StateFailing:
	default:
		return fmt.Errorf("state: unknown state %q", u.State)
	}
	if err := nonNegative(count{"consecutive_failing", u.Failing}, count{"consecutive_healthy", u.Healthy}, count{"consecutive_unreachable", u.Unreachable}); err != nil {
		return err
	}
	if !sort.SliceIsSorted(u.Repairs, func(i, j int) bool { return u.Repairs[i].Before(u.Repairs[j]) }) {
		return errors.New("repairs: times are not oldest first")
	}
	if u.Restarts != nil {
		for i, s := range u.Restarts.Increments {
			if s.N < 0 {
				return fmt.Errorf("restart_counter.increments[%d]: negative increment %d", i, s.N)
			}
		}
	}
	if u.Slow != nil {
		if err := nonNegative(count{"slow_retry.consecutive_failed", u.Slow.Failed}); err != nil {
			return err
		}
	}
	if u.Flap != nil && (u.Flap.Runs < 0 || u.Flap.Runs > 64) {
		return fmt.Errorf("flap.runs: %d is not 0 to 64", u.Flap.Runs)
	}
	for _, key := range u.sortedConditions() {
		if err := u.Conditions[key].Validate(); err != nil {
			return fmt.Errorf("conditions[%q]: %w", key, err)
		}
	}
	return nil
}

// Validate checks a condition read back from a state file. It returns the
// first problem found, or nil.
func (c *Condition) Validate() error {
	if c == nil {
		return errors.New("is null")
	}
	if err := nonNegative(count{"consecutive_held", c.Held}, count{"consecutive_clear", c.Clear}, count{"attempts", c.Attempts}, count{"failed_repairs", c.FailedRepairs}); err != nil {
		return err
	}
	switch c.LastVerify {
	case "", Remediated, RemediationFailed, Undecided:
	default:
		return fmt.Errorf("last_verify: unknown outcome %q", c.LastVerify)
	}
	return nil
}

// Validate checks an incident read back from a state file. It returns the
// first problem found, or nil.
func (i *Incident) Validate() error {
	switch {
	case i == nil:
		return errors.New("is null")
	case i.Reminders < 0:
		return fmt.Errorf("reminders: negative count %d", i.Reminders)
	case i.OpenedAt.IsZero():
		return errors.New("opened_at: missing")
	}
	return nil
}

// Validate checks a maintenance window read back from a state file. It
// returns the first problem found, or nil.
func (w *Window) Validate() error {
	switch {
	case w == nil:
		return errors.New("is null")
	case w.Until.Before(w.Since):
		return fmt.Errorf("until %s is before since %s", w.Until.Format(time.RFC3339), w.Since.Format(time.RFC3339))
	}
	return nil
}

// count is one named counter of a state file.
type count struct {
	name string
	n    int
}

// nonNegative reports the first negative counter.
func nonNegative(cs ...count) error {
	for _, c := range cs {
		if c.n < 0 {
			return fmt.Errorf("%s: negative count %d", c.name, c.n)
		}
	}
	return nil
}
