package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// exprUse is one compiled expression waiting for the identifier lint, which
// needs the whole contract (every step id and field) to be known.
type exprUse struct {
	c     *compiled
	pos   Pos
	scope scope
	stage *Stage // the stage a cell or action condition belongs to
	src   string // the cell's text as written, which pos points at
}

type scope int

const (
	scopeCell scope = iota
	scopeAction
	scopeEscalation
	scopeSnapshot      // a top-level Maintains key's Value
	scopeAgentSnapshot // a per-agent Maintains key's Value
)

// stageMeta and stepMeta keep attribute positions for the checks that run
// after the whole body is read.
type stageMeta struct {
	onPos, forEachPos Pos
}

type stepMeta struct {
	onPos, viaPos Pos
}

// bodyParser walks goldmark's block tree once, in document order.
type bodyParser struct {
	s     *source
	d     *diags
	c     *Contract
	cache *exprCache

	section   string // current H2, lower-cased
	h3        string // current H3 title, lower-cased
	stage     *Stage
	lastStep  *Step
	stepIDs   map[string]Pos
	stageIDs  map[string]Pos
	uses      []exprUse
	exprs     exprBudget           // what the contract's expressions cost so far
	keysOf    map[string]*itemKeys // by for_each list (itemKeys)
	secrets   map[string]bool      // the contract's secrets, once a reference asks
	fields    map[string]bool      // every health-row field in the contract
	stageMeta map[*Stage]*stageMeta
	stepMeta  map[*Step]*stepMeta
	schemaOK  bool
	// snapshotRows are the `Key | Value` rows, bound once the whole body
	// is read (bindSnapshotValues).
	snapshotRows []snapshotBinding
	// strayValues are the keys of `Key | Value` tables outside
	// `## Maintains`, one list per table.
	strayValues [][]snapshotBinding
}

func newBodyParser(s *source, d *diags, c *Contract, cache *exprCache) *bodyParser {
	return &bodyParser{
		s: s, d: d, c: c, cache: cache,
		stepIDs:   map[string]Pos{},
		stageIDs:  map[string]Pos{},
		fields:    map[string]bool{},
		stageMeta: map[*Stage]*stageMeta{},
		stepMeta:  map[*Step]*stepMeta{},
	}
}

// parse reads the body; body is the file with the front matter blanked out,
// so every goldmark offset is an offset into the original file.
func (b *bodyParser) parse(p parser.Parser, body []byte) {
	pc := parser.NewContext()
	closed := map[ast.Node]bool{}
	pc.Set(closedFencesKey, closed)
	doc := p.Parse(text.NewReader(body), parser.WithContext(pc))
	b.unclosedFences(doc, closed)
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		switch x := n.(type) {
		case *ast.Heading:
			b.heading(x)
		case *ast.FencedCodeBlock:
			b.fenced(x)
		case *extast.Table:
			b.table(x)
		case *ast.Paragraph:
			b.paragraph(x)
		case *rawParagraph:
			b.paragraph(x)
		case *ast.List:
			if b.section == "maintains" && b.h3 == "" {
				b.maintainsList(x)
			}
			b.nested(x)
		case *ast.Blockquote:
			b.nested(x)
		}
	}
}

// reportOnlyAgents are the agents of st that report_only_agents lists: its
// agent=, or in a for_each stage whose agent= reads an item key
// (agent=$name), the agents its items make.
func (b *bodyParser) reportOnlyAgents(st *Stage) []string {
	if st.ForEach == "" || !strings.Contains(st.Agent, "$") {
		if b.c.IsReportOnly(st.Agent) {
			return []string{st.Agent}
		}
		return nil
	}
	var out []string
	for _, item := range b.c.ForEach[st.ForEach] {
		if a := ExpandAttr(st.Agent, b.c.StageVars(item)); b.c.IsReportOnly(a) && !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// unclosedFences reports every fenced code block that no closing fence
// ends (closed holds the ones that one did): it runs to the end of the
// file, or of the list item or quote it is in, and everything there, the
// tables and steps below it included, is its text. The error is at the
// opening fence.
func (b *bodyParser) unclosedFences(doc ast.Node, closed map[ast.Node]bool) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		f, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		if !closed[f] {
			at := b.s.pos(f.Pos())
			fence := strings.TrimSpace(b.s.lineText(at.Line))
			if i := strings.IndexFunc(fence, func(r rune) bool { return r != '`' && r != '~' }); i >= 0 {
				fence = fence[:i]
			}
			where := "the end of the file"
			if _, top := f.Parent().(*ast.Document); !top {
				where = "the end of its list item or quote"
			}
			b.d.errorf(at, "code fence %s is never closed: everything to %s, tables and steps included, is read as its text (close it with a %s line)", fence, where, fence)
		}
		return ast.WalkSkipChildren, nil
	})
}

// nested reports steps and engine tables inside a list item or a quote:
// they would be read as prose, and a probe silently lost.
func (b *bodyParser) nested(container ast.Node) {
	_ = ast.Walk(container, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering || n == container {
			return ast.WalkContinue, nil
		}
		switch x := n.(type) {
		case *ast.FencedCodeBlock:
			if x.Info == nil {
				break
			}
			if _, _, _, ok := trailingAttrs(string(x.Info.Segment.Value(b.s.src))); ok {
				b.d.errorf(b.s.pos(x.Info.Segment.Start), "step block inside a list or quote is not read: move it to the top level of its stage")
			}
		case *extast.Table:
			if h := x.FirstChild(); h != nil {
				cells := b.rowCells(h)
				if len(cells) >= 2 {
					h0, h1 := headerName(cells[0].text), headerName(cells[1].text)
					if h0 == "field" || h1 == "action" && (h0 == "condition" || h0 == "aggregate") {
						b.d.errorf(cells[0].pos, "table inside a list or quote is not read: move it to the top level of its stage")
					}
				}
			}
		}
		return ast.WalkContinue, nil
	})
}

