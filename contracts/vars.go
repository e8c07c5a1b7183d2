package contracts

import (
	"regexp"
	"strings"
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
