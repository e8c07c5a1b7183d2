package contracts

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// guardSettings are the guard settings, in the order explain says them:
// the built-in ones below, then those registered (RegisterGuardSetting).
// Each is declared here once; see GuardSetting.
var guardSettings = []*GuardSetting{
	{
		Key: Key{Name: "after", Type: KeyInt, Example: "3", Min: 1, Default: fmt.Sprint(DefaultAfter),
			Doc: "consecutive failing runs before a repair fires; a repair verified (or undecided) starts the count afresh"},
		Contract: true, Row: true,
		Say: func(v any, _ time.Duration) string { return fmt.Sprintf("act after %d failing run(s)", v) },
		Set: func(g *Guards, v any) { g.After = v.(int) }, Get: func(g *Guards) any { return g.After },
		SetRow: func(a *ActionRow, v any) { a.Guard.After = v.(int) },
		GetRow: func(a *ActionRow) (any, bool) { return a.Guard.After, a.Guard.After != 0 },
	},
	{
		Key: Key{Name: "debounce", Type: KeyDuration, Example: "10m", Zero: true, Default: fmtDuration(DefaultDebounce),
			Doc: "per agent, the least time between two repairs (0s: none)"},
		Contract: true, PerRow: true,
		Say: func(v any, _ time.Duration) string { return "debounce " + fmtDuration(v.(time.Duration)) },
		Set: func(g *Guards, v any) { g.Debounce = v.(time.Duration) }, Get: func(g *Guards) any { return g.Debounce },
	},
	{
		Key: Key{Name: "grace", Type: KeyDuration, Example: "1m", Zero: true, Default: fmtDuration(DefaultGrace),
			Doc: "the wait before a repair is verified (0s: at once)"},
		Contract: true, Row: true,
		Say: func(v any, _ time.Duration) string { return "verify after " + fmtDuration(v.(time.Duration)) },
		Set: func(g *Guards, v any) { g.Grace = v.(time.Duration) }, Get: func(g *Guards) any { return g.Grace },
		SetRow: func(a *ActionRow, v any) { a.Guard.Grace = v.(time.Duration) },
		GetRow: func(a *ActionRow) (any, bool) { return a.Guard.Grace, a.Guard.Grace != 0 },
	},
	{
		Key: Key{Name: "budget", Type: KeyString, Example: `"2 per 1h"`, Pattern: reBudget.String(),
			Doc: `at most N repairs per window per unit, written "N per DURATION" ("1 per 10m"); none when absent`},
		Contract: true, Row: true,
		Parse: func(s string) (any, error) { return parseBudget(s) },
		Say: func(v any, _ time.Duration) string {
			return "budget " + cmp.Or(budgetText(v.(*Budget)), "none")
		},
		Set: func(g *Guards, v any) { g.Budget = v.(*Budget) }, Get: func(g *Guards) any { return g.Budget },
		SetRow: func(a *ActionRow, v any) { a.Guard.Budget = v.(*Budget) },
		GetRow: func(a *ActionRow) (any, bool) { return a.Guard.Budget, a.Guard.Budget != nil },
	},
	{
		Key: Key{Name: "escalate_after", Type: KeyInt, Example: "3", Min: 1,
			Doc: "failed repairs in a row (verification failed) before escalating instead of repairing; never by count when absent"},
		Contract: true, Row: true,
		Say: func(v any, _ time.Duration) string {
			if v.(int) == 0 {
				return "never escalate by count"
			}
			return fmt.Sprintf("escalate after %d failed repairs", v)
		},
		Set: func(g *Guards, v any) { g.EscalateAfter = v.(int) }, Get: func(g *Guards) any { return g.EscalateAfter },
		SetRow: func(a *ActionRow, v any) { a.Guard.EscalateAfter = v.(int) },
		GetRow: func(a *ActionRow) (any, bool) { return a.Guard.EscalateAfter, a.Guard.EscalateAfter != 0 },
	},
	{
		Key: Key{Name: "crash_loop", Type: KeyMapping, Example: "{max_restarts: 5, per: 1h, then: escalate}",
			Doc: "more than max_restarts repairs per `per` turns repairs into `then` (an alert, or an escalation); off when absent",
			Keys: []Key{
				{Name: "max_restarts", Type: KeyInt, Min: 1, Required: true, Doc: "repairs allowed per window before the unit counts as crash-looping"},
				{Name: "per", Type: KeyDuration, Required: true, Doc: "the crash-loop window"},
				{Name: "then", Type: KeyString, Enum: []string{CrashLoopAlert, CrashLoopEscalate}, Default: CrashLoopAlert, Doc: "what a crash loop does instead of repairing"},
			}},
		Contract: true, PerRow: true,
		Build: func(m map[string]any) (any, error) {
			c := CrashLoop{Then: CrashLoopAlert}
			c.MaxRestarts, _ = m["max_restarts"].(int)
			c.Per, _ = m["per"].(time.Duration)
			if t, ok := m["then"].(string); ok {
				c.Then = t
			}
			if c.MaxRestarts == 0 || c.Per == 0 {
				return nil, errors.New("needs both max_restarts and per")
			}
			return c, nil
		},
		Say: func(v any, _ time.Duration) string { return "crash loop " + crashLoopText(v.(CrashLoop)) },
		Set: func(g *Guards, v any) { g.CrashLoop = v.(CrashLoop) }, Get: func(g *Guards) any { return g.CrashLoop },
	},
	{
		Key: Key{Name: "restart_count", Type: KeyString, Example: "pm2.restarts",
			Doc: "an expression reading the target's own restart count (pm2.restarts): the crash-loop guard counts its rises, not only the repairs contractd ran"},
		Row: true,
		Say: func(v any, _ time.Duration) string {
			if v == nil || v == "" {
				return ""
			}
			return fmt.Sprint("restart count from ", v)
		},
		// The body parser compiles it (tables.go): an expression.
		GetRow: func(a *ActionRow) (any, bool) { return a.Guard.RestartCount, a.Guard.RestartCount != "" },
	},
	{
		Key: Key{Name: "slow_retry", Type: KeyMapping, Example: "{after: 3, factor: 5}",
			Doc: "after `after` repairs in a row that did not help, repair only every `factor` times the schedule interval, and keep trying; off when absent (a row writes slow_retry=\"3 then 5x\", or off)",
			Keys: []Key{
				{Name: "after", Type: KeyInt, Min: 1, Required: true, Doc: "failed repairs in a row before repairs slow down"},
				{Name: "factor", Type: KeyInt, Min: 2, Required: true, Doc: "repair every factor × schedule.every once slowed"},
			}},
		Contract: true, Row: true,
		Build: func(m map[string]any) (any, error) {
			after, _ := m["after"].(int)
			factor, _ := m["factor"].(int)
			if after == 0 || factor == 0 {
				return nil, errors.New("needs both after (failed repairs in a row) and factor (times the schedule interval), e.g. {after: 3, factor: 5}")
			}
			return &SlowRetry{After: after, Factor: factor}, nil
		},
		ParseRow:   func(s string) (any, error) { return parseSlowRetry(s) },
		RowExample: `"3 then 5x"`,
		Say: func(v any, every time.Duration) string {
			return "slow retry " + cmp.Or(SlowRetryText(v.(*SlowRetry), cmp.Or(every, DefaultEvery)), "off")
		},
		Set: func(g *Guards, v any) { g.SlowRetry = v.(*SlowRetry) }, Get: func(g *Guards) any { return g.SlowRetry },
		SetRow: func(a *ActionRow, v any) { a.Guard.SlowRetry = v.(*SlowRetry) },
		GetRow: func(a *ActionRow) (any, bool) { return a.Guard.SlowRetry, a.Guard.SlowRetry != nil },
	},
	{
		Key: Key{Name: "timeout", Type: KeyDuration, Example: "2m", Default: fmtDuration(DefaultStepTimeout),
			Doc: "how long the row's command may run before it is killed; a built-in action runs none"},
		Row: true,
		// The body parser reads it (tables.go): it bounds the command,
		// and explain says it on the row's command line.
		Say:    func(any, time.Duration) string { return "" },
		GetRow: func(a *ActionRow) (any, bool) { return a.Timeout, a.Timeout != 0 },
	},
	{
		Key: Key{Name: "unreachable_after", Type: KeyInt, Example: "2", Min: 1, Default: fmt.Sprint(DefaultUnreachableAfter),
			Doc: "consecutive unreachable runs before unreachable counts as critical"},
		Contract: true,
		Say:      func(v any, _ time.Duration) string { return fmt.Sprintf("unreachable counts after %d", v) },
		Set:      func(g *Guards, v any) { g.UnreachableAfter = v.(int) }, Get: func(g *Guards) any { return g.UnreachableAfter },
	},
	{
		Key: Key{Name: "unknown_after", Type: KeyInt, Example: "5", Min: 1, Default: fmt.Sprint(DefaultUnknownAfter),
			Doc: "consecutive runs a unit may be judged unknown before that is an incident of its own"},
		Contract: true,
		Say:      func(v any, _ time.Duration) string { return fmt.Sprintf("unknown alerts after %d", max(v.(int), 1)) },
		Set:      func(g *Guards, v any) { g.UnknownAfter = v.(int) }, Get: func(g *Guards) any { return g.UnknownAfter },
	},
	{
		Key: Key{Name: "recover_after", Type: KeyInt, Example: "2", Min: 1, Default: fmt.Sprint(DefaultRecoverAfter),
			Doc: "consecutive healthy runs before a unit counts as healthy again"},
		Contract: true,
		Say:      func(v any, _ time.Duration) string { return fmt.Sprintf("recover after %d", v) },
		Set:      func(g *Guards, v any) { g.RecoverAfter = v.(int) }, Get: func(g *Guards) any { return g.RecoverAfter },
	},
	{
		Key: Key{Name: "repeat", Type: KeyDuration, Example: "1d", Default: fmtDuration(DefaultRepeat),
			Doc: "the reminder interval of an open alert"},
		Contract: true,
		Say:      func(v any, _ time.Duration) string { return "remind every " + fmtDuration(v.(time.Duration)) },
		Set:      func(g *Guards, v any) { g.Repeat = v.(time.Duration) }, Get: func(g *Guards) any { return g.Repeat },
	},
	{
		Key: Key{Name: "blast_radius", Type: KeyMapping, Example: "{max_repairs: 2, trip: 50%}",
			Doc: "caps repairs in one run: at most max_repairs, and none when the fraction trip of at least min_units units fails at once (a network, not the agents); off when absent",
			Keys: []Key{
				{Name: "max_repairs", Type: KeyInt, Min: 1, Doc: "repairs per run; the rest stay pending"},
				{Name: "trip", Type: KeyFraction, Doc: "the fraction of the units (50% or 0.5) failing at once that opens the circuit: no repair runs, one contract-wide alert"},
				{Name: "min_units", Type: KeyInt, Min: 1, Default: "2", Doc: "the least number of failing units that can trip the circuit"},
			}},
		Contract: true,
		Build: func(m map[string]any) (any, error) {
			b := &BlastRadius{}
			b.MaxRepairs, _ = m["max_repairs"].(int)
			b.Trip, _ = m["trip"].(float64)
			b.MinUnits, _ = m["min_units"].(int)
			return b, nil
		},
		Say: func(v any, _ time.Duration) string { return "blast radius " + blastText(v.(*BlastRadius)) },
		Set: func(g *Guards, v any) { g.BlastRadius = v.(*BlastRadius) }, Get: func(g *Guards) any { return g.BlastRadius },
	},
	{
		Key: Key{Name: "flapping", Type: KeyMapping, Example: "{high: 40%, runs: 10, repair: true}", Default: fmt.Sprintf("{low: %g%%, high: %g%%, runs: %d, repair: false, enabled: true}", DefaultFlapLow, DefaultFlapHigh, DefaultFlapRuns),
			Doc: "flap detection (Icinga 2's): a unit whose state changed in more than high of its last runs flaps until it falls below low; one message when it starts, one when it stops, and its repairs held unless repair",
			Keys: []Key{
				{Name: "low", Type: KeyFraction, Default: fmt.Sprintf("%g%%", DefaultFlapLow), Doc: "the share of the runs (25% or 0.25) below which a flapping unit stops flapping"},
				{Name: "high", Type: KeyFraction, Default: fmt.Sprintf("%g%%", DefaultFlapHigh), Doc: "the share of the runs (30% or 0.3) above which a unit starts flapping"},
				{Name: "runs", Type: KeyInt, Min: 4, Max: 64, Default: fmt.Sprint(DefaultFlapRuns), Doc: "how many of the unit's last runs are counted"},
				{Name: "repair", Type: KeyBool, Default: "false", Doc: "repairs go on while the unit flaps"},
				{Name: "enabled", Type: KeyBool, Default: "true", Doc: "false turns flap detection off"},
			}},
		Contract: true,
		Build: func(m map[string]any) (any, error) {
			f := &Flapping{Low: DefaultFlapLow, High: DefaultFlapHigh, Runs: DefaultFlapRuns}
			if v, ok := m["low"].(float64); ok {
				f.Low = 100 * v
			}
			if v, ok := m["high"].(float64); ok {
				f.High = 100 * v
			}
			if v, ok := m["runs"].(int); ok {
				f.Runs = v
			}
			f.Repair, _ = m["repair"].(bool)
			if f.Low > f.High {
				return nil, fmt.Errorf("low (%g%%) is above high (%g%%): a unit would stop flapping before it started", f.Low, f.High)
			}
			if on, ok := m["enabled"].(bool); ok && !on {
				return (*Flapping)(nil), nil
			}
			return f, nil
		},
		Say: func(v any, _ time.Duration) string { return "flapping " + flapText(v.(*Flapping)) },
		Set: func(g *Guards, v any) { g.Flapping = v.(*Flapping) }, Get: func(g *Guards) any { return g.Flapping },
	},
}