// blockLine returns the 1-based line a block node starts on.
func (b *bodyParser) blockLine(n ast.Node) int {
	if n.Lines().Len() > 0 {
		return b.s.pos(n.Lines().At(0).Start).Line
	}
	return b.s.pos(n.Pos()).Line
}

func (b *bodyParser) heading(h *ast.Heading) {
	line := b.blockLine(h)
	raw := b.s.lineText(line)
	lead := 0
	for lead < len(raw) && lead < 3 && raw[lead] == ' ' {
		lead++
	}
	if strings.HasPrefix(raw[lead:], "#") {
		for lead < len(raw) && raw[lead] == '#' {
			lead++
		}
		for lead < len(raw) && (raw[lead] == ' ' || raw[lead] == '\t') {
			lead++
		}
	} else {
		lead = 0
	}
	rest := raw[lead:]
	title, inner, innerOff, hasAttrs := trailingAttrs(rest)
	title = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(title), "#"))
	lineStart := b.s.lineStart(line)
	switch h.Level {
	case 1:
		b.section, b.h3, b.stage, b.lastStep = "", "", nil, nil
	case 2:
		b.section, b.h3, b.stage, b.lastStep = strings.ToLower(title), "", nil, nil
	case 3:
		b.h3, b.stage, b.lastStep = strings.ToLower(title), nil, nil
		if !hasAttrs {
			return
		}
		attrs, aerr := parseAttrs(inner, lineStart+lead+innerOff)
		if aerr != nil {
			b.d.errorf(b.s.pos(aerr.Off), "heading attributes: %s", aerr.Msg)
			return
		}
		if b.section != "execution" {
			b.d.errorf(b.s.pos(lineStart), "stage heading %q must be under ## Execution", title)
			return
		}
		b.newStage(title, attrs, b.s.pos(lineStart))
	default:
		// H4 and deeper are prose inside the current stage.
	}
}

var reStepID = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (b *bodyParser) newStage(title string, attrs []attr, at Pos) {
	st := &Stage{Title: title, Pos: at}
	meta := &stageMeta{}
	for _, a := range attrs {
		p := b.s.pos(a.Off)
		switch a.Key {
		case "id":
			st.ID = a.Value
		case "class":
			if a.Value == "gate" {
				st.Gate = true
			} else {
				b.d.errorf(p, "unknown stage class %q (only .gate)", "."+a.Value)
			}
		case "agent":
			st.Agent = a.Value
		case "on":
			st.On, meta.onPos = a.Value, p
		case "for_each":
			st.ForEach, meta.forEachPos = a.Value, p
		default:
			b.d.errorf(p, "unknown stage attribute %q (want #id, .gate, agent, on or for_each)", a.Key)
		}
	}
	if st.ID == "" {
		// Attributes without an id make a titled section, not a stage.
		b.d.errorf(at, "stage heading %q has attributes but no #id", title)
		return
	}
	if !reStepID.MatchString(st.ID) {
		b.d.errorf(at, "stage id %q must be letters, digits and _", st.ID)
	}
	if prev, dup := b.stageIDs[st.ID]; dup {
		b.d.errorf(at, "duplicate stage id %q (first at line %d)", st.ID, prev.Line)
	}
	b.stageIDs[st.ID] = at
	if st.On == "" {
		st.On = "local"
	}
	b.stage = st
	b.stageMeta[st] = meta
	b.c.Stages = append(b.c.Stages, st)
}

// textMap maps byte offsets of text assembled from a block's lines back to
// file offsets.
type textMap struct {
	text   string
	starts []int // text offset of each line
	files  []int // file offset of each line
}

func blockText(n ast.Node, src []byte) textMap {
	var tm textMap
	var buf bytes.Buffer
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		tm.starts = append(tm.starts, buf.Len())
		tm.files = append(tm.files, seg.Start)
		line := seg.Value(src)
		// Scripts saved with CRLF would hand bash a \r on every line.
		if n := len(line); n >= 2 && line[n-2] == '\r' && line[n-1] == '\n' {
			buf.Write(line[:n-2])
			buf.WriteByte('\n')
			continue
		}
		buf.Write(line)
	}
	tm.text = buf.String()
	return tm
}

func (tm textMap) fileOff(off int) int {
	if len(tm.starts) == 0 {
		return 0
	}
	// The last line that starts at or before off (the first, if none
	// does): a search, as a block may have as many lines as the file.
	i := max(sort.Search(len(tm.starts), func(j int) bool { return tm.starts[j] > off })-1, 0)
	return tm.files[i] + off - tm.starts[i]
}

var builtinNames = func() map[string]bool {
	m := map[string]bool{}
	for _, list := range [][]string{cellNames, actionNames, escalationNames} {
		for _, n := range list {
			m[n] = true
		}
	}
	return m
}()

