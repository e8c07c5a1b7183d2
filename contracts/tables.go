package contracts

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// The body's tables, each read by the first two header cells: health
// tables (Field | Healthy | …) and the Expected: line that is a one-row
// health table, action tables (Condition | Action | …) with their guards,
// and escalation tables (Aggregate | Action). Maintains' Key | Value
// tables are read in maintains.go.

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
	if b.nearMissHeader(header, h0, h1) {
		return
	}
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

// engineHeaders are the first header cells of the tables the engine
// reads, each with the second cells that make it one.
var engineHeaders = map[string][]string{
	"field":     {"healthy", "degraded", "warning", "critical"},
	"condition": {"action"},
	"aggregate": {"action"},
}

// headerHint is `: did you mean "Right"?` after a near-miss header
// cell's text, suggesting Right for its word.
func headerHint(text, right string) didYouMean {
	wrong := strings.TrimSpace(text)
	return suggest(wrong, right, fmt.Sprintf(": did you mean %q?", right))
}

// actionColumns are an action table's optional columns, as headerName
// reads them.
var actionColumns = []string{"guards", "tier", "message"}

// nearMissHeader reports a table whose header is one keystroke or two
// from a table the engine reads (`Feild | Healthy`, `Condition |
// Actoin`): as written it is prose, and judges or repairs nothing. It
// returns true when it reported one.
func (b *bodyParser) nearMissHeader(header []cell, h0, h1 string) bool {
	if want, ok := engineHeaders[h0]; ok {
		if h0 == "field" || contains(want, h1) {
			return false
		}
		if w := closest(h1, want); w != "" {
			b.d.errorf(header[1].pos, "table header %q%s As written the table is prose: the engine reads a %s table by its first two header cells",
				strings.TrimSpace(header[1].text), headerHint(header[1].text, titleWord(w)), titleWord(h0)+" | "+titleWord(want[0]))
			return true
		}
		return false
	}
	if b.section == "maintains" && h1 == "value" && h0 != "key" && closest(h0, []string{"key"}) != "" {
		b.d.errorf(header[0].pos, "table header %q%s As written the table is prose and fills no Maintains key", strings.TrimSpace(header[0].text), headerHint(header[0].text, "Key"))
		return true
	}
	w := closest(h0, sortedKeys(engineHeaders))
	if w == "" || len(h0) < 3 {
		return false
	}
	second := engineHeaders[w]
	if !contains(second, h1) && closest(h1, second) == "" {
		return false // another table that happens to start with a near word
	}
	b.d.errorf(header[0].pos, "table header %q%s As written the table is prose, so it judges or repairs nothing", strings.TrimSpace(header[0].text), headerHint(header[0].text, titleWord(w)))
	return true
}

// titleWord capitalises a header word as the docs write it.
func titleWord(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
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
			b.d.errorf(h.pos, "unknown health column %q (want Healthy, Degraded, Warning or Critical)%s", strings.TrimSpace(h.text),
				hint(headerName(h.text), sortedKeys(severityColumns), ""))
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
		if !reFieldPath.MatchString(field) {
			b.d.errorf(row[0].pos, "field %q is not a field name (letters, digits, _ and dots, a key that is not a name in brackets: perf[\"/\"].value)", field)
			continue
		}
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
			b.uses = append(b.uses, exprUse{c: comp, pos: row[i].pos, scope: scopeCell, stage: b.stage, step: step, row: hr, src: row[i].text})
		}
		step.Health = append(step.Health, hr)
	}
}

var reExpected = regexp.MustCompile("^Expected:\\s*")

var reExpectedValue = regexp.MustCompile("^`([^`]*)`\\s*")

var reExpectedSep = regexp.MustCompile(`^(or|,|/)\s*`)

