package contracts

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// DiagSeverity says whether a diagnostic stops a contract from loading.
type DiagSeverity int

// Diagnostic severities. An error means the contract is not loaded; a warning
// is reported and the contract loads (`lint --strict` fails on it); a note
// says what a deliberate choice of the author does (a report-only agent's
// actions never run): `lint` prints it, `--strict` passes, and no other
// command shows it.
const (
	DiagError DiagSeverity = iota
	DiagWarning
	DiagNote
)

// String returns "error", "warning" or "note".
func (s DiagSeverity) String() string {
	switch s {
	case DiagWarning:
		return "warning"
	case DiagNote:
		return "note"
	}
	return "error"
}

// MarshalText renders the severity as "error", "warning" or "note".
func (s DiagSeverity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one problem found in a contract, pointing into the original
// file (front matter included).
type Diagnostic struct {
	Pos      Pos          `json:"pos"`
	Severity DiagSeverity `json:"severity"`
	Msg      string       `json:"message"`
	// Suggestion is the did-you-mean the message ends with, as data: the
	// word as written and the known word nearest to it, so an editor can
	// offer the fix; nil when the message suggests nothing.
	Suggestion *Suggestion `json:"suggestion,omitempty"`
}

// Suggestion is a mistyped word and the known word lint suggests for it:
// the word as written (Wrong) is on the diagnostic's line, at its position
// or after it, and replacing it with Right is the fix.
type Suggestion struct {
	Wrong string `json:"wrong"`
	Right string `json:"right"`
}

// String renders the diagnostic as "FILE:LINE:COL: error: message",
// "FILE:LINE:COL: warning: message" or "FILE:LINE:COL: note: message".
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s", d.Pos, d.Severity, d.Msg)
}

// Diagnostics are all problems found in one contract, in file order.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error (warnings do not count).
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == DiagError {
			return true
		}
	}
	return false
}

// Problems returns the errors and warnings, without the notes: what every
// command but lint shows. It returns nil when there are none.
func (ds Diagnostics) Problems() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity != DiagNote {
			out = append(out, d)
		}
	}
	return out
}

// Errors returns only the error diagnostics; it returns nil when there are none.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == DiagError {
			out = append(out, d)
		}
	}
	return out
}

// ErrInvalidContract is wrapped by Diagnostics.Err, so callers can branch on a
// contract that did not load with errors.Is.
var ErrInvalidContract = errors.New("invalid contract")

// Err returns nil when there are no errors; otherwise an error wrapping
// ErrInvalidContract whose text lists every error line (warnings omitted).
func (ds Diagnostics) Err() error {
	errs := ds.Errors()
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, d := range errs {
		lines[i] = d.String()
	}
	return fmt.Errorf("%w: %d error(s):\n%s", ErrInvalidContract, len(errs), strings.Join(lines, "\n"))
}

// String renders one diagnostic per line.
func (ds Diagnostics) String() string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// sortDiagnostics orders diagnostics by position so output is stable no matter
// which pass found them; equal positions keep their discovery order.
func sortDiagnostics(ds Diagnostics) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// diags collects diagnostics for one file during one pass.
type diags struct {
	file string
	list Diagnostics
}

func (d *diags) errorf(p Pos, format string, args ...any) {
	d.add(p, DiagError, format, args)
}

func (d *diags) warnf(p Pos, format string, args ...any) {
	d.add(p, DiagWarning, format, args)
}

func (d *diags) notef(p Pos, format string, args ...any) {
	d.add(p, DiagNote, format, args)
}

// add appends one diagnostic; a didYouMean among args that names a word
// becomes its Suggestion.
func (d *diags) add(p Pos, sev DiagSeverity, format string, args []any) {
	diag := Diagnostic{Pos: p, Severity: sev, Msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if h, ok := a.(didYouMean); ok && h.right != "" {
			diag.Suggestion = &Suggestion{Wrong: h.wrong, Right: h.right}
		}
	}
	d.list = append(d.list, diag)
}

// didYouMean ends a message about a mistyped word: ` (did you mean "x"?)`
// when a known word is near it (see hint), else the text given for none.
// Passed to errorf or warnf, it also gives the diagnostic its Suggestion.
type didYouMean struct {
	wrong, right string
	otherwise    string
	text         string // the whole ending when it is not the usual one
}

// String returns the message's ending.
func (h didYouMean) String() string {
	switch {
	case h.text != "":
		return h.text
	case h.right != "":
		return fmt.Sprintf(" (did you mean %q?)", h.right)
	}
	return h.otherwise
}

// suggest is a didYouMean for wrong when right is a known word ("" for
// none), ending the message with text instead of the usual words.
func suggest(wrong, right, text string) didYouMean {
	if right == "" {
		return didYouMean{}
	}
	return didYouMean{wrong: wrong, right: right, text: text}
}
