package contracts

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// RestartsFunc is the signature of the `restarts(agent, window)` function
// expressions may call: the number of repairs recorded in the ledger for
// agent within window (a duration such as "1h"). The engine passes its
// implementation in the environment map under the name "restarts".
type RestartsFunc = func(agent string, window string) int

// Names a health cell and an action condition see besides the values of
// steps (their kinds' declarations, StepKind.Values) and steps by id.
var sharedNames = []string{"vars", "state", "item", "restarts"}

// Names the engine binds in a health cell's environment besides the
// step's values and earlier steps by id.
var cellNames = slices.Concat([]string{"it"}, sharedNames)

// Names an action condition sees besides the stage's merged step values
// and every step by id.
var actionNames = slices.Concat([]string{"severity"}, sharedNames)

// Names an escalation row sees.
var escalationNames = []string{"critical_count", "degraded_count", "unreachable_count", "healthy_count",
	"unknown_count", "suppressed_count", "agents", "gate_ok", "critical_agents", "vars", "state", "restarts"}

// scopeNames are the built-in names of each expression scope, read-only.
var scopeNames = map[scope]map[string]bool{
	scopeCell:          nameSet(cellNames),
	scopeAction:        nameSet(actionNames),
	scopeEscalation:    nameSet(escalationNames),
	scopeSnapshot:      nameSet(SnapshotNames),
	scopeAgentSnapshot: nameSet(append(append([]string{}, actionNames...), AgentSnapshotNames...)),
}

// reservedNames are the names a step id may not take: every scope's
// built-in names and every value a registered kind or form of as=
// produces. Kinds register at init, before any contract is read.
func reservedNames() map[string]bool {
	reservedOnce.Do(func() {
		m := map[string]bool{}
		for _, list := range [][]string{cellNames, actionNames, escalationNames} {
			for _, n := range list {
				m[n] = true
			}
		}
		for _, k := range stepKinds {
			for _, v := range k.Values {
				m[v.Name] = true
			}
			for _, f := range k.As {
				for _, v := range f.Values {
					m[v.Name] = true
				}
			}
		}
		reserved = m
	})
	return reserved
}

var (
	reservedOnce sync.Once
	reserved     map[string]bool
)

func nameSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// functionNames are the functions the engine provides through the env map.
var functionNames = map[string]bool{"restarts": true}

// declaredEnv gives the compiler the types of the engine's functions. Only
// types are taken from it: at run time expr reads `restarts` from the env
// map the engine passes, so the engine's implementation is the one called.
func declaredEnv() map[string]any {
	return map[string]any{
		"restarts": RestartsFunc(func(string, string) int { return 0 }),
		// duration is a step's run time in seconds; declaring it here makes it a
		// variable rather than expr's duration() builtin.
		"duration": float64(0),
	}
}

// Compile compiles one expression the way the engine evaluates cells, action
// conditions and escalation rows: undefined variables are allowed (they read
// as nil at run time), the result must be a bool, and the engine's functions
// are declared so calls to them type-check. It returns expr's error, a
// *file.Error carrying the 0-based column of the offending token; an
// expression longer than MaxExprSize or nested deeper than MaxExprDepth is
// such an error too, found before expr's parser sees the text.
func Compile(exprText string) (*vm.Program, error) {
	if err := checkExprShape(exprText); err != nil {
		return nil, err
	}
	return expr.Compile(exprText, expr.Env(declaredEnv()), expr.AllowUndefinedVariables(), expr.AsBool())
}

// CompileValue compiles an expression whose result is any value (a guard's
// restart_count, for example). Errors are as for Compile.
func CompileValue(exprText string) (*vm.Program, error) {
	if err := checkExprShape(exprText); err != nil {
		return nil, err
	}
	return expr.Compile(exprText, expr.Env(declaredEnv()), expr.AllowUndefinedVariables())
}

// ident is one name an expression reads from its environment.
type ident struct {
	Name   string
	Member bool // used as the base of a member access (x.y)
	Call   bool // called as a function
}

// compiled is one compiled expression with the names it reads, shared
// read-only between contracts (vm.Program is safe for concurrent runs).
type compiled struct {
	text   string // the expression as compiled
	value  bool   // any-valued (CompileValue), not a condition
	prog   *vm.Program
	err    error
	idents []ident
	reads  []string // readPaths of the expression
	// badWindows are literal windows of restarts(agent, window) that are
	// not a positive duration: the run counts 0 for them, so the call
	// could never hold.
	badWindows []string
}