func (b *bodyParser) paragraph(p ast.Node) {
	if p.Lines().Len() == 0 {
		return
	}
	b.brokenTable(p)
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
	var valueAt []Pos // each value's
	for {
		vm := reExpectedValue.FindStringSubmatchIndex(rest)
		if vm == nil {
			break
		}
		if len(values) == 0 {
			valuePos = b.s.pos(seg.Start + off)
		}
		values = append(values, rest[vm[2]:vm[3]])
		valueAt = append(valueAt, b.s.pos(seg.Start+off+vm[2]))
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
	if k := stepKind(step.Kind); k != nil && k.Expected != "" {
		field = k.Expected
		if words := k.Words[field]; words != nil {
			for i, v := range values {
				if !contains(words, v) {
					b.d.errorf(valueAt[i], "Expected: `%s`: %s is %s, never %q%s, so this never holds", v, field, joinWords(words, "or"), v, wordHint(v, words))
				}
			}
		}
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
			b.d.errorf(header[i].pos, "unknown action-table column %q (want Guards, Tier or Message)%s", strings.TrimSpace(header[i].text),
				hint(headerName(header[i].text), actionColumns, ""))
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
				} else if ar.Builtin == "" && !readsOutcome(t) {
					b.d.notef(row[msgCol].pos, "%s", outcomeNote)
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
		ar.CmdPos = posOf(0)
		for _, off := range singleQuotedRefs(cmd) {
			b.d.warnf(posOf(off), "%s is inside single quotes, where the shell does not expand it (a var is passed as a shell variable); use double quotes", cmd[off:off+strings.IndexByte(cmd[off:], '}')+1])
		}
		return true
	}
	if w := firstWord(text); contains(actionKeywords, w) {
		ar.Action, ar.Builtin, ar.Message = w, w, strings.ReplaceAll(text, "`", "")
		return true
	}
	b.d.errorf(c.pos, "unknown action %q (want a `command` in backticks, or text starting with log, alert, monitor or escalate)%s", text, hint(firstWord(text), actionKeywords, ""))
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
		switch g := guardSetting(a.Key); {
		case g == nil || !g.Row:
			keys := rowGuardKeys()
			b.d.errorf(p, "guards: unknown guard %q (want %s)%s", a.Key, joinWords(keys, "or"), hint(a.Key, keys, ""))
		case a.Key == "timeout":
			d, err := ParseDuration(a.Value)
			switch {
			case err != nil || d <= 0:
				b.d.errorf(p, "guards: timeout must be a duration like 60s, got %q", a.Value)
			case ar.Builtin != "":
				b.d.errorf(p, "guards: timeout bounds a command; the built-in action %s runs none", ar.Builtin)
			default:
				ar.Timeout = d
			}
		case a.Key == "restart_count":
			ar.Guard.RestartCount = a.Value
			valueOff := strings.Index(text[a.Off-base:], "=") + 1
			if comp := b.compile(a.Value, true, a.Value, offsetPos(p, text[a.Off-base:], valueOff)); comp != nil {
				ar.Guard.RestartCountProgram = comp.prog
				b.uses = append(b.uses, exprUse{c: comp, pos: p, scope: scopeAction, stage: st})
			}
		default:
			if err := g.rowGuard(ar, a.Value); err != nil {
				b.d.errorf(p, "guards: %s: %v", a.Key, err)
			}
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
			b.d.errorf(row[1].pos, "unknown escalation action %q (want text starting with log, alert, relay, page, recover or escalate)%s", text, hint(w, escalationKeywords, ""))
			ok = false
		}
		r.Action, r.Message = w, strings.ReplaceAll(text, "`", "")
		if ok {
			b.c.Escalation = append(b.c.Escalation, r)
		}
	}
}

// reDelimiterRow is a table's delimiter row: cells of dashes, each with an
// optional colon at either end, between pipes.
var reDelimiterRow = regexp.MustCompile(`^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$`)

// brokenTable reports a table Markdown does not make because its
// delimiter row has a column more or fewer than its header: every reader
// sees a paragraph of pipes, and the engine a table it never reads. For a
// header the engine reads (Field, Condition, Aggregate, or a near miss)
// that is an error; for any other table a warning, since a person reading
// the runbook sees the pipes too.
func (b *bodyParser) brokenTable(p ast.Node) {
	lines := p.Lines()
	for i := 1; i < lines.Len(); i++ {
		dseg := lines.At(i)
		delim := string(dseg.Value(b.s.src))
		if !reDelimiterRow.MatchString(delim) || !strings.Contains(delim, "|") {
			continue
		}
		seg := lines.At(i - 1)
		head := string(seg.Value(b.s.src))
		if !strings.Contains(head, "|") {
			continue
		}
		hc, dc := tableCells(head), tableCells(delim)
		if len(hc) == len(dc) {
			continue
		}
		at := b.s.pos(dseg.Start)
		h0 := headerName(hc[0])
		msg := fmt.Sprintf("table delimiter row has %d %s and its header %d, so Markdown reads the table as a paragraph (did you mean %q?)",
			len(dc), plural(len(dc), "column", "columns"), len(hc), "|"+strings.Repeat("---|", len(hc)))
		_, engine := engineHeaders[h0]
		if engine || closest(h0, sortedKeys(engineHeaders)) != "" || h0 == "key" {
			b.d.errorf(at, "%s; as written this %s table judges or repairs nothing", msg, titleWord(strings.TrimSpace(hc[0])))
		} else {
			b.d.warnf(at, "%s", msg)
		}
		return
	}
}

// tableCells splits a table line into its cells, as GFM does: an
// unescaped pipe separates them, and a leading or trailing one is not a
// cell of its own.
func tableCells(line string) []string {
	s := strings.TrimSpace(line)
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			cells = append(cells, s[start:i])
			start = i + 1
		}
	}
	return append(cells, s[start:])
}
