package monitrc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// token is one word of a control file: a keyword, a number or a string,
// quoted or not, with where it was written. Monit's language is
// free-format and token-oriented: a statement may run over several lines
// and several statements may share one, so the reader works on tokens,
// never on lines.
type token struct {
	text   string // the word, quotes removed
	quoted bool   // written in "…" or '…': never a keyword
	file   string // the file as the import names it
	line   int
	col    int
	off    int // byte offsets of the token as written in src
	end    int
	src    *source
}

// source is one file read, for the raw text a statement such as
// mail-format spans.
type source struct {
	path string
	text string
}

// pos is a token's place as a note writes it: FILE:LINE.
func (t token) pos() string { return fmt.Sprintf("%s:%d", t.file, t.line) }

// is reports whether t is the unquoted keyword kw (keywords are case
// insensitive).
func (t token) is(kw ...string) bool {
	if t.quoted {
		return false
	}
	for _, k := range kw {
		if strings.EqualFold(t.text, k) {
			return true
		}
	}
	return false
}

// lower is the token's text in lower case, for keyword tables.
func (t token) lower() string { return strings.ToLower(t.text) }

// SyntaxError is input the import refuses, at the file, line and column
// of the token: text the reader cannot split into tokens (an unclosed
// quote, an include that cannot be read, includes nested too deep), or a
// value no contract could say what the file means by (a port that is not
// 1–65535, a number that is not one, a dependency loop).
type SyntaxError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Errors are the SyntaxErrors of one import, in file order: every value
// it refuses is named in one run.
type Errors []*SyntaxError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each SyntaxError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortErrors orders es by file (in the order the import read them), line
// and column.
func sortErrors(es Errors, files []string) {
	rank := map[string]int{}
	for i, f := range files {
		if _, ok := rank[f]; !ok {
			rank[f] = i
		}
	}
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.File != b.File {
			return rank[a.File] < rank[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// errorf is an error of the input at t.
func (t token) errorf(format string, args ...any) *SyntaxError {
	return &SyntaxError{File: t.file, Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, args...)}
}

// maxIncludes bounds the files one import reads, as Monit does (1024).
const maxIncludes = 1024

// lexer turns files into one token stream, expanding `include GLOB`
// where it stands (Monit includes anywhere, even inside a service entry,
// as Debian's templates are).
type lexer struct {
	files   int
	depth   int
	sources []*source
}

// readFile reads path (named as name in positions) into tokens, includes
// expanded.
func (lx *lexer) readFile(path, name string) ([]token, error) {
	lx.files++
	if lx.files > maxIncludes {
		return nil, &SyntaxError{File: name, Line: 1, Col: 1, Msg: fmt.Sprintf("more than %d files included", maxIncludes)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	src := &source{path: path, text: string(b)}
	lx.sources = append(lx.sources, src)
	toks, err := lex(src, name)
	if err != nil {
		return nil, err
	}
	var out []token
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !t.is("include") || i+1 >= len(toks) {
			out = append(out, t)
			continue
		}
		i++
		glob := toks[i].text
		if !filepath.IsAbs(glob) {
			glob = filepath.Join(filepath.Dir(path), glob)
		}
		matches, err := filepath.Glob(glob)
		if err != nil {
			return nil, &SyntaxError{File: name, Line: toks[i].line, Col: toks[i].col, Msg: fmt.Sprintf("include %s: %v", toks[i].text, err)}
		}
		sort.Strings(matches)
		if lx.depth >= 32 {
			return nil, &SyntaxError{File: name, Line: t.line, Col: t.col, Msg: "includes nested deeper than 32 levels"}
		}
		for _, m := range matches {
			if fi, err := os.Stat(m); err != nil || fi.IsDir() {
				continue // Monit silently ignores a directory the glob matches
			}
			lx.depth++
			inc, err := lx.readFile(m, m)
			lx.depth--
			if err != nil {
				return nil, err
			}
			out = append(out, inc...)
		}
	}
	return out, nil
}

// singles are the characters that are tokens of their own outside quotes.
const singles = "{}[](),"

// lex splits one file into tokens: words separated by white space, "…"
// and '…' strings, the punctuation in singles, and comparison operators at
// the start of a word (`>90%` is `>` and `90%`). `#` starts a comment to
// the end of the line.
func lex(src *source, name string) ([]token, error) {
	var out []token
	s := src.text
	line, lineStart := 1, 0
	i := 0
	mk := func(text string, quoted bool, start int) token {
		return token{text: text, quoted: quoted, file: name, line: line, col: start - lineStart + 1, off: start, src: src}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
			lineStart = i
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			start, startLine, startCol := i, line, i-lineStart+1
			i++
			var b strings.Builder
			for ; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && i+1 < len(s) && s[i+1] == c {
					i++
				}
				if s[i] == '\n' {
					line++
					lineStart = i + 1
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, &SyntaxError{File: name, Line: startLine, Col: startCol, Msg: fmt.Sprintf("string opened with %c is never closed", c)}
			}
			i++
			t := mk(b.String(), true, start)
			t.line, t.col, t.end = startLine, startCol, i
			out = append(out, t)
		case strings.IndexByte(singles, c) >= 0:
			t := mk(string(c), false, i)
			t.end = i + 1
			out = append(out, t)
			i++
		default:
			start := i
			if op := operatorAt(s[i:]); op != "" {
				t := mk(op, false, start)
				t.end = start + len(op)
				out = append(out, t)
				i += len(op)
				continue
			}
			for i < len(s) && !isSpace(s[i]) && strings.IndexByte(singles, s[i]) < 0 && s[i] != '#' && s[i] != '"' && s[i] != '\'' {
				i++
			}
			t := mk(s[start:i], false, start)
			t.end = i
			out = append(out, t)
		}
	}
	return out, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'
}

// operatorAt returns the comparison operator s starts with, if any.
func operatorAt(s string) string {
	for _, op := range []string{"<=", ">=", "!=", "==", "<>", "<", ">", "="} {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	return ""
}
