package contracts

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrUnknownShorthand is wrapped by CompileCell when a cell is none of the
// documented forms.
var ErrUnknownShorthand = errors.New("unknown shorthand")

var (
	reNumber   = regexp.MustCompile(`^-?(\d+(\.\d*)?|\.\d+)$`)
	reWord     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:/-]*$`)
	reRange    = regexp.MustCompile(`^(-?\d+(?:\.\d+)?)\s*(?:–|—|-)\s*(-?\d+(?:\.\d+)?)$`)
	rePlus     = regexp.MustCompile(`^(\d+(?:\.\d+)?)\+$`)
	reCompare  = regexp.MustCompile(`^(<=|>=|==|!=|≤|≥|<|>|=)\s*(.*)$`)
	reFieldVal = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*:\s+(.+)$`)
	reIdent    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

// CompileCell turns one health-table cell into expr text with the row's
// field as subject `it`. src is the cell as written (backticks included);
// field is the row's field. It returns an error wrapping ErrUnknownShorthand
// when the cell is none of the documented forms, and never a silent false.
func CompileCell(src string, field string) (exprText string, err error) {
	src = strings.TrimSpace(src)
	if src == "" {
		return "", fmt.Errorf("%w %q: empty cell", ErrUnknownShorthand, src)
	}
	// `X with `field: value`` narrows a condition by a sibling field.
	if left, right, ok := splitWith(src); ok {
		l, err := CompileCell(left, field)
		if err != nil {
			return "", err
		}
		r, err := compileFieldValue(unquoteTicks(right))
		if err != nil {
			return "", err
		}
		return "(" + l + ") && " + r, nil
	}
	if parts := splitTopLevel(src, " or "); len(parts) > 1 {
		out := make([]string, 0, len(parts))
		var null []string
		for _, p := range parts {
			e, err := CompileCell(p, field)
			if err != nil {
				return "", err
			}
			if e == "it == nil" {
				null = append(null, "("+e+")")
				continue
			}
			out = append(out, "("+e+")")
		}
		// `null` is tried first: an expression that fails on null
		// (`it >= vars.max`) would otherwise fail the whole cell before
		// `|| it == nil` is reached, and `… or null` must hold on null.
		return strings.Join(append(null, out...), " || "), nil
	}
	if inner, ok := wholeTicks(src); ok {
		inner = strings.TrimSpace(inner)
		// A backticked literal is still an equality with the field.
		if lit, ok := literal(inner); ok {
			return "it == " + lit, nil
		}
		if e, ok := shorthand(inner); ok {
			return e, nil
		}
		if e, err, ok := comparison(inner); ok {
			return e, err
		}
		if err := negation(inner); err != nil {
			return "", err
		}
		if !namesField(inner, field) {
			return "", fmt.Errorf("%w %q: a full expression must name the field (it or %s)", ErrUnknownShorthand, inner, fieldRoot(field))
		}
		return inner, nil
	}
	if e, ok := shorthand(src); ok {
		return e, nil
	}
	if e, err, ok := comparison(src); ok {
		return e, err
	}
	if lit, ok := literal(src); ok {
		return "it == " + lit, nil
	}
	if err := negation(src); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%w %q", ErrUnknownShorthand, src)
}

// negation explains a cell written as English negation (`not ok`), which
// is no shorthand: it names the forms that say "anything but".
func negation(s string) error {
	rest, ok := strings.CutPrefix(strings.ToLower(s), "not ")
	if !ok {
		return nil
	}
	v := strings.TrimSpace(s[len(s)-len(rest):])
	lit, ok := literal(v)
	if !ok {
		lit = strconv.Quote(v)
	}
	return fmt.Errorf("%w %q: for anything but %s write != %s, or `it not in [%s, …]` for several values", ErrUnknownShorthand, s, v, v, lit)
}

// shorthand handles the word forms and numeric ranges.
func shorthand(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "non-null string":
		return `it != nil && type(it) == "string"`, true
	case "non-null":
		return "it != nil", true
	case "null", "nil":
		return "it == nil", true
	}
	if m := reRange.FindStringSubmatch(s); m != nil {
		return nonNull + "it >= " + m[1] + " && it <= " + m[2], true
	}
	if m := rePlus.FindStringSubmatch(s); m != nil {
		return nonNull + "it >= " + m[1], true
	}
	return "", false
}

// nonNull starts every ordering shorthand (`< N`, `N–M`, `N+`): null is no
// value, which no number is greater or less than, so the comparison does
// not hold on null, where `it < N` alone would fail the cell ("invalid
// operation: <nil> < int"), and `>= 26 or null` would never reach its
// null. Equality (`== X`, `!= X`, a bare value) compares null as a value.
const nonNull = "it != nil && "