func (b *bodyParser) fenced(f *ast.FencedCodeBlock) {
	if f.Info == nil {
		return
	}
	info := string(f.Info.Segment.Value(b.s.src))
	lang, inner, innerOff, hasAttrs := trailingAttrs(info)
	if !hasAttrs {
		if b.section == "maintains" && b.h3 == "per-agent snapshot schema" && !b.schemaOK && strings.TrimSpace(lang) == "json" {
			b.schemaOK = true
			b.agentSchema(f)
		}
		return
	}
	infoPos := b.s.pos(f.Info.Segment.Start)
	if b.stage == nil {
		if b.section == "execution" && b.h3 != "" {
			b.d.errorf(infoPos, "step block under heading %q, which has no {#id}: give the heading an id to make it a stage", b.h3)
		} else {
			b.d.errorf(infoPos, "step block outside a stage (steps belong under ## Execution, in an H3 with {#id})")
		}
		return
	}
	attrs, aerr := parseAttrs(inner, f.Info.Segment.Start+innerOff)
	if aerr != nil {
		b.d.errorf(b.s.pos(aerr.Off), "step attributes: %s", aerr.Msg)
		return
	}
	kind := strings.TrimSpace(lang)
	st := &Step{Kind: kind, Timeout: DefaultStepTimeout, Pos: infoPos}
	meta := &stepMeta{}
	switch kind {
	case KindBash, KindSh, KindHTTP, KindTCP:
	default:
		b.d.errorf(infoPos, "unknown step kind %q (want bash, sh, http or tcp)", kind)
	}
	for _, a := range attrs {
		p := b.s.pos(a.Off)
		switch a.Key {
		case "id":
			st.ID = a.Value
		case "timeout":
			d, err := ParseDuration(a.Value)
			if err != nil || d <= 0 {
				b.d.errorf(p, "timeout: expected a duration like 10s, got %q", a.Value)
			} else {
				st.Timeout = d
			}
		case "as":
			if a.Value != "json" && a.Value != "text" {
				b.d.errorf(p, "as: must be json or text, got %q", a.Value)
			} else if a.Value == "json" {
				st.As = "json"
			}
		case "on":
			st.On, meta.onPos = a.Value, p
			if kind == KindHTTP || kind == KindTCP {
				// The run probes http and tcp from the engine's host or
				// through via=; an on= would be shown and never used.
				b.d.errorf(p, "on applies only to bash and sh steps (an http or tcp step probes from the engine's host, or from an ssh target with via=)")
			}
		case "via":
			st.Via, meta.viaPos = a.Value, p
			if kind != KindHTTP && kind != KindTCP {
				b.d.errorf(p, "via applies only to http and tcp steps (use on= to run a script elsewhere)")
			}
		default:
			b.d.errorf(p, "unknown step attribute %q (want id, timeout, as, on or via)", a.Key)
		}
	}
	switch {
	case st.ID == "":
		b.d.errorf(infoPos, "step needs an id, like ```%s {id=name}", kind)
	case !reStepID.MatchString(st.ID):
		b.d.errorf(infoPos, "step id %q must be letters, digits and _ (it is used in expressions)", st.ID)
	case builtinNames[st.ID]:
		b.d.errorf(infoPos, "step id %q shadows the built-in name %s", st.ID, st.ID)
	default:
		if prev, dup := b.stepIDs[st.ID]; dup {
			b.d.errorf(infoPos, "duplicate step id %q (first at line %d)", st.ID, prev.Line)
		} else {
			b.stepIDs[st.ID] = infoPos
		}
	}
	if st.On == "" && (kind == KindBash || kind == KindSh) {
		st.On = b.stage.On
	}
	tm := blockText(f, b.s.src)
	st.Script = tm.text
	switch kind {
	case KindHTTP:
		st.HTTP = b.httpRequest(tm, infoPos)
	case KindTCP:
		// The address itself is checked once every value is known
		// (checkFilled), with the function the run fills it with.
		addr := strings.TrimSpace(tm.text)
		if addr == "" || strings.Contains(addr, "\n") {
			b.d.errorf(infoPos, "tcp step: the block must hold one host:port line")
		}
		st.Script = b.refs(addr, tm, strings.Index(tm.text, addr))
	}
	b.stepMeta[st] = meta
	b.stage.Steps = append(b.stage.Steps, st)
	b.lastStep = st
}

var httpMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// httpRequest reads `METHOD URL`, header lines, a blank line and the body.
func (b *bodyParser) httpRequest(tm textMap, at Pos) *HTTPRequest {
	req := &HTTPRequest{Method: "GET", Headers: map[string]string{}}
	lines := strings.SplitAfter(tm.text, "\n")
	off := 0
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		off += len(lines[i])
		i++
	}
	if i >= len(lines) {
		b.d.errorf(at, "http step: the block must start with METHOD URL")
		return req
	}
	first := strings.TrimRight(lines[i], "\r\n")
	fields := strings.Fields(first)
	urlText := first
	switch {
	case len(fields) == 2 && httpMethods[fields[0]]:
		req.Method = fields[0]
		urlText = fields[1]
	case len(fields) == 1:
		urlText = fields[0]
	default:
		b.d.errorf(b.s.pos(tm.fileOff(off)), "http step: first line must be METHOD URL, got %q", first)
		return req
	}
	req.URL = b.refs(urlText, tm, off+strings.Index(first, urlText))
	if !strings.HasPrefix(req.URL, "http://") && !strings.HasPrefix(req.URL, "https://") && !strings.HasPrefix(req.URL, "${") {
		b.d.errorf(b.s.pos(tm.fileOff(off+strings.Index(first, urlText))), "http step: URL must start with http:// or https://, got %q", urlText)
	}
	off += len(lines[i])
	i++
	for ; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r\n")
		if strings.TrimSpace(l) == "" {
			off += len(lines[i])
			i++
			break
		}
		name, val, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(strings.TrimSpace(name), " \t") {
			b.d.errorf(b.s.pos(tm.fileOff(off)), "http step: expected a Header: value line, got %q", l)
		} else {
			v := strings.TrimSpace(val)
			req.Headers[strings.TrimSpace(name)] = b.refs(v, tm, off+strings.Index(l, v))
		}
		off += len(lines[i])
	}
	if i <= len(lines) {
		body := strings.Join(lines[min(i, len(lines)):], "")
		req.Body = b.refs(body, tm, off)
	}
	return req
}

var reDollarVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// refs checks the ${name} references in the text of a step or an action
// and leaves them as written: the engine fills them at run time, as data
// (see steps.Script and package fill), never by splicing text
// here. A name must be a var, a secret or, in a for_each stage, an item
// key; any other is an error at its column.
func (b *bodyParser) refs(s string, tm textMap, base int) string {
	return b.refsAt(s, false, func(off int) Pos { return b.s.pos(tm.fileOff(base + off)) })
}

