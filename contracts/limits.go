package contracts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser/lexer"
)

// Input limits. A contract or inventory is text an operator (or an agent)
// writes; these bound what one file can cost to load, so a hostile or broken
// file is refused in milliseconds instead of taking the process's memory.
// Each shape limit is checked before the YAML, Markdown or expression
// parser sees the text, because they spend time and memory superlinear in
// nesting and in the size of one collection, table or paragraph, and expr's
// parser recurses once per level of nesting. The budgets of a whole
// contract (MaxExprs, MaxForEachRuns) are checked as the body is read,
// before what is over them is compiled or checked.
const (
	// DefaultMaxFileSize is the largest contract or inventory file read
	// (Options.MaxFileSize, --max-file-size).
	DefaultMaxFileSize = 1 << 20

	// MaxYAMLDepth is the deepest nesting of mappings and lists, block
	// and flow together, in front matter and inventories.
	MaxYAMLDepth = 32
	// MaxYAMLEntries is the most keys or items in one mapping or list.
	MaxYAMLEntries = 2000
	// MaxYAMLTotal is the most keys, items and comments in one YAML
	// text, each flow collection ([…], {…}) and document marker counting
	// as one more: the parser spends hundreds of bytes on each.
	MaxYAMLTotal = 20000

	// MaxMarkdownNesting is the deepest nesting of block quotes and lists
	// in the body.
	MaxMarkdownNesting = 32
	// MaxTableRows is the most rows of one table; MaxTableColumns the most
	// columns.
	MaxTableRows    = 1000
	MaxTableColumns = 64
	// MaxTableCells is the most cells of all tables of one contract
	// together: each cell is parsed, and a health cell compiled.
	MaxTableCells = 50000
	// MaxMarkdownBlocks is the most lines, list items and block quotes of
	// the body together, blank lines outside code blocks left out:
	// goldmark spends a few hundred bytes on each.
	MaxMarkdownBlocks = 50000
	// MaxBlockLines is the most lines of one paragraph (or other block
	// without a blank line) outside code blocks.
	MaxBlockLines = 2000
	// MaxHeadingAttrs is the most items in a heading's {…} block.
	MaxHeadingAttrs = 32

	// MaxExprSize is the longest expression, in bytes: a health cell, an
	// action or escalation condition, a guard or a maintained value, as
	// written and as the shorthand it uses expands.
	MaxExprSize = 4 << 10
	// MaxExprDepth is the deepest nesting in one expression, counted the
	// way expr's parser recurses: brackets ( [ {, unary operators (!, not,
	// -, +) and the operators whose right side nests (?:, **, ^, let, if).
	MaxExprDepth = 64
	// MaxExprs is the most expressions one contract compiles (cells,
	// conditions, guards, Expected: lines, maintained values), and
	// MaxExprBytes the most bytes they come to together. Each costs
	// about 25 µs to compile whatever its size, and each byte of one
	// about 100 bytes of memory while it is kept compiled.
	MaxExprs     = 10000
	MaxExprBytes = 256 << 10

	// MaxForEachRuns is the most runs of for_each stages and of their
	// steps together, one per item each: lint checks each, and the engine
	// makes each on every tick.
	MaxForEachRuns = 20000
)

// tooLargeHint ends the message of a file refused by the size limit.
const tooLargeHint = "raise the limit with --max-file-size"

