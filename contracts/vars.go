package contracts

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// reservedVar matches the names a var may not take: the shell reads them
// itself (PATH decides which program runs, IFS how words split, HOME what ~
// means, PS4 is expanded under set -x), some are read-only in bash, and
// CONTRACTD_ is the engine's own prefix. Vars reach every script as shell
// variables of their own name, so a var of such a name would let a value
// change which command runs.
var reservedVar = regexp.MustCompile(`^(PATH|IFS|CDPATH|HOME|ENV|GLOBIGNORE|SHELLOPTS|POSIXLY_CORRECT|PS[1-4]|PROMPT_COMMAND|OPTIND|OPTARG|PPID|UID|EUID|GROUPS|PWD|OLDPWD|TMOUT|FUNCNEST|BASH.*|CONTRACTD_.*)$`)

// ReservedVarName reports whether name is kept from vars, for_each keys
// and --var because the shell gives it a meaning of its own.
func ReservedVarName(name string) bool { return reservedVar.MatchString(name) }

// CheckVarName returns why name cannot be a var, or "" when it can: a var
// is a shell identifier that the shell does not read itself.
func CheckVarName(name string) string {
	switch {
	case !reVarName.MatchString(name):
		return "not a valid variable name (letters, digits and _, not starting with a digit)"
	case ReservedVarName(name):
		return "reserved: the shell reads this name itself, so it cannot carry a var"
	}
	return ""
}

// ShellQuote quotes s for POSIX sh as one word: as it is when it holds
// only letters, digits and -_./:=@,+%, else in single quotes (a quote
// inside is closed, escaped with a backslash and opened again).
func ShellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !plainRune(r) }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plainRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r)
}

// singleQuotedRefs returns the offsets of the ${ that open references
// inside single quotes in a command line. The shell leaves those as
// written, so an author who meant the var's value gets the literal text.
// It follows sh quoting: '…' is literal, "…" and unquoted text take a
// backslash escape.
func singleQuotedRefs(cmd string) []int {
	var out []int
	single, double := false, false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case single:
			if c == '\'' {
				single = false
			} else if strings.HasPrefix(cmd[i:], "${") && strings.IndexByte(cmd[i:], '}') > 0 {
				out = append(out, i)
			}
		case c == '\\':
			i++
		case c == '"':
			double = !double
		case c == '\'' && !double:
			single = true
		}
	}
	return out
}

// varValue is one var as written: its text, its value typed by the YAML
// scalar that wrote it, and where.
type varValue struct {
	text  string
	value any // int, float64, bool or string
	pos   Pos
}

// typedScalar is a var's value as expressions read it: a YAML integer is an
// int, a float a float64, true/false a bool, anything else its text.
func typedScalar(n ast.Node, text string) any {
	switch v := unwrap(n).(type) {
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return int(x)
		case uint64:
			return int(x)
		}
	case *ast.FloatNode:
		return v.Value
	case *ast.BoolNode:
		return v.Value
	}
	return text
}

// typeName names a var's type for diagnostics.
func typeName(v any) string {
	switch v.(type) {
	case int:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return "a string"
}

// convertVar reads an override's text as the type of the value it
// overrides: a decimal integer, a number, true or false; a string takes
// any text. It fails when the text is not of that type.
func convertVar(declared any, text string) (any, error) {
	t := strings.TrimSpace(text)
	switch declared.(type) {
	case int:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("not a decimal integer")
		}
		return int(n), nil
	case float64:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return nil, fmt.Errorf("not a number")
		}
		return f, nil
	case bool:
		switch t {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("not true or false")
	}
	return text, nil
}

// overrideVar sets var k from an inventory or a --var. A var the contract
// (or the inventory, for a --var) already declares keeps its declared type:
// the override's text is read as that type, or refused with an error at
// the override (an inventory entry) or at the declaration (a --var, which
// has no position of its own). A var declared nowhere else takes the
// override's own type (an inventory's YAML scalar; a --var is a string).
func overrideVar(c *Contract, d *diags, declaredAt map[string]Pos, k string, v varValue, from string) {
	declared, ok := c.VarValues[k]
	if !ok {
		c.Vars[k], c.VarValues[k] = v.text, v.value
		if v.pos != (Pos{}) {
			declaredAt[k] = v.pos
		}
		return
	}
	val, err := convertVar(declared, v.text)
	if err != nil {
		at, ok := declaredAt[k]
		switch {
		case from == "inventory":
			d.errorf(v.pos, "vars.%s: the contract declares %s as %s (%s); %q is %v", k, k, typeName(declared), c.Vars[k], v.text, err)
		case ok:
			d.errorf(at, "--var %s=%s: %s is declared here as %s (%s); %q is %v", k, v.text, k, typeName(declared), c.Vars[k], v.text, err)
		default:
			d.errorf(Pos{File: c.Path, Line: 1, Col: 1}, "--var %s=%s: %s is %s; %q is %v", k, v.text, k, typeName(declared), v.text, err)
		}
		return
	}
	c.Vars[k], c.VarValues[k] = v.text, val
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// VarText is the text a for_each item's value fills into a ${key}
// reference: a string as it is, a number or bool as written in Go's
// shortest form, null as the empty string.
func VarText(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// StageVars returns what a ${name} reference reads in a stage: every var's
// text and, for a for_each item, each of its keys as `key` and `item.key`
// (a key wins over a var of the same name). The run fills scripts,
// commands, URLs and addresses from it, and lint checks http and tcp steps
// with it, so both read the same values.
func (c *Contract) StageVars(item map[string]any) map[string]string {
	out := make(map[string]string, len(c.Vars)+2*len(item))
	for k, v := range c.Vars {
		out[k] = v
	}
	for k, v := range item {
		out[k] = VarText(v)
		out["item."+k] = VarText(v)
	}
	return out
}

// StageVar returns what StageVars(item)[name] is, and whether it is set,
// without building the map: lint asks for the few names a step reads, once
// per item.
func (c *Contract) StageVar(item map[string]any, name string) (string, bool) {
	if v, ok := item[name]; ok {
		return VarText(v), true
	}
	if k, ok := strings.CutPrefix(name, "item."); ok {
		if v, ok := item[k]; ok {
			return VarText(v), true
		}
	}
	v, ok := c.Vars[name]
	return v, ok
}

// StageValues is StageVars as expressions read it (`vars.NAME`): vars
// typed as declared and an item's keys with their YAML types.
func (c *Contract) StageValues(item map[string]any) map[string]any {
	out := make(map[string]any, len(c.Vars)+2*len(item))
	for k, v := range c.Vars {
		out[k] = v // a contract built without VarValues reads its text
	}
	for k, v := range c.VarValues {
		out[k] = v
	}
	for k, v := range item {
		out[k] = v
		out["item."+k] = v
	}
	return out
}