// reShellExpansion is a POSIX parameter expansion with an operator:
// ${name:-default}, ${name-default}, ${name:=w}, ${name:?w}, ${name:+w},
// ${name%w}, ${name#w} and their doubled or colon-less forms.
var reShellExpansion = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(:?[-=?+]|%%?|##?)`)

// refsAt checks the ${…} references in s. In shell text (an action's
// command) a var is a shell variable assigned before the command, so the
// shell's own expansions of it (${unit:-web}) work there as in any
// script; an http or tcp step, filled by the engine, takes ${name} only.
func (b *bodyParser) refsAt(s string, shell bool, posOf func(off int) Pos) string {
	for _, m := range reDollarVar.FindAllStringSubmatchIndex(s, -1) {
		name := s[m[2]:m[3]]
		if e := reShellExpansion.FindStringSubmatch(name); e != nil {
			switch {
			case !shell:
				b.d.errorf(posOf(m[0]), "${%s}: an http or tcp step fills only ${name}, not shell expansions; give %s its default under vars", name, e[1])
			case !b.defined(e[1]):
				b.d.errorf(posOf(m[0]), "undefined var %q in ${%s}%s", e[1], name, b.varHint(e[1]))
			}
			continue
		}
		if !b.defined(name) {
			b.d.errorf(posOf(m[0]), "undefined var %q%s", name, b.varHint(name))
		}
	}
	return s
}

func (b *bodyParser) defined(name string) bool {
	if _, ok := b.c.Vars[name]; ok {
		return true
	}
	if b.secrets == nil {
		b.secrets = nameSet(b.c.Secrets) // every reference may ask
	}
	return b.secrets[name] || b.stage != nil && b.forEachKey(b.stage, strings.TrimPrefix(name, "item."))
}

// varHint ends an "undefined var" error: the defined name nearest to name
// when it is a likely typo (a var, a secret, or in a for_each stage an
// item key), else how to define it.
func (b *bodyParser) varHint(name string) string {
	known := append(sortedKeys(b.c.Vars), b.c.Secrets...)
	if b.stage != nil && b.stage.ForEach != "" {
		known = append(known, b.itemKeys(b.stage.ForEach).names...)
	}
	return hint(name, known, fmt.Sprintf(" (define it under vars, or pass --var %s=VALUE)", name))
}

// expandAt substitutes ${name} from the contract's vars in notifier
// options (a site, a URL), so an inventory can point alerts at another
// site along with everything else. Secrets and unknown names are left as
// written; unknown ones are an error at their column.
func (b *bodyParser) expandAt(s string, posOf func(off int) Pos) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return replaceAllIndex(reDollarVar, s, func(m []int) string {
		name := s[m[2]:m[3]]
		if v, ok := b.c.Vars[name]; ok {
			return v
		}
		if !b.defined(name) {
			b.d.errorf(posOf(m[0]), "undefined var %q%s", name, b.varHint(name))
		}
		return s[m[0]:m[1]]
	})
}

func replaceAllIndex(re *regexp.Regexp, s string, f func(m []int) string) string {
	var out strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		out.WriteString(s[last:m[0]])
		out.WriteString(f(m))
		last = m[1]
	}
	out.WriteString(s[last:])
	return out.String()
}

func (b *bodyParser) forEachKey(st *Stage, name string) bool {
	return st.ForEach != "" && b.itemKeys(st.ForEach).has[name]
}

// cell is one table cell's raw text and position.
type cell struct {
	text string
	pos  Pos
	off  int
}

func (b *bodyParser) rowCells(row ast.Node) []cell {
	var out []cell
	for c := row.FirstChild(); c != nil; c = c.NextSibling() {
		var ce cell
		if c.Lines().Len() > 0 {
			seg := c.Lines().At(0)
			ce.text = string(seg.Value(b.s.src))
			if strings.Contains(ce.text, `\|`) {
				ce.text = strings.ReplaceAll(ce.text, `\|`, "|")
			}
			ce.off = seg.Start
			ce.pos = b.s.pos(seg.Start)
		} else {
			ce.off = c.Pos()
			ce.pos = b.s.pos(c.Pos())
		}
		out = append(out, ce)
	}
	return out
}

func headerName(s string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(s), "`*_"))
}

func (b *bodyParser) table(t *extast.Table) {
	var header []cell
	var rows [][]cell
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		switch r.(type) {
		case *extast.TableHeader:
			header = b.rowCells(r)
		case *extast.TableRow:
			rows = append(rows, b.rowCells(r))
		}
	}
	if len(header) < 2 {
		return
	}
	h0, h1 := headerName(header[0].text), headerName(header[1].text)
	switch {
	case h0 == "field":
		b.healthTable(header, rows)
	case h0 == "condition" && h1 == "action":
		b.actionTable(header, rows)
	case h0 == "aggregate" && h1 == "action":
		b.escalationTable(header, rows)
	case h0 == "key" && h1 == "value" && b.section == "maintains":
		b.snapshotValues(header, rows)
	case h0 == "key" && h1 == "value":
		// Documentation, unless its keys say it was meant to fill the
		// snapshot (strayValues).
		var keys []snapshotBinding
		for _, row := range rows {
			if len(row) > 0 {
				keys = append(keys, snapshotBinding{name: unquoteTicks(row[0].text), keyPos: row[0].pos})
			}
		}
		b.strayValues = append(b.strayValues, keys)
	}
}

var severityColumns = map[string]Severity{
	"healthy":  SeverityHealthy,
	"degraded": SeverityDegraded,
	"warning":  SeverityDegraded,
	"critical": SeverityCritical,
}