// comparison handles `< N`, `≥ N`, `== X`, `!= X`. ok is false when s does not
// start with an operator.
func comparison(s string) (string, error, bool) {
	m := reCompare.FindStringSubmatch(s)
	if m == nil {
		return "", nil, false
	}
	op := m[1]
	switch op {
	case "≤":
		op = "<="
	case "≥":
		op = ">="
	case "=":
		op = "=="
	}
	rhs := strings.TrimSpace(m[2])
	if op == "==" || op == "!=" {
		lit, ok := literal(unquoteTicks(rhs))
		if !ok {
			return "", fmt.Errorf("%w %q: expected a value after %s", ErrUnknownShorthand, s, m[1]), true
		}
		return "it " + op + " " + lit, nil, true
	}
	n := unquoteTicks(rhs)
	if !reNumber.MatchString(n) {
		return "", fmt.Errorf("%w %q: expected a number after %s", ErrUnknownShorthand, s, m[1]), true
	}
	return nonNull + "it " + op + " " + n, nil, true
}

// literal renders a single token as an expr literal: numbers, true/false,
// null, quoted strings, and bare words (which are strings).
func literal(s string) (string, bool) {
	switch s {
	case "true", "false":
		return s, true
	case "null", "nil":
		return "nil", true
	}
	if reNumber.MatchString(s) {
		return s, true
	}
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		inner := s[1 : len(s)-1]
		if strings.ContainsAny(inner, `"'\`) {
			return "", false
		}
		return strconv.Quote(inner), true
	}
	if reWord.MatchString(s) {
		return strconv.Quote(s), true
	}
	return "", false
}

// compileFieldValue compiles `field: value` to `field == value`.
func compileFieldValue(s string) (string, error) {
	m := reFieldVal.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", fmt.Errorf("%w %q: expected `field: value`", ErrUnknownShorthand, s)
	}
	lit, ok := literal(strings.TrimSpace(m[2]))
	if !ok {
		return "", fmt.Errorf("%w %q: cannot read the value %q", ErrUnknownShorthand, s, m[2])
	}
	return m[1] + " == " + lit, nil
}

// CompileCondition turns an action-table or escalation condition into expr
// text: `field: value` shorthand (backticked or not) becomes an equality,
// anything else is taken as a full expression. It returns an error wrapping
// ErrUnknownShorthand for an empty condition.
func CompileCondition(src string) (string, error) {
	s := strings.TrimSpace(src)
	if inner, ok := wholeTicks(s); ok {
		s = strings.TrimSpace(inner)
	}
	if s == "" {
		return "", fmt.Errorf("%w %q: empty condition", ErrUnknownShorthand, src)
	}
	if reFieldVal.MatchString(s) {
		if e, err := compileFieldValue(s); err == nil {
			return e, nil
		}
	}
	return s, nil
}

// wholeTicks reports whether s is exactly one code span and returns its text.
func wholeTicks(s string) (string, bool) {
	if len(s) < 2 || s[0] != '`' || s[len(s)-1] != '`' {
		return "", false
	}
	n := 0
	for 2*(n+1) < len(s) && s[n] == '`' && s[len(s)-1-n] == '`' {
		n++
	}
	ticks := s[:n]
	inner := s[n : len(s)-n]
	if strings.Contains(inner, ticks) || inner == "" {
		return "", false
	}
	return inner, true
}

func unquoteTicks(s string) string {
	s = strings.TrimSpace(s)
	if inner, ok := wholeTicks(s); ok {
		return strings.TrimSpace(inner)
	}
	return s
}

// splitWith splits "X with `f: v`" at the last top-level " with ".
func splitWith(s string) (string, string, bool) {
	parts := splitTopLevel(s, " with ")
	if len(parts) != 2 {
		return "", "", false
	}
	return strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), true
}

// splitTopLevel splits s on sep outside backticks and quotes.
func splitTopLevel(s, sep string) []string {
	var parts []string
	inTick, inQuote := false, byte(0)
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote != 0:
			if c == inQuote {
				inQuote = 0
			}
		case c == '`':
			inTick = !inTick
		case inTick:
		case c == '"' || c == '\'':
			inQuote = c
		case strings.HasPrefix(s[i:], sep):
			parts = append(parts, s[last:i])
			i += len(sep) - 1
			last = i + 1
		}
	}
	return append(parts, s[last:])
}

func fieldRoot(field string) string {
	return SplitPath(field)[0]
}

// namesField reports whether an expression mentions `it` or the row's field
// as a whole word.
func namesField(e, field string) bool {
	return mentions(e, "it") || mentions(e, fieldRoot(field))
}

func mentions(e, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(e[i:], word)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isIdentByte(e[j-1]) && e[j-1] != '.'
		after := j+len(word) >= len(e) || !isIdentByte(e[j+len(word)])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}