// readLimited reads the file at path into buf (grown as needed), refusing a
// file larger than limit bytes without reading it all. what names the file
// in errors ("contract", "inventory").
func readLimited(buf []byte, path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > limit {
			return nil, sizeError(what, fi.Size(), limit)
		}
		if int(fi.Size()) > cap(buf) {
			buf = make([]byte, 0, int(fi.Size())+512)
		}
	}
	buf = buf[:0]
	// Read one byte past the limit: a file that grew since Stat, or one
	// that is not a regular file, is refused as soon as it passes it.
	r := io.LimitReader(f, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, sizeError(what, int64(len(buf)), limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// sizeLimitError is a file refused by the size limit.
type sizeLimitError struct{ msg string }

func (e *sizeLimitError) Error() string { return e.msg }

func sizeError(what string, size, limit int64) error {
	if size > limit+1 {
		return &sizeLimitError{fmt.Sprintf("%s is %s, larger than the %s limit (%s)", what, FormatSize(size), FormatSize(limit), tooLargeHint)}
	}
	return &sizeLimitError{fmt.Sprintf("%s is larger than the %s limit (%s)", what, FormatSize(limit), tooLargeHint)}
}

// readDiag turns a read failure of a contract or inventory into its
// diagnostic: a file over the size limit says so as it is, other errors
// are "read what: …".
func readDiag(path, what string, err error) Diagnostic {
	msg := fmt.Sprintf("read %s: %v", what, err)
	var se *sizeLimitError
	if errors.As(err, &se) {
		msg = se.msg
	}
	return Diagnostic{Pos: Pos{File: path, Line: 1, Col: 1}, Severity: DiagError, Msg: msg}
}

// FormatSize renders a byte count as "1 MiB", "512 KiB" or "1.02 MiB".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return trimZero(float64(n)/(1<<30)) + " GiB"
	case n >= 1<<20:
		return trimZero(float64(n)/(1<<20)) + " MiB"
	case n >= 1<<10:
		return trimZero(float64(n)/(1<<10)) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

func trimZero(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(f, 'f', 2, 64), "0"), ".")
}

// ParseSize reads a size such as "1MiB", "512KiB", "4M", "2000000" (bytes).
// It fails on anything else, and on sizes below 1 KiB.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || f*float64(mult) > 1<<40 {
		return 0, fmt.Errorf("size %q: want a number of bytes or e.g. 4MiB", s)
	}
	n := int64(f * float64(mult))
	if n < 1<<10 {
		return 0, fmt.Errorf("size %q: at least 1KiB", s)
	}
	return n, nil
}

// shapeError is a limit exceeded at a 1-based line and character column of
// the text that was checked.
type shapeError struct {
	line, col int
	msg       string
}

// lineScanner walks a text line by line, keeping the line number.
type lineScanner struct {
	src  []byte
	off  int // start of the next line
	line int // number of the current line (1-based)
	text []byte
}

func (l *lineScanner) next() bool {
	if l.off >= len(l.src) {
		return false
	}
	end := bytes.IndexByte(l.src[l.off:], '\n')
	if end < 0 {
		end = len(l.src) - l.off
	}
	l.text = bytes.TrimRight(l.src[l.off:l.off+end], "\r")
	l.off += end + 1
	l.line++
	return true
}

// errAt returns a shapeError at byte offset i of the current line.
func (l *lineScanner) errAt(i int, format string, args ...any) *shapeError {
	i = min(max(i, 0), len(l.text))
	return &shapeError{line: l.line, col: utf8.RuneCount(l.text[:i]) + 1, msg: fmt.Sprintf(format, args...)}
}

// yamlShape checks a YAML text against MaxYAMLDepth, MaxYAMLEntries and
// MaxYAMLTotal without parsing it. It follows YAML's structure closely
// enough to count: block collections by the column their keys or "- "
// items start in, flow collections by their brackets; quoted scalars,
// comments and block scalars (| and >) are skipped.
type yamlShape struct {
	ls     lineScanner
	block  []yamlLevel // open block collections, innermost last
	flow   []int       // open flow collections: entries so far, innermost last
	total  int
	quote  byte // an open quoted scalar that spans lines: '"' or '\''
	scalar int  // inside a block scalar: lines indented more than this belong to it; -1 when not
}

type yamlLevel struct {
	indent  int
	entries int
}

func checkYAMLShape(src []byte) *shapeError {
	y := &yamlShape{ls: lineScanner{src: src}, scalar: -1}
	for y.ls.next() {
		if err := y.line(y.ls.text); err != nil {
			return err
		}
	}
	return nil
}