func (b *bodyParser) healthTable(header []cell, rows [][]cell) {
	cols := make([]Severity, len(header))
	seen := map[Severity]bool{}
	bad := false
	for i, h := range header[1:] {
		sev, ok := severityColumns[headerName(h.text)]
		if !ok {
			b.d.errorf(h.pos, "unknown health column %q (want Healthy, Degraded, Warning or Critical)", strings.TrimSpace(h.text))
			bad = true
			continue
		}
		if seen[sev] {
			b.d.errorf(h.pos, "health column %q repeats the %s column", strings.TrimSpace(h.text), sev)
			bad = true
		}
		seen[sev] = true
		cols[i+1] = sev
	}
	if b.stage == nil || b.lastStep == nil {
		b.d.errorf(header[0].pos, "health table has no step before it in a stage")
		return
	}
	if bad {
		return
	}
	step := b.lastStep
	for _, row := range rows {
		if len(row) == 0 {
			continue
		}
		fieldCell, export, ok := b.fieldAttrs(row[0])
		if !ok {
			continue
		}
		field := unquoteTicks(fieldCell)
		if field == "" {
			b.d.errorf(row[0].pos, "health row needs a field name")
			continue
		}
		if !reIdent.MatchString(field) {
			b.d.errorf(row[0].pos, "field %q is not a field name (letters, digits, _ and dots)", field)
			continue
		}
		b.fields[fieldRoot(field)] = true
		hr := &HealthRow{Field: field, Pos: row[0].pos, Export: export}
		for i := 1; i < len(row) && i < len(cols); i++ {
			src := strings.TrimSpace(row[i].text)
			if src == "" {
				continue
			}
			exprText, err := b.cache.cell(src, field)
			if err != nil {
				b.d.errorf(row[i].pos, "%v", err)
				continue
			}
			comp := b.compile(exprText, false, src, row[i].pos)
			if comp == nil {
				continue
			}
			hr.Cells = append(hr.Cells, &Cell{
				Severity: cols[i],
				Source:   unquoteTicks(src),
				Expr:     exprText,
				Program:  comp.prog,
				Pos:      row[i].pos,
			})
			b.uses = append(b.uses, exprUse{c: comp, pos: row[i].pos, scope: scopeCell, stage: b.stage, src: row[i].text})
		}
		step.Health = append(step.Health, hr)
	}
}

// compile compiles exprText through the cache and reports an expr error at
// the offending token: when the expression is the cell's own backticked
// text, the column is the cell's column plus expr's; otherwise the cell's.
// Past the contract's expression budget (MaxExprs, MaxExprBytes) it
// compiles nothing more, and says so once, at the first expression over.
func (b *bodyParser) compile(exprText string, value bool, src string, at Pos) *compiled {
	// One over MaxExprSize costs nothing: Compile refuses it unread.
	if len(exprText) <= MaxExprSize {
		if msg, over := b.exprs.take(len(exprText)); over {
			if msg != "" {
				b.d.errorf(at, "%s", msg)
			}
			return nil
		}
	}
	comp := b.cache.get(exprText, value)
	if comp.err == nil {
		return comp
	}
	col, msg := exprErrorColumn(comp.err)
	p := at
	if col >= 0 {
		if inner, ok := wholeTicks(strings.TrimSpace(src)); ok && strings.TrimSpace(inner) == exprText {
			lead := strings.Index(src, inner) + (len(inner) - len(strings.TrimLeft(inner, " ")))
			p = offsetPos(at, src, lead)
			p.Col += col
		} else if strings.TrimSpace(src) == exprText {
			p = offsetPos(at, src, strings.Index(src, exprText))
			p.Col += col
		}
	}
	b.d.errorf(p, "expression %s: %s", quoteExpr(exprText), msg)
	return nil
}

var reExpected = regexp.MustCompile("^Expected:\\s*")
var reExpectedValue = regexp.MustCompile("^`([^`]*)`\\s*")
var reExpectedSep = regexp.MustCompile(`^(or|,|/)\s*`)

