package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// Rank orders severities for "worst of": healthy < suppressed < unknown <
// degraded < unreachable < critical. Skipped ranks lowest: it says
// nothing. Suppressed ranks just above healthy: its cause is elsewhere,
// so any problem of a contract's own outranks it.
func Rank(s contracts.Severity) int {
	switch s {
	case contracts.SeveritySkipped:
		return 0
	case contracts.SeverityHealthy:
		return 1
	case contracts.SeveritySuppressed:
		return 2
	case contracts.SeverityUnknown:
		return 3
	case contracts.SeverityDegraded:
		return 4
	case contracts.SeverityUnreachable:
		return 5
	case contracts.SeverityCritical:
		return 6
	}
	return 3
}

// Worst returns the worse of two severities by Rank.
func Worst(a, b contracts.Severity) contracts.Severity {
	if Rank(b) > Rank(a) {
		return b
	}
	return a
}

// Lookup resolves a field name, possibly a path (`health.connected`,
// `perf["/"].value`: contracts.SplitPath), in env. The second result is
// false when any part is missing.
func Lookup(env map[string]any, field string) (any, bool) {
	if v, ok := env[field]; ok {
		return v, true
	}
	var cur any = env
	for _, p := range contracts.SplitPath(field) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Evaluate judges o with the step's health table, in env (which the engine
// builds: the step's values, earlier steps by id, vars, state, functions).
// A row's severity is its worst matching column; a row where no column
// matches is unknown and names itself; the step is its worst row. An
// unreachable step is unreachable whatever its table says, and one whose
// answer is invalid (Observation.Invalid) is unknown.
func Evaluate(step *contracts.Step, o *Observation, env map[string]any) {
	if o.Err != nil {
		o.Severity = contracts.SeverityUnreachable
		// A transport's error wraps ErrUnreachable and so already ends
		// with its word ("…: connection refused: unreachable").
		msg := o.Err.Error()
		if !errors.Is(o.Err, transports.ErrUnreachable) {
			msg = "unreachable: " + msg
		}
		o.Findings = append(o.Findings, msg)
		return
	}
	if o.Invalid != "" {
		o.Severity = contracts.SeverityUnknown
		o.Findings = append(o.Findings, o.Invalid+" → unknown")
		return
	}
	if judge := Kinds[step.Kind].Judge; judge != nil {
		judged(step, o, env, judge)
		return
	}
	if len(step.Health) == 0 {
		o.Severity = contracts.SeverityHealthy
		if to, _ := o.Values["timed_out"].(bool); to {
			o.Severity = contracts.SeverityUnknown
			o.Findings = append(o.Findings, "timed out → unknown")
		} else if code, _ := o.Values["exit_code"].(int); code != 0 && IsExec(step.Kind) {
			o.Severity = contracts.SeverityUnknown
			o.Findings = append(o.Findings, fmt.Sprintf("exit code %d → unknown", code))
		}
		return
	}
	o.Severity = judgeRows(step, o, env, contracts.SeverityHealthy)
}

// judged is Evaluate for a kind that judges its own steps: the worst of
// its verdict and its table's rows, the rows' findings first, then the
// verdict's, which are kept only when the step is not healthy (a healthy
// plugin's status line is no finding).
func judged(step *contracts.Step, o *Observation, env map[string]any, judge JudgeFn) {
	sev, said := judge(step, o)
	o.Severity = judgeRows(step, o, env, sev)
	if o.Severity != contracts.SeverityHealthy {
		o.Findings = append(o.Findings, said...)
	}
}

// judgeRows judges every row of step's table in env, adding each finding to
// o's, and returns the worst of sev and the rows' severities.
func judgeRows(step *contracts.Step, o *Observation, env map[string]any, sev contracts.Severity) contracts.Severity {
	for _, row := range step.Health {
		rs, finding := EvaluateRow(row, env)
		sev = Worst(sev, rs)
		if finding != "" {
			o.Findings = append(o.Findings, finding)
		}
	}
	return sev
}

// EvaluateRow judges one row; the finding is empty when the row is healthy.
//
// Null is no value (docs/contract-format.md, "Null in cells"): a cell holds
// on a null field only when it says so (`null`, `!= X`, an expression that
// reads nil); a comparison such as `< 26` cannot compare null and does not
// hold. A null field no cell holds on makes the row unknown, and the
// finding says the field is null rather than what expr could not compare.
func EvaluateRow(row *contracts.HealthRow, env map[string]any) (contracts.Severity, string) {
	it, present := Lookup(env, row.Field)
	prevIt, hadIt := env["it"]
	env["it"] = it
	defer func() {
		if hadIt {
			env["it"] = prevIt
		} else {
			delete(env, "it")
		}
	}()
	matched := false
	sev := contracts.SeverityHealthy
	var hit *contracts.Cell
	var errs []string
	for _, c := range row.Cells {
		if c.Program == nil {
			continue
		}
		out, err := expr.Run(c.Program, env)
		if n, ok := numericString(it); err != nil && ok {
			// `< 5` beside a probe's stdout ("12"): a string that holds a
			// number compares as that number where the string itself
			// cannot be compared (docs/contract-format.md, cell shorthand).
			env["it"] = n
			out, err = expr.Run(c.Program, env)
			env["it"] = it
		}
		if err != nil {
			errs = append(errs, FirstLine(err.Error()))
			continue
		}
		if b, ok := out.(bool); ok && b {
			if !matched || Rank(c.Severity) > Rank(sev) {
				sev, hit = c.Severity, c
			}
			matched = true
		}
	}
	shown := FormatValue(it)
	if !present {
		shown = "missing"
	}
	if !matched {
		if present && it == nil {
			return contracts.SeverityUnknown, fmt.Sprintf("%s is null: no column matched → unknown", row.Field)
		}
		msg := fmt.Sprintf("%s (%s): no column matched → unknown", row.Field, shown)
		if present && len(errs) > 0 {
			msg += " (" + errs[0] + ")"
		}
		return contracts.SeverityUnknown, msg
	}
	if sev == contracts.SeverityHealthy {
		return sev, ""
	}
	if row.Expected {
		return sev, fmt.Sprintf("%s (%s) expected %s → %s", row.Field, shown, hit.Source, sev)
	}
	return sev, fmt.Sprintf("%s (%s) %s → %s", row.Field, shown, hit.Source, sev)
}

// FormatValue renders a value for a finding: null for nil, JSON for maps
// and lists, the plain value otherwise.
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	case float64:
		// 19172163584, not 1.9172163584e+10: a plugin's bytes as printed
		// (and, as JSON writes them, an exponent from 1e21 on).
		if x > -1e21 && x < 1e21 {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return fmt.Sprint(x)
	default:
		return fmt.Sprint(x)
	}
}

// numericString returns the number a string field holds ("42", " 12.5\n"),
// for a comparison that cannot compare the string.
func numericString(v any) (float64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return n, err == nil
}

// FirstLine is s up to its first newline: expr's errors go on with the
// source and a caret on lines of their own.
func FirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
