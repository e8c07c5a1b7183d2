package contracts

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// The body's grammar: headings make sections and stages, fenced blocks
// with {…} attributes make steps, and ${name} references are checked where
// they are written. Tables are read in tables.go, the Maintains section in
// maintains.go.

// stageMeta and stepMeta keep attribute positions for the checks that run
// after the whole body is read.
type stageMeta struct {
	onPos, forEachPos Pos
}

type stepMeta struct {
	onPos, viaPos, fieldsPos, sudoPos Pos
}

// stepAttrs are the attributes a step block takes.
var stepAttrs = []string{"id", "timeout", "as", "fields", "on", "via", "sudo"}

// StepAttributes returns the attributes a step block takes, as lint
// knows them (```bash {id=… timeout=…}).
func StepAttributes() []string { return append([]string(nil), stepAttrs...) }

// stageAttrs are the key=value attributes a stage heading takes, besides
// its #id and .gate.
var stageAttrs = []string{"agent", "on", "for_each"}

// StageAttributes returns the key=value attributes a stage heading takes,
// as lint knows them (### Web {#web agent=… on=…}).
func StageAttributes() []string { return append([]string(nil), stageAttrs...) }

// bodyParser walks goldmark's block tree once, in document order.
type bodyParser struct {
	s     *source
	d     *diags
	c     *Contract
	cache *exprCache

	section  string // current H2, lower-cased
	h3       string // current H3 title, lower-cased
	stage    *Stage
	lastStep *Step
	stepIDs  map[string]Pos
	stageIDs map[string]Pos
	uses     []exprUse
	exprs    exprBudget              // what the contract's expressions cost so far
	keysOf   map[string]*itemKeys    // by for_each list (itemKeys)
	secrets  map[string]bool         // the contract's secrets, once a reference asks
	values   map[*Step]*stepValues   // what each step produces (valuesOf)
	examples []exampleBlock          // example outputs, bound to their steps once all are read
	varTypes map[string]reflect.Type // vars as the type checker sees them, by for_each list (varsType)
	// examplePos are the agents of the per-agent snapshot example, where
	// each is named.
	examplePos map[string]Pos
	stageMeta  map[*Stage]*stageMeta
	stepMeta   map[*Step]*stepMeta
	schemaOK   bool
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
				b.d.errorf(p, "unknown stage class %q (only .gate)%s", "."+a.Value, hint(a.Value, []string{"gate"}, ""))
			}
		case "agent":
			st.Agent = a.Value
		case "on":
			st.On, meta.onPos = a.Value, p
		case "for_each":
			st.ForEach, meta.forEachPos = a.Value, p
		default:
			b.d.errorf(p, "unknown stage attribute %q (want #id, .gate, agent, on or for_each)%s", a.Key, hint(a.Key, append([]string{"id"}, stageAttrs...), ""))
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
	if strings.TrimSpace(lang) == "json" && strings.HasPrefix(strings.TrimSpace(inner), "example=") {
		b.exampleBlock(f, inner, f.Info.Segment.Start+innerOff)
		return
	}
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
	k := stepKind(kind)
	if k == nil {
		b.d.errorf(infoPos, "%s", unknownStepKind(kind))
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
			switch {
			case k == nil:
			case len(k.As) == 0:
				b.d.errorf(p, "as: %s %s step has no as= forms (its values are fixed)", article(kind), kind)
			case k.asForm(a.Value) == nil:
				b.d.errorf(p, "as: %s %s step's output is read as %s, got %q%s", article(kind), kind, k.asNames(), a.Value, hint(a.Value, asFormNames(k), ""))
			default:
				st.As = a.Value
			}
		case "fields":
			fields, err := parseFields(a.Value)
			if err != nil {
				b.d.errorf(p, "%v", err)
			} else {
				st.Fields = fields
				meta.fieldsPos = p
			}
		case "on":
			st.On, meta.onPos = a.Value, p
			if isProbeKind(kind) {
				// The run probes http and tcp from the engine's host or
				// through via=; an on= would be shown and never used.
				b.d.errorf(p, "on applies only to %s steps (an %s step runs from the engine's host; %s steps probe from an ssh target with via=)", stepKindList(true, "and"), stepKindList(false, "or"), dialingKinds("and"))
			}
		case "via":
			st.Via, meta.viaPos = a.Value, p
			if k != nil && !k.Dials {
				b.d.errorf(p, "via applies only to %s steps (use on= to run a script elsewhere)", dialingKinds("and"))
			}
		case "sudo":
			meta.sudoPos = p
			switch {
			case a.Value != "true" && a.Value != "false":
				b.d.errorf(p, "sudo: must be true or false, got %q", a.Value)
			case !isExecKind(kind):
				b.d.errorf(p, "sudo applies only to %s steps (an %s step probes from the engine itself)", stepKindList(true, "and"), stepKindList(false, "or"))
			default:
				st.Sudo = a.Value == "true"
			}
		default:
			b.d.errorf(p, "unknown step attribute %q (want id, timeout, as, fields, on, via or sudo)%s", a.Key, hint(a.Key, stepAttrs, ""))
		}
	}
	switch {
	case st.ID == "":
		b.d.errorf(infoPos, "step needs an id, like ```%s {id=name}", kind)
	case !reStepID.MatchString(st.ID):
		b.d.errorf(infoPos, "step id %q must be letters, digits and _ (it is used in expressions)", st.ID)
	case reservedNames()[st.ID]:
		b.d.errorf(infoPos, "step id %q shadows the built-in name %s", st.ID, st.ID)
	default:
		if prev, dup := b.stepIDs[st.ID]; dup {
			b.d.errorf(infoPos, "duplicate step id %q (first at line %d)", st.ID, prev.Line)
		} else {
			b.stepIDs[st.ID] = infoPos
		}
	}
	if st.On == "" && isExecKind(kind) {
		st.On = b.stage.On
	}
	tm := blockText(f, b.s.src)
	st.Script = tm.text
	lead := len(st.Script) - len(strings.TrimLeft(st.Script, " \t\n"))
	st.CmdPos = b.s.pos(tm.fileOff(lead))
	if k != nil && k.Parse != nil {
		k.Parse(&StepBlock{Text: tm.text, b: b, tm: tm, at: infoPos}, st)
	}
	b.stepMeta[st] = meta
	b.stage.Steps = append(b.stage.Steps, st)
	b.lastStep = st
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
// script; a step the engine fills (http, tcp) takes ${name} only.
func (b *bodyParser) refsAt(s string, shell bool, posOf func(off int) Pos) string {
	for _, m := range reDollarVar.FindAllStringSubmatchIndex(s, -1) {
		name := s[m[2]:m[3]]
		if shell {
			if env, ok := strings.CutPrefix(name, "env."); ok {
				// The target's own environment (steps.Script reads it).
				if !reVarName.MatchString(env) {
					b.d.errorf(posOf(m[0]), "${%s}: %q is not an environment variable's name", name, env)
				}
				continue
			}
			if ReservedVarName(name) && !strings.HasPrefix(name, "CONTRACTD_") {
				continue // the shell's own (HOME, PWD, …): no var can take it
			}
		}
		if e := reShellExpansion.FindStringSubmatch(name); e != nil {
			switch {
			case !shell:
				b.d.errorf(posOf(m[0]), "${%s}: an %s step fills only ${name}, not shell expansions; give %s its default under vars", name, kindList(func(k *StepKind) bool { return k.Filled != nil }, "or"), e[1])
			case !b.defined(e[1]):
				b.d.errorf(posOf(m[0]), "undefined var %q in ${%s}%s", e[1], name, b.shellVarHint(e[1]))
			}
			continue
		}
		if !b.defined(name) {
			if shell {
				b.d.errorf(posOf(m[0]), "undefined var %q%s", name, b.shellVarHint(name))
			} else {
				b.d.errorf(posOf(m[0]), "undefined var %q%s", name, b.varHint(name))
			}
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
func (b *bodyParser) varHint(name string) didYouMean {
	return hint(name, b.varNames(), fmt.Sprintf(" (define it under vars, or pass --var %s=VALUE)", name))
}

// shellVarHint is varHint for a command, where the target's environment
// is a name too: ${env.NAME}.
func (b *bodyParser) shellVarHint(name string) didYouMean {
	return hint(name, b.varNames(), fmt.Sprintf(" (define it under vars, pass --var %s=VALUE, or write ${env.%s} for the target's environment variable)", name, name))
}

// varNames are the names a reference may take: vars, secrets and, in a
// for_each stage, its items' keys.
func (b *bodyParser) varNames() []string {
	known := append(sortedKeys(b.c.Vars), b.c.Secrets...)
	if b.stage != nil && b.stage.ForEach != "" {
		known = append(known, b.itemKeys(b.stage.ForEach).names...)
	}
	return known
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
