package lsp

import (
	"regexp"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/contractd/contractd/contracts"
)

// place is where a cursor is in a contract, as hover, completion and
// definition read it: in the front matter (the keys around it) or in the
// body (the stage, step and table it is in, an attribute or ${…} it is
// writing). It is worked out from the text of the lines around the
// cursor and the draft's positions, anew for each request.
type place struct {
	d      *document
	line   int    // 0-based
	off    int    // byte offset in text
	text   string // the line
	before string // the line up to the cursor
	word   string // the word at the cursor
	start  int    // where the word starts

	front bool
	// keys are the front-matter keys enclosing the cursor, outermost
	// first (a list's items are passed through); onKey says the cursor
	// is on a key, or where one goes, rather than on a value.
	keys  []string
	onKey bool

	stage *contracts.Stage
	step  *contracts.Step // the step whose block or table the cursor is in
	// table is the first header cell of the table the cursor is in
	// ("field", "condition", "aggregate"), "" outside one; column the
	// cell (0-based).
	table  string
	column int
	// ref is the text after an unclosed ${ before the cursor; inRef
	// says there is one.
	ref   string
	inRef bool
	// attr is the attribute being written in a fence's or a heading's
	// {…} (a key, or the key whose value it is: attrValue); inAttrs says
	// the cursor is inside the braces.
	attr      string
	attrValue bool
	inAttrs   bool
	fence     bool
}

// placeAt works out where p is in d.
func placeAt(d *document, p protocol.Position) *place {
	line, off := d.cursor(p)
	pl := &place{d: d, line: line, off: off, text: d.line(line)}
	pl.before = pl.text[:off]
	pl.word, pl.start = wordAt(pl.text, off)
	if i := strings.LastIndex(pl.before, "${"); i >= 0 && !strings.Contains(pl.before[i:], "}") {
		pl.inRef, pl.ref = true, pl.before[i+2:]
	}
	if first, last, ok := d.frontLines(); ok && line >= first && line <= last {
		pl.front = true
		pl.keys, pl.onKey = frontKeys(d, line, off, first)
		return pl
	}
	if c := d.draft; c != nil {
		for _, st := range c.Stages {
			if st.Pos.Line-1 <= line {
				pl.stage = st
			}
		}
		if pl.stage != nil {
			for _, s := range pl.stage.Steps {
				if s.Pos.Line-1 <= line {
					pl.step = s
				}
			}
		}
	}
	trimmed := strings.TrimSpace(pl.text)
	switch {
	case strings.HasPrefix(trimmed, "|"):
		pl.tableAt()
	case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
		pl.fence = true
		pl.attrsAt()
	case strings.HasPrefix(trimmed, "#"):
		pl.attrsAt()
	}
	return pl
}

// frontLines are the 0-based lines of the front matter's YAML.
func (d *document) frontLines() (first, last int, ok bool) {
	yaml, line, ok := contracts.FrontMatterText(d.text)
	if !ok {
		return 0, 0, false
	}
	n := strings.Count(string(yaml), "\n")
	return line - 1, line - 2 + n, true
}

var (
	reLineKey   = regexp.MustCompile(`^(\s*)(?:-\s+)?([A-Za-z0-9_.-]+)\s*:`)
	reFlowKey   = regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*:\s*$`)
	reFlowValue = regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*:\s*[^,{}\[\]:]*$`)
	reKeySoFar  = regexp.MustCompile(`(?:^|[{,])\s*(?:-\s+)?[A-Za-z0-9_.-]*$`)
)

// frontKeys returns the keys that enclose byte off of a front-matter line:
// the block keys above it with less indentation, its own key when the
// cursor is past it, and the keys of the flow mappings ({…}) open before
// the cursor. onKey says the cursor is on a key, or where a key goes.
func frontKeys(d *document, line, off, first int) (keys []string, onKey bool) {
	text := d.line(line)
	indent := len(text) - len(strings.TrimLeft(text, " "))
	if rest := strings.TrimLeft(text, " "); strings.HasPrefix(rest, "- ") {
		indent += 2
	}
	var parents []string
	want := indent
	for l := line - 1; l >= first && want > 0; l-- {
		m := reLineKey.FindStringSubmatch(d.line(l))
		if m == nil {
			continue
		}
		if in := len(m[1]); in < want {
			parents = append([]string{m[2]}, parents...)
			want = in
		}
	}
	keys = parents
	before := text[:off]
	// The flow mappings open before the cursor, and the key each is the
	// value of.
	var stack []string
	var lists []bool // for each open bracket: is it a list's
	last := 0
	for i := 0; i < len(before); i++ {
		switch before[i] {
		case '{', '[':
			key := ""
			if m := reFlowKey.FindStringSubmatch(before[last:i]); m != nil {
				key = m[1]
			}
			if before[i] == '[' {
				key = "" // a list: its items are passed through
			}
			stack = append(stack, key)
			lists = append(lists, before[i] == '[')
			last = i + 1
		case '}', ']':
			if len(stack) > 0 {
				stack, lists = stack[:len(stack)-1], lists[:len(lists)-1]
			}
			last = i + 1
		case ',':
			last = i + 1
		}
	}
	if m := reLineKey.FindStringSubmatchIndex(text); m != nil && off > m[1]-1 && len(stack) == 0 {
		// The value of the line's own key (inside a flow mapping, the
		// stack names it).
		keys = append(keys, text[m[4]:m[5]])
	}
	for _, k := range stack {
		if k != "" {
			keys = append(keys, k)
		}
	}
	inList := len(lists) > 0 && lists[len(lists)-1]
	onKey = !inList && reKeySoFar.MatchString(before[last:])
	if m := reFlowValue.FindStringSubmatch(before[last:]); m != nil && len(stack) > 0 && !onKey {
		keys = append(keys, m[1]) // the value of a key in a flow mapping
	}
	return keys, onKey
}

// tableAt finds the table the cursor's row belongs to: its header is the
// first of the row lines above, its kind the header's first cell.
func (pl *place) tableAt() {
	header := pl.line
	for header > 0 && strings.HasPrefix(strings.TrimSpace(pl.d.line(header-1)), "|") {
		header--
	}
	cells := strings.Split(strings.Trim(strings.TrimSpace(pl.d.line(header)), "|"), "|")
	if len(cells) > 0 {
		pl.table = strings.ToLower(strings.Trim(strings.TrimSpace(cells[0]), "`*"))
	}
	pl.column = strings.Count(strings.TrimLeft(pl.before, " "), "|") - 1
}

// attrsAt finds the attribute being written in a fence's or a heading's
// {…} before the cursor.
func (pl *place) attrsAt() {
	open := strings.LastIndex(pl.before, "{")
	if open < 0 || strings.Contains(pl.before[open:], "}") {
		return
	}
	pl.inAttrs = true
	inner := pl.before[open+1:]
	fields := strings.Fields(inner)
	cur := ""
	if len(fields) > 0 && !strings.HasSuffix(inner, " ") {
		cur = fields[len(fields)-1]
	}
	if k, _, ok := strings.Cut(cur, "="); ok {
		pl.attr, pl.attrValue = k, true
		return
	}
	pl.attr = cur
}