func (y *yamlShape) line(t []byte) *shapeError {
	indent := 0
	for indent < len(t) && (t[indent] == ' ' || t[indent] == '\t') {
		indent++
	}
	blank := indent == len(t)
	if y.scalar >= 0 {
		if blank || indent > y.scalar {
			return nil
		}
		y.scalar = -1
	}
	if y.quote != 0 || len(y.flow) > 0 {
		return y.scan(t, 0, false)
	}
	if blank {
		return nil
	}
	if t[indent] == '#' {
		return y.count(indent) // the parser keeps each comment
	}
	if indent == 0 && (bytes.HasPrefix(t, []byte("---")) || bytes.HasPrefix(t, []byte("..."))) &&
		(len(t) == 3 || t[3] == ' ' || t[3] == '\t') {
		y.block = y.block[:0] // a new document
		return y.count(0)
	}
	if err := y.entry(indent); err != nil {
		return err
	}
	i := indent
	// "- " and "? " items nest a collection in the same line: - - x, - k: v.
	for i < len(t) && (t[i] == '-' || t[i] == '?') && (i+1 == len(t) || t[i+1] == ' ' || t[i+1] == '\t') {
		j := i + 1
		for j < len(t) && (t[j] == ' ' || t[j] == '\t') {
			j++
		}
		if j == len(t) || t[j] == '#' {
			return nil // the item's value starts on the next line
		}
		if t[j] == '|' || t[j] == '>' {
			y.scalar = i // the item is a block scalar
			return nil
		}
		if err := y.entry(j); err != nil {
			return err
		}
		i = j
	}
	return y.scan(t, i, true)
}

// entry records a key or item starting at column col in block context.
func (y *yamlShape) entry(col int) *shapeError {
	for len(y.block) > 0 && y.block[len(y.block)-1].indent > col {
		y.block = y.block[:len(y.block)-1]
	}
	if n := len(y.block); n > 0 && y.block[n-1].indent == col {
		y.block[n-1].entries++
		if y.block[n-1].entries > MaxYAMLEntries {
			return y.ls.errAt(col, "more than %d entries in one mapping or list (a limit of contracts and inventories)", MaxYAMLEntries)
		}
	} else {
		y.block = append(y.block, yamlLevel{indent: col, entries: 1})
		if len(y.block) > MaxYAMLDepth {
			return y.ls.errAt(col, "nested deeper than %d levels (a limit of contracts and inventories)", MaxYAMLDepth)
		}
	}
	return y.count(col)
}

func (y *yamlShape) count(col int) *shapeError {
	y.total++
	if y.total > MaxYAMLTotal {
		return y.ls.errAt(col, "more than %d keys, items and comments in all (a limit of contracts and inventories)", MaxYAMLTotal)
	}
	return nil
}

// scan reads t from i: quoted scalars, comments, flow brackets and commas,
// and a block scalar indicator after a key. node says i starts a node in
// block context (a value may open a flow collection or a quote there).
func (y *yamlShape) scan(t []byte, i int, node bool) *shapeError {
	for i < len(t) {
		c := t[i]
		switch {
		case y.quote == '"':
			switch c {
			case '\\':
				i++
			case '"':
				y.quote = 0
			}
			i++
			continue
		case y.quote == '\'':
			if c == '\'' {
				if i+1 < len(t) && t[i+1] == '\'' {
					i++
				} else {
					y.quote = 0
				}
			}
			i++
			continue
		}
		inFlow := len(y.flow) > 0
		switch {
		case c == ' ' || c == '\t':
			i++
			continue
		case c == '#' && (i == 0 || t[i-1] == ' ' || t[i-1] == '\t'):
			return y.count(i)
		case (c == '&' || c == '!') && (node || inFlow):
			// An anchor or a tag: the node it belongs to follows.
			for i < len(t) && t[i] != ' ' && t[i] != '\t' && !(inFlow && (t[i] == ',' || t[i] == '[' || t[i] == ']' || t[i] == '{' || t[i] == '}')) {
				i++
			}
			continue
		case (c == '"' || c == '\'') && (node || inFlow):
			y.quote = c
			node = false
			i++
			continue
		case (c == '[' || c == '{') && (node || inFlow):
			depth := len(y.block) + len(y.flow) + 1
			if depth > MaxYAMLDepth {
				return y.ls.errAt(i, "nested deeper than %d levels (a limit of contracts and inventories)", MaxYAMLDepth)
			}
			// The collection is one more item: commas alone would let
			// [[[…]]], [[[…]]] through with a tenth of its brackets
			// counted.
			if err := y.count(i); err != nil {
				return err
			}
			y.flow = append(y.flow, 0)
			i++
			continue
		case (c == ']' || c == '}') && inFlow:
			y.flow = y.flow[:len(y.flow)-1]
			node = false
			i++
			continue
		case c == ',' && inFlow:
			n := len(y.flow) - 1
			y.flow[n]++
			if y.flow[n]+1 > MaxYAMLEntries {
				return y.ls.errAt(i, "more than %d entries in one mapping or list (a limit of contracts and inventories)", MaxYAMLEntries)
			}
			if err := y.count(i); err != nil {
				return err
			}
			i++
			continue
		case c == ':' && (i+1 == len(t) || t[i+1] == ' ' || t[i+1] == '\t' || inFlow):
			// A key's value follows: it may open a flow collection, a
			// quote, or a block scalar.
			j := i + 1
			for j < len(t) && (t[j] == ' ' || t[j] == '\t') {
				j++
			}
			if !inFlow && j < len(t) && (t[j] == '|' || t[j] == '>') {
				y.scalar = y.innerIndent()
				return nil
			}
			node = true
			i = j
			continue
		}
		// Plain scalar text: in flow context it ends at an indicator.
		node = false
		for i < len(t) && t[i] != ' ' && t[i] != '\t' {
			if inFlow && (t[i] == ',' || t[i] == ']' || t[i] == '}' || t[i] == '[' || t[i] == '{') {
				break
			}
			if t[i] == ':' && (i+1 == len(t) || t[i+1] == ' ' || t[i+1] == '\t' || inFlow) {
				break
			}
			i++
		}
	}
	return nil
}

