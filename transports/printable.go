package transports

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable makes text that came from a target (probe output, remote
// errors) safe for a terminal, a log line or an alert: newlines, carriage
// returns, tabs, escape sequences (ANSI/OSC), other control and format
// characters (bidi overrides among them) and invalid UTF-8 are written as
// Go-style escapes (\n, \x1b, \u202e), so one record stays one line and no
// byte a target sends can move the cursor, clear the screen or forge a log
// line. Printable text, including non-ASCII letters, passes unchanged.
// JSON output keeps the exact data and does not use this.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !isPrintable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case isPrintable(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

func isPrintable(r rune) bool {
	return r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r))
}

// PrintableArgs returns args for a Printf-style call whose output is for
// people: every string and error is replaced by its Printable text, so a
// format's own newlines stay and no argument can add one. Other values
// pass unchanged (a verb such as %d must still fit them): render a
// Stringer that carries outside text with String() first.
func PrintableArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch x := a.(type) {
		case string:
			out[i] = Printable(x)
		case error:
			out[i] = Printable(x.Error())
		default:
			out[i] = a
		}
	}
	return out
}