func (b *bodyParser) paragraph(p ast.Node) {
	if p.Lines().Len() == 0 {
		return
	}
	seg := p.Lines().At(0)
	if !bytes.HasPrefix(seg.Value(b.s.src), []byte("Expected:")) {
		return
	}
	line := string(seg.Value(b.s.src))
	m := reExpected.FindStringIndex(line)
	if m == nil {
		return
	}
	at := b.s.pos(seg.Start)
	if b.stage == nil || b.lastStep == nil {
		if b.section == "execution" {
			b.d.errorf(at, "Expected: has no step before it in a stage")
		}
		return
	}
	rest := line[m[1]:]
	off := m[1]
	var values []string
	var valuePos Pos
	for {
		vm := reExpectedValue.FindStringSubmatchIndex(rest)
		if vm == nil {
			break
		}
		if len(values) == 0 {
			valuePos = b.s.pos(seg.Start + off)
		}
		values = append(values, rest[vm[2]:vm[3]])
		off += vm[1]
		rest = rest[vm[1]:]
		sm := reExpectedSep.FindStringIndex(rest)
		if sm == nil {
			break
		}
		off += sm[1]
		rest = rest[sm[1]:]
	}
	if len(values) == 0 {
		// Prose that starts with "Expected:" stays prose; a bare value is
		// almost certainly a missing pair of backticks.
		words := strings.Fields(strings.TrimRight(line[m[1]:], ". "))
		if len(words) == 1 || len(words) > 0 && reNumber.MatchString(strings.TrimRight(words[0], ".,;")) {
			b.d.errorf(at, "Expected: write the value in backticks, like Expected: `%s`", strings.TrimRight(words[0], ".,;"))
		}
		return
	}
	step := b.lastStep
	field := "stdout"
	if step.Kind == KindHTTP {
		field = "http_status"
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	list := "[" + strings.Join(quoted, ", ") + "]"
	src := "`" + strings.Join(values, "` or `") + "`"
	hr := &HealthRow{Field: field, Pos: valuePos, Expected: true}
	for _, c := range []struct {
		sev  Severity
		expr string
	}{{SeverityHealthy, "it in " + list}, {SeverityCritical, "it not in " + list}} {
		comp := b.compile(c.expr, false, "", valuePos)
		if comp == nil {
			return
		}
		hr.Cells = append(hr.Cells, &Cell{Severity: c.sev, Source: src, Expr: c.expr, Program: comp.prog, Pos: valuePos})
	}
	step.Health = append(step.Health, hr)
}

var actionKeywords = []string{ActionLog, ActionAlert, ActionMonitor, ActionEscalate}

func firstWord(s string) string {
	s = strings.TrimSpace(s)
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
	if end < 0 {
		end = len(s)
	}
	return strings.ToLower(s[:end])
}

func (b *bodyParser) actionTable(header []cell, rows [][]cell) {
	if b.stage == nil {
		b.d.errorf(header[0].pos, "action table outside a stage (put it under the stage's H3)")
		return
	}
	guardCol, tierCol, msgCol := -1, -1, -1
	for i := 2; i < len(header); i++ {
		switch headerName(header[i].text) {
		case "guards":
			guardCol = i
		case "tier":
			tierCol = i
		case "message":
			msgCol = i
		default:
			b.d.errorf(header[i].pos, "unknown action-table column %q (want Guards, Tier or Message)", strings.TrimSpace(header[i].text))
		}
	}
	st := b.stage
	if ro := b.reportOnlyAgents(st); len(ro) > 0 && len(rows) > 0 {
		// A deliberate choice, said once by lint: a note, which --strict
		// passes and no other command prints.
		b.d.notef(header[0].pos, "actions for report-only %s %s are logged, never executed (report_only_agents)",
			plural(len(ro), "agent", "agents"), strings.Join(ro, ", "))
	}
	var prev *ActionRow
	for _, row := range rows {
		if len(row) < 2 {
			continue
		}
		cond := strings.TrimSpace(row[0].text)
		ar := &ActionRow{Condition: unquoteTicks(cond), On: st.On, Pos: row[0].pos}
		exprText, err := b.cache.condition(cond)
		ok := true
		if err != nil {
			b.d.errorf(row[0].pos, "%v", err)
			ok = false
		} else if comp := b.compile(exprText, false, cond, row[0].pos); comp != nil {
			ar.Expr, ar.Program = exprText, comp.prog
			ar.CallsRestarts = comp.calls("restarts")
			ar.Reads = comp.reads
			b.uses = append(b.uses, exprUse{c: comp, pos: row[0].pos, scope: scopeAction, stage: st, src: row[0].text})
		} else {
			ok = false
		}
		if !b.action(ar, row[1], prev) {
			ok = false
		}
		if guardCol >= 0 && guardCol < len(row) {
			b.actionGuards(ar, row[guardCol], st)
		}
		if msgCol >= 0 && msgCol < len(row) {
			if text := unquoteTicks(strings.TrimSpace(row[msgCol].text)); text != "" {
				t, err := parseMessage("message", text)
				if err != nil {
					b.d.errorf(row[msgCol].pos, "%v", err)
					ok = false
				}
				ar.Template = t
			}
		}
		if tierCol >= 0 && tierCol < len(row) {
			if t := strings.TrimSpace(row[tierCol].text); t != "" {
				n, err := strconv.Atoi(unquoteTicks(t))
				if err != nil || n < 1 {
					b.d.errorf(row[tierCol].pos, "tier: expected a whole number of at least 1, got %q", t)
				} else {
					ar.Tier = n
				}
			}
		}
		if ok {
			st.Actions = append(st.Actions, ar)
		}
		prev = ar
	}
}

// isSameAsAbove matches "Same as above", any case, with trailing punctuation.
func isSameAsAbove(s string) bool {
	const phrase = "same as above"
	if len(s) < len(phrase) || !strings.EqualFold(s[:len(phrase)], phrase) {
		return false
	}
	return strings.Trim(s[len(phrase):], " .!;:—-") == ""
}

// action reads the Action cell: a backticked literal command, a built-in
// (log, alert, monitor, escalate; the whole text is the message), or "Same as
// above".
func (b *bodyParser) action(ar *ActionRow, c cell, prev *ActionRow) bool {
	text := strings.TrimSpace(c.text)
	if text == "" {
		b.d.errorf(c.pos, "empty action (want a `command`, log, alert, monitor or escalate)")
		return false
	}
	if isSameAsAbove(text) {
		if prev == nil {
			b.d.errorf(c.pos, "%q has no row above it", text)
			return false
		}
		if prev.Action == "" {
			b.d.errorf(c.pos, "%q: the row above has no valid action to copy", text)
			return false
		}
		ar.Action, ar.Builtin, ar.Message = prev.Action, prev.Builtin, prev.Message
		return true
	}
	if cmd, ok := wholeTicks(text); ok {
		cmd = strings.TrimSpace(cmd)
		lead := strings.Index(c.text, cmd)
		posOf := func(off int) Pos { return offsetPos(c.pos, c.text, lead+off) }
		ar.Action = b.refsAt(cmd, true, posOf)
		for _, off := range singleQuotedRefs(cmd) {
			b.d.warnf(posOf(off), "%s is inside single quotes, where the shell does not expand it (a var is passed as a shell variable); use double quotes", cmd[off:off+strings.IndexByte(cmd[off:], '}')+1])
		}
		return true
	}
	if w := firstWord(text); contains(actionKeywords, w) {
		ar.Action, ar.Builtin, ar.Message = w, w, strings.ReplaceAll(text, "`", "")
		return true
	}
	b.d.errorf(c.pos, "unknown action %q (want a `command` in backticks, or text starting with log, alert, monitor or escalate)", text)
	return false
}

// fieldAttrs splits a health row's field cell into the field and its
// attributes: “ `used_pct` {export=true} “ exports the field's numeric
// value as a metric and as Nagios perfdata. It reports false, with a
// diagnostic, for an attribute it does not know.
func (b *bodyParser) fieldAttrs(c cell) (string, bool, bool) {
	text := strings.TrimSpace(c.text)
	if !strings.HasSuffix(text, "}") {
		return c.text, false, true
	}
	open := strings.LastIndex(text, "{")
	if open < 0 {
		return c.text, false, true
	}
	inner := text[open+1 : len(text)-1]
	base := c.off + strings.Index(c.text, text) + open + 1
	attrs, aerr := parseAttrs(inner, base)
	if aerr != nil {
		b.d.errorf(b.s.pos(aerr.Off), "field attributes: %s", aerr.Msg)
		return "", false, false
	}
	export := false
	for _, a := range attrs {
		switch {
		case a.Key == "export" && (a.Value == "true" || a.Value == "false"):
			export = a.Value == "true"
		case a.Key == "export":
			b.d.errorf(b.s.pos(a.Off), "field attributes: export is true or false, got %q", a.Value)
			return "", false, false
		default:
			b.d.errorf(b.s.pos(a.Off), "field attributes: unknown attribute %q (want export=true)", a.Key)
			return "", false, false
		}
	}
	return strings.TrimSpace(text[:open]), export, true
}

func (b *bodyParser) actionGuards(ar *ActionRow, c cell, st *Stage) {
	text := unquoteTicks(c.text)
	if text == "" {
		return
	}
	base := c.off + strings.Index(c.text, text)
	attrs, aerr := parseAttrs(text, base)
	if aerr != nil {
		b.d.errorf(b.s.pos(aerr.Off), "guards: %s", aerr.Msg)
		return
	}
	for _, a := range attrs {
		p := b.s.pos(a.Off)
		switch a.Key {
		case "after", "escalate_after":
			n, err := strconv.Atoi(a.Value)
			if err != nil || n < 1 {
				b.d.errorf(p, "guards: %s must be a whole number of at least 1, got %q", a.Key, a.Value)
				continue
			}
			if a.Key == "after" {
				ar.Guard.After = n
			} else {
				ar.Guard.EscalateAfter = n
			}
		case "budget":
			bud, err := parseBudget(a.Value)
			if err != nil {
				b.d.errorf(p, "guards: budget: %v", err)
				continue
			}
			ar.Guard.Budget = bud
		case "grace":
			d, err := ParseDuration(a.Value)
			if err != nil || d <= 0 {
				b.d.errorf(p, "guards: grace must be a duration like 30s, got %q", a.Value)
				continue
			}
			ar.Guard.Grace = d
		case "slow_retry":
			sr, err := parseSlowRetry(a.Value)
			if err != nil {
				b.d.errorf(p, "guards: slow_retry: %v", err)
				continue
			}
			ar.Guard.SlowRetry = sr
		case "restart_count":
			ar.Guard.RestartCount = a.Value
			valueOff := strings.Index(text[a.Off-base:], "=") + 1
			if comp := b.compile(a.Value, true, a.Value, offsetPos(p, text[a.Off-base:], valueOff)); comp != nil {
				ar.Guard.RestartCountProgram = comp.prog
				b.uses = append(b.uses, exprUse{c: comp, pos: p, scope: scopeAction, stage: st})
			}
		default:
			b.d.errorf(p, "guards: unknown guard %q (want after, budget, grace, escalate_after, slow_retry or restart_count)", a.Key)
		}
	}
}

var escalationKeywords = []string{"log", "alert", "relay", "recover", "escalate", "page"}

func (b *bodyParser) escalationTable(header []cell, rows [][]cell) {
	for i := 2; i < len(header); i++ {
		b.d.errorf(header[i].pos, "unknown escalation-table column %q", strings.TrimSpace(header[i].text))
	}
	for _, row := range rows {
		if len(row) < 2 {
			continue
		}
		cond := strings.TrimSpace(row[0].text)
		r := &EscalationRule{Condition: unquoteTicks(cond), Pos: row[0].pos}
		ok := true
		exprText, err := b.cache.condition(cond)
		if err != nil {
			b.d.errorf(row[0].pos, "%v", err)
			ok = false
		} else if comp := b.compile(exprText, false, cond, row[0].pos); comp != nil {
			r.Expr, r.Program = exprText, comp.prog
			b.uses = append(b.uses, exprUse{c: comp, pos: row[0].pos, scope: scopeEscalation, src: row[0].text})
		} else {
			ok = false
		}
		text := strings.TrimSpace(row[1].text)
		w := firstWord(text)
		if !contains(escalationKeywords, w) {
			b.d.errorf(row[1].pos, "unknown escalation action %q (want text starting with log, alert, relay, page, recover or escalate)", text)
			ok = false
		}
		r.Action, r.Message = w, strings.ReplaceAll(text, "`", "")
		if ok {
			b.c.Escalation = append(b.c.Escalation, r)
		}
	}
}

var (
	reMaintainsKey  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$`)
	reEnumValue     = regexp.MustCompile(`^"([^"]*)"\s*`)
	reEnumSep       = regexp.MustCompile(`^\|\s*`)
	reDocSep        = regexp.MustCompile(`^(—|–|--|-)\s*`)
	maintainedTypes = []string{"timestamp", "map", "bool", "int", "number", "string"}
)