// innerIndent is the column a block scalar's lines must pass: the column of
// the innermost block entry.
func (y *yamlShape) innerIndent() int {
	if len(y.block) == 0 {
		return 0
	}
	return y.block[len(y.block)-1].indent
}

// mdShape checks a Markdown body against MaxMarkdownNesting,
// MaxMarkdownBlocks, MaxTableRows, MaxTableColumns, MaxTableCells,
// MaxBlockLines and MaxHeadingAttrs without parsing it. Fenced code blocks
// only count their lines: scripts may be as indented as they need, and
// without a blank line.
type mdShape struct {
	ls       lineScanner
	fence    byte  // the open fence's character, 0 when none
	fenceLen int   // and its length
	lists    []int // content columns of the open list items, innermost last
	block    int   // lines of the current block (since the last blank line)
	table    int   // rows of the current table; -1 outside a table
	cols     int   // columns of the current table
	cells    int   // cells of all tables so far
	blocks   int   // lines, list items and block quotes so far (addBlocks)
	prev     []byte
}

func checkMarkdownShape(src []byte) *shapeError {
	m := &mdShape{ls: lineScanner{src: src}, table: -1}
	for m.ls.next() {
		if err := m.line(m.ls.text); err != nil {
			return err
		}
		m.prev = m.ls.text
	}
	return nil
}

func (m *mdShape) line(t []byte) *shapeError {
	rest, marks, firstCol, listCols := containerPrefix(t)
	if m.fence != 0 {
		if closesFence(t[rest:], m.fence, m.fenceLen) {
			m.fence = 0
		}
		return m.addBlocks(nil, 0)
	}
	if isBlankLine(t) {
		m.block, m.table = 0, -1
		return nil
	}
	// Text less indented than a list item's content is outside it.
	for len(m.lists) > 0 && m.lists[len(m.lists)-1] > firstCol {
		m.lists = m.lists[:len(m.lists)-1]
	}
	if len(m.lists)+len(marks) > MaxMarkdownNesting {
		at := rest // nested by indentation alone
		if k := MaxMarkdownNesting - len(m.lists); k >= 0 && k < len(marks) {
			at = marks[k] // the marker one level too deep
		}
		return m.ls.errAt(at, "block quotes and lists nested deeper than %d levels (a limit of contracts)", MaxMarkdownNesting)
	}
	if err := m.addBlocks(marks, rest); err != nil {
		return err
	}
	m.lists = append(m.lists, listCols...)
	m.block++
	if m.block > MaxBlockLines {
		return m.ls.errAt(rest, "more than %d lines without a blank line (a limit of contracts)", MaxBlockLines)
	}
	body := t[rest:]
	if c, n := fenceOpen(body); n > 0 {
		m.fence, m.fenceLen = c, n
		m.block, m.table = 0, -1
		return nil
	}
	if m.table >= 0 {
		m.table++
		if m.table > MaxTableRows {
			return m.ls.errAt(rest, "table has more than %d rows (a limit of contracts)", MaxTableRows)
		}
		if m.cells += m.cols; m.cells > MaxTableCells {
			return m.ls.errAt(rest, "tables have more than %d cells in all (a limit of contracts)", MaxTableCells)
		}
	}
	if cols, ok := delimiterRow(body); ok && m.table < 0 && m.block > 1 && bytes.IndexByte(m.prev, '|') >= 0 {
		if cols > MaxTableColumns {
			return m.ls.errAt(rest, "table has %d columns, more than %d (a limit of contracts)", cols, MaxTableColumns)
		}
		m.table, m.cols = 0, cols
		m.cells += cols // the header row
	}
	if isATXHeading(body) {
		return m.attrs(t, m.ls.line)
	}
	if isUnderline(body) && m.block > 1 {
		return m.attrs(m.prev, m.ls.line-1)
	}
	return nil
}

