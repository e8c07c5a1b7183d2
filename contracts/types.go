package contracts

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/parser/lexer"
)

// Types are checked where lint knows them: an expression is checked once
// more, by expr's own checker, against an environment whose names have
// the types the steps declare (StepKind.Values, fields=, an example
// block), so `it < "7"` on a number, `len(it)` on a number, or `== 200` on
// a string (`http_status`, a probe's `stdout`) is an error at load rather
// than a cell that never holds. The programs the run evaluates stay
// compiled without these types: a JSON number is an int or a float as it
// comes, and the checker's types only say what a value may be.

// goType is the Go type expr's checker is given for a value of type t; nil
// for TypeAny, which the checker leaves unchecked.
func goType(t Type) reflect.Type {
	switch t {
	case TypeString:
		return reflect.TypeFor[string]()
	case TypeInt:
		return reflect.TypeFor[int]()
	case TypeFloat:
		return reflect.TypeFor[float64]()
	case TypeBool:
		return reflect.TypeFor[bool]()
	case TypeList:
		return reflect.TypeFor[[]any]()
	case TypeMap:
		return reflect.TypeFor[map[string]any]()
	}
	return nil
}

var anyType = reflect.TypeFor[any]()

// structOf builds a struct type whose fields are named (expr:"name") and
// typed as given; a field declared with fields below it (`result.status`)
// is a struct of those. An open value set (undeclared JSON) is a map,
// which expr does not check; a map declared with Any below it is a map
// of its entries' type.
func structOf(types map[string]Type, prefix string, open bool) reflect.Type {
	if open {
		return reflect.TypeFor[map[string]any]()
	}
	var names []string
	for n := range types {
		rest, ok := strings.CutPrefix(n, prefix)
		if ok && rest != "" && !strings.Contains(rest, ".") {
			names = append(names, rest)
		}
	}
	sort.Strings(names)
	if len(names) == 1 && names[0] == Any {
		return reflect.MapOf(reflect.TypeFor[string](), typeAt(types, prefix+Any))
	}
	fields := make([]reflect.StructField, 0, len(names))
	for i, n := range names {
		t := typeAt(types, prefix+n)
		fields = append(fields, reflect.StructField{
			Name: "F" + strconv.Itoa(i), Type: t, Tag: reflect.StructTag(`expr:"` + n + `"`),
		})
	}
	return reflect.StructOf(fields)
}

// typeAt is the checker's type of the declared name n: a struct (or a
// map) of what is declared below it, else its own type; any when that
// is TypeAny.
func typeAt(types map[string]Type, n string) reflect.Type {
	t := goType(types[n])
	if hasChildren(types, n+".") {
		t = structOf(types, n+".", false)
	}
	if t == nil {
		t = anyType
	}
	return t
}

