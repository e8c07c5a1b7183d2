package transports

import (
	"errors"
	"fmt"
	"testing"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"plain text unchanged", "pipeline blocked: 3 queued", "pipeline blocked: 3 queued"},
		{"non-ASCII letters unchanged", "café ✔ 東京", "café ✔ 東京"},
		{"a newline cannot forge a log line", "ok\n2026-01-01 contractd: repaired abiba", `ok\n2026-01-01 contractd: repaired abiba`},
		{"carriage return and tab", "a\rb\tc", `a\rb\tc`},
		{"ANSI clear screen", "x\x1b[2J\x1b[H", `x\x1b[2J\x1b[H`},
		{"OSC title with BEL", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"DEL and C1 CSI", "a\x7fb\u009bc", `a\x7fb\u009bc`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Printable(tc.in); got != tc.want {
				t.Fatalf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestPrintableArgs(t *testing.T) {
	t.Parallel()
	got := fmt.Sprintf("%s: %v (%d)\n", PrintableArgs([]any{"a\nb", errors.New("x\x1b[2J"), 3})...)
	if want := "a\\nb: x\\x1b[2J (3)\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