// addBlocks counts a line and the containers it opens (at marks; its text
// starts at rest) against MaxMarkdownBlocks. Each may be a node of
// goldmark's tree, and each line of a code block a segment of its own, a
// few hundred bytes apiece with the garbage of growing them: a 1 MiB body
// of one-line list items took 200 MB, one script of one-byte lines 130 MB.
func (m *mdShape) addBlocks(marks []int, rest int) *shapeError {
	m.blocks += 1 + len(marks)
	over := m.blocks - MaxMarkdownBlocks
	if over <= 0 {
		return nil
	}
	at := rest
	if k := len(marks) + 1 - over; k >= 0 && k < len(marks) {
		at = marks[k] // the container that is one too many
	}
	return m.ls.errAt(at, "more than %d lines, list items and block quotes (a limit of contracts)", MaxMarkdownBlocks)
}

// attrs checks the {…} block at the end of a heading line.
func (m *mdShape) attrs(t []byte, line int) *shapeError {
	_, inner, off, ok := trailingAttrs(string(t))
	if !ok {
		return nil
	}
	if n := len(strings.Fields(inner)); n > MaxHeadingAttrs {
		return &shapeError{line: line, col: utf8.RuneCount(t[:off]) + 1, msg: fmt.Sprintf("heading has %d attributes, more than %d (a limit of contracts)", n, MaxHeadingAttrs)}
	}
	return nil
}

// containerPrefix reads the block quote markers and list markers that
// start a line. It returns where the line's content starts, the offset of
// each marker, the column of the first non-blank character, and the
// content columns of the list items the line opens.
func containerPrefix(t []byte) (rest int, marks []int, firstCol int, listCols []int) {
	i := 0
	for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
		i++
	}
	firstCol = i
	for i < len(t) {
		if t[i] == '>' {
			marks = append(marks, i)
			i++
		} else if w := listMarker(t[i:]); w > 0 {
			marks = append(marks, i)
			i += w
			for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
				i++
			}
			listCols = append(listCols, i)
			continue
		} else {
			break
		}
		for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
	}
	return i, marks, firstCol, listCols
}

// listMarker returns the width of a list marker ("- ", "* ", "+ ", "1. ",
// "2) ") at the start of t, without the space, or 0.
func listMarker(t []byte) int {
	spaceAfter := func(i int) bool { return i == len(t) || t[i] == ' ' || t[i] == '\t' }
	if len(t) > 0 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && spaceAfter(1) {
		return 1
	}
	n := 0
	for n < len(t) && n < 9 && t[n] >= '0' && t[n] <= '9' {
		n++
	}
	if n > 0 && n < len(t) && (t[n] == '.' || t[n] == ')') && spaceAfter(n+1) {
		return n + 1
	}
	return 0
}

func isBlankLine(t []byte) bool { return len(bytes.TrimSpace(t)) == 0 }

// fenceOpen returns the character and length of a code fence opening t.
func fenceOpen(t []byte) (byte, int) {
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return 0, 0
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || t[0] == '`' && bytes.IndexByte(t[n:], '`') >= 0 {
		return 0, 0
	}
	return t[0], n
}

func closesFence(t []byte, c byte, n int) bool {
	t = bytes.TrimLeft(t, " \t")
	k := 0
	for k < len(t) && t[k] == c {
		k++
	}
	return k >= n && isBlankLine(t[k:])
}

