package contracts

import (
	"regexp"
	"strconv"
	"strings"
)

// A path names a value below a step's values: names joined by dots
// (`health.queue.depth`), and a key that is not a name in brackets as a
// quoted string (`perf["/boot"].value`), as expr reads it. Health rows'
// fields, the paths lint checks and the run looks up (steps.Lookup) are
// all split by SplitPath, and the paths an expression reads are written
// by JoinPath, so `perf["/"].value` is one path wherever it is read.

// reFieldPath matches a health row's field: a name, then .name or
// ["key"] parts (the key a Go-quoted string without newlines).
var reFieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\["(?:[^"\\\n]|\\.)*"\])*$`)

// SplitPath splits a path into its parts: `perf["/"].value` is perf, /
// and value. A bracketed key that is not a quoted string, or is not
// closed, is kept as written in one part, which no value is named.
func SplitPath(path string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(path); {
		switch {
		case path[i] == '.':
			parts = append(parts, path[start:i])
			i++
			start = i
		case path[i] == '[' && i+1 < len(path) && path[i+1] == '"':
			end := closingQuote(path, i+2)
			key, err := "", error(nil)
			if end >= 0 {
				key, err = strconv.Unquote(path[i+1 : end+1])
			}
			if end < 0 || end+1 >= len(path) || path[end+1] != ']' || err != nil {
				return append(parts, path[start:])
			}
			if i > start {
				parts = append(parts, path[start:i])
			}
			parts = append(parts, key)
			i = end + 2
			if i < len(path) && path[i] == '.' {
				i++ // `perf["/"].value`: the dot only separates
			}
			start = i
			if i == len(path) {
				return parts
			}
		default:
			i++
		}
	}
	return append(parts, path[start:])
}

// closingQuote is the index of the " that closes a quoted string whose
// text starts at i, skipping \-escapes; -1 when there is none.
func closingQuote(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// JoinPath writes parts as a path: a part that is a name after a dot, any
// other in brackets, quoted (`perf["/"].value`).
func JoinPath(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i == 0 && reVarName.MatchString(p):
			b.WriteString(p)
		case reVarName.MatchString(p):
			b.WriteString("." + p)
		default:
			b.WriteString("[" + strconv.Quote(p) + "]")
		}
	}
	return b.String()
}