// calls reports whether the expression calls the named function.
func (c *compiled) calls(name string) bool {
	for _, id := range c.idents {
		if id.Name == name && id.Call {
			return true
		}
	}
	return false
}

type cacheKey struct {
	text  string
	value bool
}

type cellKey struct{ src, field string }

type cellResult struct {
	expr string
	err  error
}

// exprCache compiles each distinct expression text once; contracts loaded
// together share it. Safe for concurrent use.
type exprCache struct {
	mu    sync.RWMutex
	m     map[cacheKey]*compiled
	cells map[cellKey]cellResult
	types typeChecks // the type checker's verdicts (types.go)
}

func newExprCache() *exprCache {
	return &exprCache{m: map[cacheKey]*compiled{}, cells: map[cellKey]cellResult{}}
}

// condition is CompileCondition through the cache.
func (c *exprCache) condition(src string) (string, error) { return c.cell(src, "\x00condition") }

// cell is CompileCell through the cache: contracts loaded together tend to
// share their tables.
func (c *exprCache) cell(src, field string) (string, error) {
	// Refused as written, backticks aside, and not kept: a shorthand's
	// expansion is no shorter, and its errors would quote the whole cell.
	if n := len(src); n > MaxExprSize {
		if inner, ok := wholeTicks(src); ok {
			n = len(strings.TrimSpace(inner))
		}
		if n > MaxExprSize {
			return "", fmt.Errorf("expression is %s", exprSizeMsg(n))
		}
	}
	k := cellKey{src, field}
	c.mu.RLock()
	r, ok := c.cells[k]
	c.mu.RUnlock()
	if ok {
		return r.expr, r.err
	}
	if field == "\x00condition" {
		r.expr, r.err = CompileCondition(src)
	} else {
		r.expr, r.err = CompileCell(src, field)
	}
	c.mu.Lock()
	c.cells[k] = r
	c.mu.Unlock()
	return r.expr, r.err
}

func (c *exprCache) get(text string, value bool) *compiled {
	k := cacheKey{text, value}
	if c != nil {
		c.mu.RLock()
		r, ok := c.m[k]
		c.mu.RUnlock()
		if ok {
			return r
		}
	}
	r := &compiled{text: text, value: value}
	if value {
		r.prog, r.err = CompileValue(text)
	} else {
		r.prog, r.err = Compile(text)
	}
	if r.err == nil {
		r.idents, r.badWindows = collectIdents(r.prog.Node())
		r.reads = readPaths(r.prog.Node())
	}
	if c != nil {
		c.mu.Lock()
		if prev, ok := c.m[k]; ok {
			r = prev
		} else {
			c.m[k] = r
		}
		c.mu.Unlock()
	}
	return r
}

// quoteExpr quotes an expression for a diagnostic, cut short when it is
// long: the diagnostic's position already points into the file.
func quoteExpr(s string) string {
	const keep = 60
	if len(s) <= keep+20 {
		return strconv.Quote(s)
	}
	n := 0
	for i := range s {
		if n == keep {
			return strconv.Quote(s[:i] + "…")
		}
		n++
	}
	return strconv.Quote(s)
}

// exprErrorColumn returns expr's 0-based error column, or -1 when the error
// carries no position.
func exprErrorColumn(err error) (int, string) {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fe.Column, fe.Message
	}
	return -1, err.Error()
}

type identCollector struct {
	found      map[string]*ident
	declared   map[string]bool
	badWindows []string
}

func (v *identCollector) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.VariableDeclaratorNode:
		v.declared[x.Name] = true
	case *ast.IdentifierNode:
		v.add(x.Value, false, false)
	case *ast.MemberNode:
		if id, ok := x.Node.(*ast.IdentifierNode); ok {
			v.add(id.Value, true, false)
		}
	case *ast.CallNode:
		if id, ok := x.Callee.(*ast.IdentifierNode); ok {
			v.add(id.Value, false, true)
			if id.Value == "restarts" && len(x.Arguments) == 2 {
				if w, ok := x.Arguments[1].(*ast.StringNode); ok {
					if d, err := ParseDuration(w.Value); err != nil || d <= 0 {
						v.badWindows = append(v.badWindows, w.Value)
					}
				}
			}
		}
	}
}

func (v *identCollector) add(name string, member, call bool) {
	id, ok := v.found[name]
	if !ok {
		id = &ident{Name: name}
		v.found[name] = id
	}
	id.Member = id.Member || member
	id.Call = id.Call || call
}