func (b *bodyParser) maintainsList(l *ast.List) {
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		first := item.FirstChild()
		if first == nil || first.Lines().Len() == 0 {
			continue
		}
		seg := first.Lines().At(0)
		line := strings.TrimSpace(string(seg.Value(b.s.src)))
		at := b.s.pos(seg.Start)
		m := reMaintainsKey.FindStringSubmatchIndex(line)
		if m == nil {
			b.d.errorf(at, "Maintains bullet must read `key: type — doc`, got %q", line)
			continue
		}
		key := &MaintainedKey{Name: line[m[2]:m[3]], Pos: at}
		rest := line[m[4]:m[5]]
		typeOff := m[4]
		if strings.HasPrefix(rest, `"`) {
			key.Type = "enum"
			for {
				em := reEnumValue.FindStringSubmatchIndex(rest)
				if em == nil {
					break
				}
				key.Enum = append(key.Enum, rest[em[2]:em[3]])
				rest = rest[em[1]:]
				sm := reEnumSep.FindStringIndex(rest)
				if sm == nil {
					break
				}
				rest = rest[sm[1]:]
			}
		} else {
			word := firstWord(rest)
			if !contains(maintainedTypes, word) {
				b.d.errorf(offsetPos(at, line, typeOff), "unknown type %q for maintained key %s (want \"a\" | \"b\", timestamp, map, bool, int, number or string)", firstField(rest), key.Name)
				continue
			}
			key.Type = word
			rest = strings.TrimSpace(rest[len(word):])
		}
		if dm := reDocSep.FindStringIndex(rest); dm != nil {
			rest = rest[dm[1]:]
		}
		key.Doc = strings.TrimSpace(rest)
		b.c.Maintains.Keys = append(b.c.Maintains.Keys, key)
	}
}