// delimiterRow reports whether t is a table's delimiter row (|---|:--:|)
// and how many columns it has.
func delimiterRow(t []byte) (int, bool) {
	s := bytes.TrimSpace(t)
	if len(s) == 0 || bytes.IndexByte(s, '|') < 0 || bytes.IndexByte(s, '-') < 0 {
		return 0, false
	}
	for _, c := range s {
		if c != '|' && c != '-' && c != ':' && c != ' ' && c != '\t' {
			return 0, false
		}
	}
	s = bytes.TrimSuffix(bytes.TrimPrefix(s, []byte("|")), []byte("|"))
	return bytes.Count(s, []byte("|")) + 1, true
}

func isATXHeading(t []byte) bool {
	n := 0
	for n < len(t) && n < 7 && t[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && (n == len(t) || t[n] == ' ' || t[n] == '\t')
}

// exprSizeMsg says an expression of n bytes is over MaxExprSize.
func exprSizeMsg(n int) string {
	size := FormatSize(int64(n))
	if n < 2*MaxExprSize {
		size = fmt.Sprintf("%d bytes", n) // not "4 KiB, longer than 4 KiB"
	}
	return fmt.Sprintf("%s, longer than %s (a limit of contracts)", size, FormatSize(MaxExprSize))
}

// checkExprShape checks an expression against MaxExprSize and MaxExprDepth
// before expr's parser sees it: the parser recurses once per level of
// nesting, and parentheses build no AST node, so expr's own node limit
// does not bound them (500,000 of them overflowed the stack). It reads
// the text with expr's lexer, so strings and comments are skipped exactly
// as the parser skips them, and counts depth at least as deep as the
// parser recurses. A failure is a *file.Error at the first token over the
// limit, like any compile error; a text the lexer cannot read is left to
// expr to report.
func checkExprShape(text string) error {
	if len(text) > MaxExprSize {
		// At the expression's start, as an oversized file is refused at 1:1.
		return &file.Error{Line: 1, Message: exprSizeMsg(len(text))}
	}
	lx := lexer.New()
	lx.Reset(file.NewSource(text))
	var (
		open    []int // base of each enclosing bracket level, innermost last
		base    int   // depth of the current level: its brackets, and ?: ** ^ let if seen in it
		unary   int   // unary operators waiting for their operand
		operand = true
	)
	for {
		t, err := lx.Next()
		if err != nil || t.Kind == lexer.EOF {
			return nil // the end, or a lexing error expr reports itself
		}
		depth := base
		switch {
		case t.Is(lexer.Bracket, "(", "[", "{"):
			open = append(open, base)
			base, depth = base+unary+1, base+unary+1
			unary, operand = 0, true
		case t.Kind == lexer.Bracket:
			if n := len(open); n > 0 {
				base, open = open[n-1], open[:n-1]
			}
			unary, operand = 0, false
		case t.Kind == lexer.Operator && operand && (t.Value == "!" || t.Value == "not" || t.Value == "-" || t.Value == "+"):
			unary++
			depth = base + unary
		case t.Is(lexer.Operator, "?", "**", "^", "let", "if"):
			// The right side is parsed by a nested call that lasts to the
			// end of the level: count it so until the level closes.
			base++
			depth, operand = base, true
		case t.Kind == lexer.Operator:
			operand = true
		default: // an identifier, a number, a string
			unary, operand = 0, false
		}
		if depth > MaxExprDepth {
			e := &file.Error{Location: t.Location, Message: fmt.Sprintf("nested deeper than %d levels (a limit of contracts)", MaxExprDepth)}
			return e.Bind(file.NewSource(text))
		}
	}
}

// exprBudget holds one contract's expressions to MaxExprs and MaxExprBytes
// together.
type exprBudget struct {
	n, bytes int
}

// take charges one expression of size bytes. It reports over false while
// the contract is within the budget; over true past it, with the message
// of the limit passed the first time and none after that (nothing more is
// compiled, and it is said once).
func (e *exprBudget) take(size int) (msg string, over bool) {
	was := e.n > MaxExprs || e.bytes > MaxExprBytes
	e.n++
	e.bytes += size
	switch {
	case was:
		return "", true
	case e.n > MaxExprs:
		return fmt.Sprintf("more than %d expressions in one contract (a limit of contracts)", MaxExprs), true
	case e.bytes > MaxExprBytes:
		return fmt.Sprintf("expressions of one contract longer than %s together (a limit of contracts)", FormatSize(MaxExprBytes)), true
	}
	return "", false
}