func hasChildren(types map[string]Type, prefix string) bool {
	for n := range types {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// typeOf returns the Go type of step sv's value (or the path of parts
// below it) for the checker: a struct when fields are declared below it;
// nil when lint does not know it.
func (sv *stepValues) typeOf(parts ...string) reflect.Type {
	name, ok := sv.declaredPath(parts)
	if !ok {
		return nil
	}
	if hasChildren(sv.types, name+".") {
		return structOf(sv.types, name+".", false)
	}
	return goType(sv.types[name])
}

// typeName is the declared type of the path of parts, TypeAny when lint
// does not know it.
func (sv *stepValues) typeName(parts []string) Type {
	if name, ok := sv.declaredPath(parts); ok {
		return sv.types[name]
	}
	return TypeAny
}

// stepType is the type of a step read by its id: a struct of its values.
func (sv *stepValues) stepType() reflect.Type {
	if sv.asStruct == nil {
		sv.asStruct = structOf(sv.types, "", sv.open)
	}
	return sv.asStruct
}

// typeEnv is the checker's environment for an expression: a zero value of
// the type of each name it reads whose type lint knows, and a signature
// that tells two environments apart.
type typeEnv struct {
	env map[string]any
	sig []string
}

func (e *typeEnv) set(name string, t reflect.Type) {
	if t == nil {
		return
	}
	e.env[name] = reflect.Zero(t).Interface()
	e.sig = append(e.sig, name+"="+t.String())
}

// typedEnv builds the environment u is checked in, with it typed as it.
func (b *bodyParser) typedEnv(u exprUse, v *view, it reflect.Type) *typeEnv {
	e := &typeEnv{env: map[string]any{}}
	for _, id := range u.c.idents {
		if id.Call {
			continue
		}
		switch n := id.Name; {
		case n == "it":
			e.set(n, it)
		case u.scope == scopeEscalation:
			e.set(n, escalationTypes[n])
		case n == "severity" && u.scope != scopeCell:
			e.set(n, reflect.TypeFor[string]())
		case n == "vars":
			e.set(n, b.varsType(u.stage))
		case scopeNames[u.scope][n]:
			// state, item: maps of what the run has; unchecked.
		case v != nil:
			if sv, ok := v.ids[n]; ok {
				e.set(n, sv.stepType())
				continue
			}
			for _, sv := range v.top {
				if t := sv.typeOf(n); t != nil {
					e.set(n, t)
					break
				}
			}
		}
	}
	sort.Strings(e.sig)
	return e
}

// escalationTypes are the types of the escalation table's names.
var escalationTypes = map[string]reflect.Type{
	"critical_count": reflect.TypeFor[int](), "degraded_count": reflect.TypeFor[int](),
	"unreachable_count": reflect.TypeFor[int](), "healthy_count": reflect.TypeFor[int](),
	"unknown_count": reflect.TypeFor[int](), "suppressed_count": reflect.TypeFor[int](), "agents": reflect.TypeFor[int](),
	"gate_ok": reflect.TypeFor[bool](), "critical_agents": reflect.TypeFor[[]string](),
}

// varsType is `vars` as the checker sees it: each var typed as declared
// (VarValues) and, in a for_each stage, each item key unchecked. It is
// built once per contract and stage list.
func (b *bodyParser) varsType(st *Stage) reflect.Type {
	key := ""
	if st != nil {
		key = st.ForEach
	}
	if t, ok := b.varTypes[key]; ok {
		return t
	}
	types := map[string]Type{}
	for k, v := range b.c.VarValues {
		types[k] = jsonType(v)
		if _, isInt := v.(int); isInt {
			types[k] = TypeInt
		}
	}
	if key != "" {
		for _, k := range b.itemKeys(key).names {
			types[k] = TypeAny
		}
	}
	t := structOf(types, "", false)
	if b.varTypes == nil {
		b.varTypes = map[string]reflect.Type{}
	}
	b.varTypes[key] = t
	return t
}

// typeChecks caches the checker's verdicts by expression and environment:
// contracts loaded together share their tables.
type typeChecks struct {
	mu sync.Mutex
	m  map[string]error
}

// check runs expr's checker over text in env: nil, or expr's error.
func (c *exprCache) check(text string, e *typeEnv, asBool bool) error {
	key := text + "\x00" + strings.Join(e.sig, "\x00")
	c.types.mu.Lock()
	err, ok := c.types.m[key]
	c.types.mu.Unlock()
	if ok {
		return err
	}
	env := declaredEnv()
	for k, v := range e.env {
		env[k] = v
	}
	cfg := conf.CreateNew()
	opts := []expr.Option{expr.Env(env), expr.AllowUndefinedVariables()}
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	for _, op := range opts {
		op(cfg)
	}
	cfg.Check()
	_, err = checker.ParseCheck(text, cfg)
	c.types.mu.Lock()
	if c.types.m == nil {
		c.types.m = map[string]error{}
	}
	c.types.m[key] = err
	c.types.mu.Unlock()
	return err
}

// lintTypes checks u's expression with the types its names have. A cell
// over a string field may compare it by order with a number: the run
// reads a number in the string as that number (steps.EvaluateRow), so the
// check is tried again with it as a number, and only an ordering may
// differ.
func (b *bodyParser) lintTypes(u exprUse, v *view) {
	if u.c.text == "" {
		return
	}
	var it reflect.Type
	itType := TypeAny
	if u.scope == scopeCell && u.row != nil && v != nil {
		it, itType = v.fieldType(u.row.Field)
	}
	err := b.cache.check(u.c.text, b.typedEnv(u, v, it), !u.c.value)
	if err != nil && itType == TypeString && isOrdering(err) {
		if b.cache.check(u.c.text, b.typedEnv(u, v, reflect.TypeFor[float64]()), !u.c.value) == nil {
			err = nil
		}
	}
	if err != nil {
		col, msg := exprErrorColumn(err)
		msg = firstLine(msg)
		if fix := b.typeFix(u, v, it, msg); fix != "" {
			msg += fmt.Sprintf(" (did you mean `%s`?)", fix)
		} else if u.scope == scopeCell && u.row != nil && strings.Contains(msg, "mismatched types string and") {
			msg += fmt.Sprintf(" (%s is a string: quote the value, as \"200\", or compare a number with int(it))", u.row.Field)
		}
		b.d.errorf(b.exprPos(u, u.c.text, col), "expression %s: %s", quoteExpr(u.c.text), msg)
	}
	b.lintComparisons(u, v)
}

// lintComparisons checks the words u's expression compares values with:
// `severity` (lintSeverities), and a value whose kind lists its words
// (lintWords).
func (b *bodyParser) lintComparisons(u exprUse, v *view) {
	severity := u.scope == scopeAction || u.scope == scopeAgentSnapshot
	if u.c.prog == nil || !severity && v == nil {
		return
	}
	// The expression as written, not the compiled program, whose
	// optimizer turns `x in ["a", "b"]` into a lookup in a constant set.
	tree, err := parser.Parse(u.c.text)
	if err != nil {
		return
	}
	w := &wordVisitor{}
	ast.Walk(&tree.Node, w)
	if severity {
		b.lintSeverities(u, w.found)
	}
	if v != nil {
		b.lintWords(u, v, w.found)
	}
}

// isOrdering reports whether a checker error is about <, <=, > or >=.
func isOrdering(err error) bool {
	_, msg := exprErrorColumn(err)
	return strings.HasPrefix(msg, "invalid operation: <") || strings.HasPrefix(msg, "invalid operation: >")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// fieldType is the type of a health row's field in v (its own step's
// value, a path below it, or a value of a step seen by id), for `it`.
func (v *view) fieldType(field string) (reflect.Type, Type) {
	parts := SplitPath(field)
	if sv, ok := v.ids[parts[0]]; ok && len(parts) > 1 {
		if t := sv.typeOf(parts[1:]...); t != nil {
			return t, sv.typeName(parts[1:])
		}
		return nil, TypeAny
	}
	for _, sv := range v.top {
		if t := sv.typeOf(parts...); t != nil {
			return t, sv.typeName(parts)
		}
	}
	return nil, TypeAny
}

// exprPos is where an error at expr's 0-based column col of text is in
// the file: in the cell's own text when the expression is the cell as
// written, else at the cell.
func (b *bodyParser) exprPos(u exprUse, text string, col int) Pos {
	p := u.pos
	if col < 0 || u.src == "" {
		return p
	}
	src := u.src
	if inner, ok := wholeTicks(strings.TrimSpace(src)); ok && strings.TrimSpace(inner) == text {
		lead := strings.Index(src, inner) + (len(inner) - len(strings.TrimLeft(inner, " ")))
		p = offsetPos(u.pos, src, lead)
		p.Col += col
	} else if strings.TrimSpace(src) == text {
		p = offsetPos(u.pos, src, strings.Index(src, text))
		p.Col += col
	}
	return p
}

// severityWords are the values a stage's severity takes in an action
// condition (and an agent's in its snapshot).
var severityWords = []string{"healthy", "degraded", "critical", "unknown", "unreachable"}

// lintSeverities reports a comparison of `severity` with a word that is
// not a severity (`severity == "degarded"`): the condition could never
// hold, and its repair never run.
func (b *bodyParser) lintSeverities(u exprUse, found []wordCmp) {
	for _, c := range found {
		// `not in` a list with such a word still holds: nothing to say.
		if id, ok := c.subject.(*ast.IdentifierNode); !ok || id.Value != "severity" || c.op == "not in" || contains(severityWords, c.word) {
			continue
		}
		at := u.pos
		if i := strings.Index(u.src, c.word); i >= 0 && u.src != "" {
			at = offsetPos(u.pos, u.src, i)
		}
		b.d.errorf(at, "severity compared with %q, which is not a severity%s: a stage's severity is %s, so the condition %s",
			c.word, hint(c.word, severityWords, ""), joinWords(severityWords, "or"), c.outcome())
	}
}

// lintWords reports a comparison (==, !=, in) of a value whose kind lists
// the words it is ever (StepKind.Words) with another word: the condition
// or cell could never hold (`plugin_status == "CRITCAL"`). The value is
// read by name, through its step's id, or as a cell's `it`.
func (b *bodyParser) lintWords(u exprUse, v *view, found []wordCmp) {
	for _, cmp := range found {
		name, words := b.wordsOf(u, v, cmp.subject)
		if words == nil || contains(words, cmp.word) {
			continue
		}
		at := u.pos
		if i := strings.Index(u.src, `"`+cmp.word+`"`); i >= 0 && u.src != "" {
			at = offsetPos(u.pos, u.src, i)
		} else if i := strings.Index(u.src, cmp.word); i >= 0 && u.src != "" {
			at = offsetPos(u.pos, u.src, i)
		}
		b.d.errorf(at, "%s compared with %q, which it never is%s: %s is %s, so this %s",
			name, cmp.word, wordHint(cmp.word, words), name, joinWords(words, "or"), cmp.outcome())
	}
}

// wordHint suggests the word w was meant to be: one that differs only in
// case ("unknown" for UNKNOWN), else the nearest.
func wordHint(w string, words []string) didYouMean {
	for _, x := range words {
		if strings.EqualFold(w, x) {
			return didYouMean{wrong: w, right: x}
		}
	}
	return hint(w, words, "")
}

// wordsOf is the value subject reads and the words its kind lists for it;
// nil words when it lists none.
func (b *bodyParser) wordsOf(u exprUse, v *view, subject ast.Node) (string, []string) {
	words := func(sv *stepValues, name string) []string {
		if k := stepKind(sv.step.Kind); k != nil {
			return k.Words[name]
		}
		return nil
	}
	p, ok := memberPath(subject)
	if !ok {
		return "", nil
	}
	parts := SplitPath(p)
	if parts[0] == "it" && len(parts) == 1 && u.scope == scopeCell && u.row != nil {
		parts = SplitPath(u.row.Field)
	}
	switch len(parts) {
	case 1:
		for _, sv := range v.top {
			if sv.has(parts[0]) {
				return parts[0], words(sv, parts[0])
			}
		}
	case 2:
		if sv, ok := v.ids[parts[0]]; ok {
			return p, words(sv, parts[1])
		}
	}
	return "", nil
}

// wordVisitor gathers the string literals a value is compared with: ==,
// != and (not) in (["a", "b"]), the value on either side of ==.
type wordVisitor struct{ found []wordCmp }

// wordCmp is one comparison of a value (subject) with a string literal.
type wordCmp struct {
	subject ast.Node
	op      string
	word    string
}

// outcome says what a comparison with a word the subject never is does:
// an equality never holds, an inequality always does.
func (c wordCmp) outcome() string {
	if c.op == "!=" || c.op == "not in" {
		return "always holds"
	}
	return "never holds"
}

func (w *wordVisitor) Visit(n *ast.Node) {
	bn, ok := (*n).(*ast.BinaryNode)
	if !ok {
		return
	}
	add := func(subject ast.Node, word string) {
		w.found = append(w.found, wordCmp{subject, bn.Operator, word})
	}
	switch bn.Operator {
	case "==", "!=":
		for _, pair := range [][2]ast.Node{{bn.Left, bn.Right}, {bn.Right, bn.Left}} {
			if s, ok := pair[1].(*ast.StringNode); ok {
				add(pair[0], s.Value)
			}
		}
	case "in", "not in":
		if arr, ok := bn.Right.(*ast.ArrayNode); ok {
			for _, e := range arr.Nodes {
				if s, ok := e.(*ast.StringNode); ok {
					add(bn.Left, s.Value)
				}
			}
		}
	}
}

// typeFix returns u's expression mended the way a type error of the
// usual kinds is: a number quoted as a string compared with a number
// (`it < "7"`), a bare number compared with a string (`http_status ==
// 200`), len of a number (`len(it) > 3`). It returns "" unless the mended
// expression checks clean in the same environment.
func (b *bodyParser) typeFix(u exprUse, v *view, it reflect.Type, msg string) string {
	text := u.c.text
	var cand string
	switch {
	case strings.HasPrefix(msg, "invalid argument for len"):
		cand = strings.Replace(text, "len(it)", "it", 1)
	case strings.Contains(msg, "mismatched types") && strings.HasSuffix(msg, "and string)"):
		cand = retoken(text, func(t lexer.Token) (string, bool) {
			if _, err := strconv.ParseFloat(t.Value, 64); t.Kind == lexer.String && err == nil {
				return t.Value, true
			}
			return "", false
		})
	case strings.Contains(msg, "mismatched types string and"):
		cand = retoken(text, func(t lexer.Token) (string, bool) {
			if t.Kind == lexer.Number {
				return strconv.Quote(t.Value), true
			}
			return "", false
		})
	}
	if cand == "" || cand == text {
		return ""
	}
	if b.cache.check(cand, b.typedEnv(u, v, it), !u.c.value) != nil {
		return ""
	}
	return cand
}

// retoken rewrites the tokens of an expression that change says to,
// leaving the rest of its text as written; "" when it cannot lex it.
func retoken(text string, change func(lexer.Token) (string, bool)) string {
	toks, err := lexer.Lex(file.NewSource(text))
	if err != nil {
		return ""
	}
	runes := []rune(text)
	var out strings.Builder
	last := 0
	for _, t := range toks {
		repl, ok := change(t)
		if !ok || t.From < last || t.To > len(runes) {
			continue
		}
		out.WriteString(string(runes[last:t.From]))
		out.WriteString(repl)
		last = t.To
	}
	out.WriteString(string(runes[last:]))
	return out.String()
}