// agentSchema reads the per-agent snapshot example: an object of agents, each
// an object of fields. It records each agent's keys with their example
// values, and the union of all agents' keys in order of first appearance,
// typed from the first non-null example value.
func (b *bodyParser) agentSchema(f *ast.FencedCodeBlock) {
	tm := blockText(f, b.s.src)
	dec := json.NewDecoder(strings.NewReader(tm.text))
	dec.UseNumber()
	fail := func(err error) {
		// A full decode gives the offset just past the offending byte.
		var probe any
		if derr := json.Unmarshal([]byte(tm.text), &probe); derr != nil {
			err = derr
		}
		off := int(dec.InputOffset())
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = int(se.Offset)
		}
		if off > 0 {
			off--
		}
		b.d.errorf(b.s.pos(tm.fileOff(off)), "per-agent snapshot schema: %v", err)
	}
	shape := func() {
		b.d.errorf(b.s.pos(tm.fileOff(0)), "per-agent snapshot schema: must be an object of agents, each an object of fields")
	}
	byName := map[string]*MaintainedKey{}
	var union []*MaintainedKey
	perAgent := map[string][]*MaintainedKey{}
	var agents []string
	agent := ""
	// setType types the agent's key and, if still untyped, the union's.
	setType := func(own, shared *MaintainedKey, typ string, example any) {
		own.Type, own.Example = typ, example
		if shared.Type == "" || shared.Type == "any" {
			shared.Type = typ
		}
	}
	// Walk tokens once: depth 1 holds agents, depth 2 their fields.
	depth := 0
	var shared, own *MaintainedKey // the field whose value comes next
	nested := 0                    // depth of a value object or list being skipped
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
			return
		}
		if nested > 0 {
			if d, ok := tok.(json.Delim); ok {
				if d == '{' || d == '[' {
					nested++
				} else {
					nested--
				}
			}
			continue
		}
		switch v := tok.(type) {
		case json.Delim:
			switch {
			case (v == '{' || v == '[') && own != nil:
				setType(own, shared, map[json.Delim]string{'{': "map", '[': "list"}[v], nil)
				shared, own, nested = nil, nil, 1
			case v == '{' && depth < 2:
				depth++
			case v == '}':
				depth--
			default:
				shape()
				return
			}
		case string:
			switch {
			case depth == 2 && own == nil:
				pos := b.s.pos(tm.fileOff(int(dec.InputOffset()) - len(v) - 2))
				k, ok := byName[v]
				if !ok {
					k = &MaintainedKey{Name: v, Pos: pos}
					byName[v] = k
					union = append(union, k)
				}
				shared, own = k, &MaintainedKey{Name: v, Pos: pos}
				perAgent[agent] = append(perAgent[agent], own)
			case own != nil:
				setType(own, shared, "string", v)
				shared, own = nil, nil
			case depth == 1:
				agent = v
				agents = append(agents, v)
			default:
				shape()
				return
			}
		default:
			if own == nil {
				shape()
				return
			}
			switch x := v.(type) {
			case nil:
				own.Type = "any"
				if shared.Type == "" {
					shared.Type = "any"
				}
			case bool:
				setType(own, shared, "bool", x)
			case json.Number:
				if strings.ContainsAny(string(x), ".eE") {
					f, _ := x.Float64()
					setType(own, shared, "number", f)
				} else {
					n, _ := x.Int64()
					setType(own, shared, "int", n)
				}
			}
			shared, own = nil, nil
		}
	}
	b.c.Maintains.Agent = append(b.c.Maintains.Agent, union...)
	b.c.Maintains.PerAgent = perAgent
	b.c.Maintains.Agents = agents
}

// snapshotValues reads a `Key | Value` table under `## Maintains`: for each
// key, the expression that fills it (see bindSnapshotValues).
func (b *bodyParser) snapshotValues(header []cell, rows [][]cell) {
	for i := 2; i < len(header); i++ {
		b.d.errorf(header[i].pos, "unknown snapshot-table column %q", strings.TrimSpace(header[i].text))
	}
	for _, row := range rows {
		if len(row) < 2 {
			continue
		}
		name := unquoteTicks(row[0].text)
		src := strings.TrimSpace(row[1].text)
		text := unquoteTicks(src)
		if text == "" {
			b.d.errorf(row[1].pos, "snapshot key %s needs a value expression", name)
			continue
		}
		b.snapshotRows = append(b.snapshotRows, snapshotBinding{name: name, text: text, src: src, keyPos: row[0].pos, valPos: row[1].pos})
	}
}