// memberPath renders an identifier or a chain of field accesses on one
// (`probe.stdout`, `health.queue.depth`, `perf["/"].value`) as a path
// (JoinPath). It walks the chain in a loop and joins once: a chain is as
// long as its expression.
func memberPath(n ast.Node) (string, bool) {
	var props []string // innermost last
	for {
		switch x := n.(type) {
		case *ast.IdentifierNode:
			parts := make([]string, 0, len(props)+1)
			parts = append(parts, x.Value)
			for i := len(props) - 1; i >= 0; i-- {
				parts = append(parts, props[i])
			}
			return JoinPath(parts), true
		case *ast.MemberNode:
			p, ok := x.Property.(*ast.StringNode)
			if !ok {
				return "", false
			}
			props = append(props, p.Value)
			n = x.Node
		default:
			return "", false
		}
	}
}

// pathCollector gathers the outermost identifiers and field accesses of
// an expression, and the names it calls.
type pathCollector struct {
	chains []ast.Node
	calls  map[string]bool
}

func (v *pathCollector) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.CallNode:
		if id, ok := x.Callee.(*ast.IdentifierNode); ok {
			v.calls[id.Value] = true
		}
	case *ast.MemberNode:
		// ast.Walk visits a node after its children, so a field access's
		// base, when it is a chain itself, is the last one gathered: this
		// access extends it.
		if _, ok := x.Property.(*ast.StringNode); ok {
			if k := len(v.chains) - 1; k >= 0 && v.chains[k] == x.Node {
				v.chains = v.chains[:k]
			}
		}
		v.chains = append(v.chains, x)
	case *ast.IdentifierNode:
		v.chains = append(v.chains, x)
	}
}

// readPaths lists the values an expression reads, as paths, longest
// chains only (`probe.stdout`, not also `probe`), functions left out,
// sorted: what a report shows as "what was seen". Its cost is about the
// expression's length: only whole chains are rendered, and "a longer
// chain exists" is a search in the sorted paths, not a scan of them all
// for each (a 4 KiB chain of fields took 0.7 s that way).
func readPaths(n ast.Node) []string {
	if n == nil {
		return nil
	}
	v := &pathCollector{calls: map[string]bool{}}
	ast.Walk(&n, v)
	seen := map[string]bool{}
	var all []string
	for _, c := range v.chains {
		if p, ok := memberPath(c); ok && !seen[p] {
			seen[p] = true
			all = append(all, p)
		}
	}
	sort.Strings(all)
	var out []string
	for _, p := range all {
		if v.calls[p] {
			continue
		}
		// Paths extending p+"." (or p+"[") sort together, from the first
		// not below it.
		if extended(all, p+".") || extended(all, p+"[") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// extended reports whether a path of sorted starts with prefix.
func extended(sorted []string, prefix string) bool {
	i := sort.SearchStrings(sorted, prefix)
	return i < len(sorted) && strings.HasPrefix(sorted[i], prefix)
}

// collectIdents lists the free names an expression reads, sorted.
func collectIdents(n ast.Node) ([]ident, []string) {
	if n == nil {
		return nil, nil
	}
	v := &identCollector{found: map[string]*ident{}, declared: map[string]bool{}}
	ast.Walk(&n, v)
	out := make([]ident, 0, len(v.found))
	for name, id := range v.found {
		if v.declared[name] {
			continue
		}
		out = append(out, *id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, v.badWindows
}

// exprUse is one compiled expression waiting for the identifier lint, which
// needs the whole contract (every step id and field) to be known.
type exprUse struct {
	c     *compiled
	pos   Pos
	scope scope
	stage *Stage     // the stage a cell or action condition belongs to
	step  *Step      // the step a health cell judges
	row   *HealthRow // the row a health cell is in
	src   string     // the cell's text as written, which pos points at
}

// scope is where an expression is written, which decides the names it may
// read (scopeNames).
type scope int

const (
	scopeCell scope = iota
	scopeAction
	scopeEscalation
	scopeSnapshot      // a top-level Maintains key's Value
	scopeAgentSnapshot // a per-agent Maintains key's Value
)

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

// BuiltinNames returns the names an expression reads besides the steps'
// values, by the first header cell of the table it is written in: "field"
// (a health table's cells), "condition" (an action table's) or
// "aggregate" (the escalation table's); nil for any other.
func BuiltinNames(header string) []string {
	switch header {
	case "field":
		return slices.Clone(cellNames)
	case "condition":
		return slices.Clone(actionNames)
	case "aggregate":
		return slices.Clone(escalationNames)
	}
	return nil
}
