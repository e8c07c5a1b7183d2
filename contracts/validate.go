package contracts

import (
	"fmt"
	"sort"
	"strings"

	"github.com/contractd/contractd/transports"

	stepfill "github.com/contractd/contractd/contracts/fill"
)

// validate runs the checks that need the whole contract: target references
// and via chains, stage and step targets, identifiers in every expression,
// and Maintains keys nothing writes.
func (b *bodyParser) validate() {
	c := b.c
	b.checkTargets()
	if !b.checkForEachRuns() {
		return // each item's checks would cost what the limit is there to stop
	}
	for _, st := range c.Stages {
		meta := b.stageMeta[st]
		if st.ForEach != "" {
			if _, ok := c.ForEach[st.ForEach]; !ok {
				b.d.errorf(meta.forEachPos, "undefined for_each list %q%s", st.ForEach, hint(st.ForEach, sortedKeys(c.ForEach), " (define it under for_each)"))
			}
		}
		b.checkOn(st, st.On, meta.onPos)
		if name, ok := attrVar(st.Agent); ok && !b.forEachKey(st, name) {
			if _, isVar := c.Vars[name]; !isVar {
				b.d.errorf(st.Pos, "agent=%s: undefined var %q (a for_each item key or a var)%s", st.Agent, name, hint(name, b.varNames(), ""))
			}
		}
		for _, step := range st.Steps {
			sm := b.stepMeta[step]
			if step.On != "" && step.On != st.On {
				b.checkOn(st, step.On, sm.onPos)
			}
			if k := stepKind(step.Kind); step.Via != "" && k != nil && k.Dials {
				t, ok := c.Targets[step.Via]
				switch {
				case !ok:
					b.d.errorf(sm.viaPos, "undefined target %q in via=%s", step.Via, hint(step.Via, sortedKeys(c.Targets), " (define it under targets)"))
				case !t.kind().Tunnel:
					b.d.errorf(sm.viaPos, "via=%s: %s steps tunnel only through %s targets, and %s is %s", step.Via, dialingKinds("and"), tunnelKinds(), step.Via, t.Kind)
				}
			}
			b.checkFilled(st, step)
		}
	}
	_, sudo := c.SudoCommands()
	b.d.list = append(b.d.list, sudo...)
	b.bindExamples()
	b.requireFields()
	b.bindSnapshotValues()
	b.warnStrayValues()
	b.lintIdents()
	b.lintUnjudged()
	b.lintMaintains()
	b.noteNullRows()
}

// checkForEachRuns holds the contract to MaxForEachRuns: a for_each stage
// runs once per item, and so does each of its steps. Lint checks each of
// those runs (on=, http and tcp steps filled with the item's values), as
// the engine makes each on every tick. It reports false, with an error at
// the stage that passes the limit, when the contract is over it.
func (b *bodyParser) checkForEachRuns() bool {
	runs := 0
	for _, st := range b.c.Stages {
		if st.ForEach == "" {
			continue
		}
		runs += len(b.c.ForEach[st.ForEach]) * (1 + len(st.Steps))
		if runs > MaxForEachRuns {
			b.d.errorf(st.Pos, "for_each: more than %d runs of stages and steps, one per item each (a limit of contracts)", MaxForEachRuns)
			return false
		}
	}
	return true
}

// attrVar reads `$name` or `${name}` in an attribute value; the engine
// expands it per run (per item in a for_each stage).
func attrVar(v string) (string, bool) {
	rest, ok := strings.CutPrefix(v, "$")
	if !ok {
		return "", false
	}
	if inner, ok := strings.CutPrefix(rest, "{"); ok {
		rest = strings.TrimSuffix(inner, "}")
	}
	return strings.TrimPrefix(rest, "item."), true
}

// checkOn reports an on= that names no target. `$key` names a for_each item
// key (every item's value must be a target) or a var.
func (b *bodyParser) checkOn(st *Stage, on string, at Pos) {
	defined := func(name string) bool {
		_, ok := b.c.Targets[name]
		return ok || name == "local"
	}
	name, isVar := attrVar(on)
	switch {
	case !isVar:
		if !defined(on) {
			b.d.errorf(at, "undefined target %q in on=%s", on, hint(on, append(sortedKeys(b.c.Targets), "local"), " (define it under targets)"))
		}
	case b.forEachKey(st, name):
		for i, item := range b.c.ForEach[st.ForEach] {
			v := fmt.Sprint(item[name])
			if item[name] == nil || !defined(v) {
				b.d.errorf(at, "on=%s: for_each %s[%d] gives %q, which is not a target", on, st.ForEach, i, v)
			}
		}
	default:
		v, ok := b.c.Vars[name]
		switch {
		case !ok:
			b.d.errorf(at, "on=%s: undefined var %q (a for_each item key or a var)%s", on, name, hint(name, b.varNames(), ""))
		case !defined(v):
			b.d.errorf(at, "on=%s: var %s is %q, which is not a target", on, name, v)
		}
	}
}

func (b *bodyParser) checkTargets() {
	c := b.c
	names := make([]string, 0, len(c.Targets))
	for n := range c.Targets {
		names = append(names, n)
	}
	sort.Strings(names)
	reported := map[string]bool{}
	for _, n := range names {
		t := c.Targets[n]
		if t.Via == "" {
			continue
		}
		parent, ok := c.Targets[t.Via]
		if !ok {
			b.d.errorf(t.Pos, "targets.%s: via names undefined target %q%s", n, t.Via, hint(t.Via, names, ""))
			continue
		}
		// A kind runs through the parents its table allows: an ssh
		// connection is dialed from the engine's host or tunnelled through
		// another ssh connection; a container has no tunnel.
		if ps := t.kind().Parents; len(ps) > 0 && !contains(ps, parent.Kind) {
			b.d.errorf(t.Pos, "targets.%s: %s targets are reached only through %s targets, and %s is %s", n, t.Kind, strings.Join(ps, " or "), t.Via, parent.Kind)
		}
		// Follow the chain; coming back to a target already seen is a cycle.
		seen := map[string]bool{n: true}
		chain := []string{n}
		for cur := c.Targets[t.Via]; cur != nil; {
			chain = append(chain, cur.Name)
			if seen[cur.Name] {
				if !reported[n] {
					for _, m := range chain {
						reported[m] = true
					}
					b.d.errorf(t.Pos, "targets.%s: via cycle %s", n, strings.Join(chain, " → "))
				}
				break
			}
			seen[cur.Name] = true
			if cur.Via == "" {
				break
			}
			cur = c.Targets[cur.Via]
		}
	}
}

// lintIdents checks every name every expression reads, and every health
// row's field, against what the contract declares: the values the steps
// in scope produce (their kinds' Values, their as= forms, their declared
// JSON fields), the steps visible by id, and each scope's built-in names.
// A name that is none of these is an error with the nearest known name; a
// name that only an undeclared JSON output could hold is collected, and
// said once per step (warnUnchecked).
func (b *bodyParser) lintIdents() {
	unchecked := map[*Step][]string{}
	b.lintRowFields(unchecked)
	for _, u := range b.uses {
		for _, w := range u.c.badWindows {
			b.d.errorf(u.pos, "restarts(agent, %q): the window must be a duration like 1h or 30m (the run would count 0)", w)
		}
		v := b.viewOf(u)
		before := len(b.d.list)
		for _, id := range u.c.idents {
			switch {
			case id.Call && !functionNames[id.Name]:
				b.d.errorf(u.pos, "unknown function %s (the engine provides restarts(agent, window))%s", id.Name, hint(id.Name, sortedKeys(functionNames), ""))
			case id.Call, scopeNames[u.scope][id.Name]:
			case u.scope == scopeAgentSnapshot && b.itemKeys(allLists).has[id.Name]:
				// An agent's snapshot reads its for_each items' keys by name.
			case u.scope == scopeSnapshot:
				b.d.errorf(u.pos, "undefined variable %s (a Maintains key reads the snapshot values %s; a stage's state is stages.ID.severity)%s",
					id.Name, strings.Join(SnapshotNames, ", "), hint(id.Name, SnapshotNames, ""))
			case u.scope == scopeEscalation:
				b.d.errorf(u.pos, "undefined variable %s (the escalation table reads %s)%s", id.Name, strings.Join(escalationNames, ", "), hint(id.Name, escalationNames, ""))
			default:
				b.lintName(u, v, id, unchecked)
			}
		}
		for _, path := range u.c.reads {
			parts := strings.Split(path, ".")
			if len(parts) > 1 && (parts[0] == "vars" || parts[0] == "item") {
				b.lintRead(u, parts[0], parts[1])
				continue
			}
			if len(parts) > 1 && u.scope != scopeEscalation && u.scope != scopeSnapshot {
				b.lintPath(u, v, parts, unchecked)
			}
		}
		if len(b.d.list) == before {
			// Names first: a misspelt one would only add a type error.
			b.lintTypes(u, v)
		}
	}
	b.warnUnchecked(unchecked)
}

// view is what one expression (or health row) can read of the steps: the
// values at its top level, and the steps it sees by id.
type view struct {
	// top are the steps whose values are at the top level: a cell's own
	// step, or every step of an action condition's stage.
	top []*stepValues
	// ids are the steps visible by id: those before a cell's step in its
	// stage (and the step itself), every step of a condition's stage, and
	// the gates' steps that ran before.
	ids map[string]*stepValues
	// hidden are the other steps by id: named, but not seen here.
	hidden map[string]*Stage
	// of says whose values the top level holds, for messages: "step df
	// (bash) produces", "no step of stage disk produces".
	of string
}

// viewOf returns what u can read.
func (b *bodyParser) viewOf(u exprUse) *view {
	switch {
	case u.scope == scopeCell && u.step != nil:
		return b.stepView(u.stage, u.step)
	case u.scope == scopeAction && u.stage != nil:
		return b.stageView(u.stage)
	}
	// An agent's snapshot reads its stages' final environments: every
	// step is a name there.
	v := &view{ids: map[string]*stepValues{}, of: "no step"}
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			sv := b.valuesOf(s)
			v.top = append(v.top, sv)
			v.ids[s.ID] = sv
		}
	}
	return v
}

// gateSteps adds to v the steps of the gates that run before stage st:
// every gate for a stage that is not one, the gates above it for a gate.
func (b *bodyParser) gateSteps(v *view, st *Stage) {
	for _, g := range b.c.Stages {
		if g == st && st.Gate {
			return
		}
		if g.Gate && g != st {
			for _, s := range g.Steps {
				v.ids[s.ID] = b.valuesOf(s)
			}
		}
	}
}

// stepView is what a health cell of step s in stage st reads.
func (b *bodyParser) stepView(st *Stage, s *Step) *view {
	sv := b.valuesOf(s)
	v := &view{top: []*stepValues{sv}, ids: map[string]*stepValues{}, of: "step " + s.ID + " (" + s.Kind + asSuffix(s) + ") produces"}
	b.gateSteps(v, st)
	for _, e := range st.Steps {
		v.ids[e.ID] = b.valuesOf(e)
		if e == s {
			break
		}
	}
	b.hideOthers(v)
	return v
}

// stageView is what an action condition of stage st reads.
func (b *bodyParser) stageView(st *Stage) *view {
	v := &view{ids: map[string]*stepValues{}, of: "no step of stage " + st.ID + " produces"}
	b.gateSteps(v, st)
	for _, s := range st.Steps {
		sv := b.valuesOf(s)
		v.top = append(v.top, sv)
		v.ids[s.ID] = sv
	}
	b.hideOthers(v)
	return v
}

// hideOthers records the steps v does not see, so a name of one says
// why it reads nothing rather than that no such step exists.
func (b *bodyParser) hideOthers(v *view) {
	v.hidden = map[string]*Stage{}
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			if _, ok := v.ids[s.ID]; !ok {
				v.hidden[s.ID] = st
			}
		}
	}
}

func asSuffix(s *Step) string {
	if s.As != "" && s.As != AsText.Name {
		return ", as=" + s.As
	}
	return ""
}

// topNames are the names at v's top level, sorted.
func (v *view) topNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, sv := range v.top {
		for _, n := range sv.names() {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// resolve looks name up at v's top level: its step's values, or a step it
// sees by id. It reports whether the name is known, and the first step of
// v whose undeclared JSON output could hold it (nil when none could).
func (v *view) resolve(name string) (known bool, open *Step) {
	if _, ok := v.ids[name]; ok {
		return true, nil
	}
	for _, sv := range v.top {
		if sv.has(name) {
			return true, nil
		}
	}
	for _, sv := range v.top {
		if sv.open {
			return false, sv.step
		}
	}
	return false, nil
}

// lintName checks one identifier an expression reads from the steps.
func (b *bodyParser) lintName(u exprUse, v *view, id ident, unchecked map[*Step][]string) {
	known, open := v.resolve(id.Name)
	switch {
	case known:
	case open != nil && !v.nearMiss(id.Name):
		unchecked[open] = appendNew(unchecked[open], id.Name)
	default:
		b.unknownName(u.pos, id.Name, id.Member, v, u.scope)
	}
}

// nearMiss reports whether name is a likely typo of a name v knows (a
// step id, a value its kinds declare): an undeclared JSON output could
// hold it, but a near miss of a known name is far likelier a mistake. An
// author whose JSON field is named so declares the step's fields.
func (v *view) nearMiss(name string) bool {
	return closest(name, append(v.topNames(), sortedKeys(v.ids)...)) != ""
}

// unknownName reports a name no step in view produces.
func (b *bodyParser) unknownName(at Pos, name string, member bool, v *view, sc scope) {
	if st, ok := v.hidden[name]; ok {
		b.d.errorf(at, "step %s (in stage %s) is not seen here: an expression reads the steps before it in its own stage and the gates' steps, and %s runs %s",
			name, st.ID, name, map[bool]string{true: "later", false: "in another stage"}[v.sameStage(st)])
		return
	}
	known := append(v.topNames(), sortedKeys(v.ids)...)
	known = append(known, sortedKeys(scopeNames[sc])...)
	if member {
		b.d.errorf(at, "undefined step %s%s", name, hint(name, sortedKeys(v.ids), " (no step has id="+name+")"))
		return
	}
	b.d.errorf(at, "undefined variable %s: %s %s%s", name, v.produces(), name, hint(name, known, " (the values here are "+strings.Join(v.topNames(), ", ")+")"))
}

// produces is how a message says the top level has no such value: "step
// df (bash) produces no value", "no step of stage disk produces".
func (v *view) produces() string {
	if strings.HasPrefix(v.of, "no step") {
		return v.of
	}
	return v.of + " no value"
}

// sameStage reports whether st is the stage of v's steps.
func (v *view) sameStage(st *Stage) bool {
	for _, s := range st.Steps {
		if _, ok := v.ids[s.ID]; ok {
			return true
		}
	}
	return false
}

// lintPath checks a dotted path an expression reads below a step id or a
// declared JSON field (`health.connected`, `result.status`).
func (b *bodyParser) lintPath(u exprUse, v *view, parts []string, unchecked map[*Step][]string) {
	at := u.pos
	if i := strings.Index(u.src, strings.Join(parts, ".")); i >= 0 {
		at = offsetPos(u.pos, u.src, i)
	}
	if sv, ok := v.ids[parts[0]]; ok {
		b.lintBelow(at, sv, parts[0], parts[1:], unchecked)
		return
	}
	for _, sv := range v.top {
		if sv.has(parts[0]) {
			b.lintBelow(at, sv, "", parts, unchecked)
			return
		}
	}
}

// lintBelow checks parts against step sv's values; id is the step's id when
// the path names it ("" when parts start at its top level).
func (b *bodyParser) lintBelow(at Pos, sv *stepValues, id string, parts []string, unchecked map[*Step][]string) {
	whole := strings.Join(parts, ".")
	if id != "" {
		whole = id + "." + whole
	}
	if !sv.has(parts[0]) {
		if sv.open {
			unchecked[sv.step] = appendNew(unchecked[sv.step], parts[0])
			return
		}
		b.d.errorf(at, "%s: step %s (%s) produces no value %s%s", whole, sv.step.ID, sv.step.Kind+asSuffix(sv.step), parts[0],
			hint(parts[0], sv.names(), " (its values are "+strings.Join(sv.names(), ", ")+")"))
		return
	}
	if missing, near := sv.path(parts); missing != "" {
		if near == nil {
			b.d.errorf(at, "%s: %s of step %s is a %s, which has no fields", whole, missing[:strings.LastIndexByte(missing, '.')], sv.step.ID, sv.types[missing[:strings.LastIndexByte(missing, '.')]])
			return
		}
		last := missing[strings.LastIndexByte(missing, '.')+1:]
		b.d.errorf(at, "%s: step %s declares no field %s%s", whole, sv.step.ID, missing,
			hint(last, near, " (its example or fields= declares "+strings.Join(near, ", ")+" there)"))
	}
}

// lintRowFields checks each health row's field: a value its step
// produces, a path below one, or a value of a step it sees by id.
func (b *bodyParser) lintRowFields(unchecked map[*Step][]string) {
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			var v *view
			for _, row := range s.Health {
				if row.Expected {
					continue
				}
				if v == nil {
					v = b.stepView(st, s)
				}
				parts := strings.Split(row.Field, ".")
				at := row.Pos
				if i := strings.Index(b.s.lineText(at.Line)[min(at.Col-1, len(b.s.lineText(at.Line))):], row.Field); i >= 0 {
					at.Col += i
				}
				switch parts[0] {
				case "vars", "item":
					if len(parts) > 1 {
						b.lintRead(exprUse{pos: at, scope: scopeCell, stage: st, src: row.Field}, parts[0], parts[1])
					}
					continue
				case "state":
					continue
				}
				known, open := v.resolve(parts[0])
				switch {
				case known && len(parts) > 1:
					b.lintPath(exprUse{pos: at, src: row.Field}, v, parts, unchecked)
				case known:
				case open != nil && !v.nearMiss(parts[0]):
					unchecked[open] = appendNew(unchecked[open], parts[0])
				case len(parts) > 1:
					b.unknownName(at, parts[0], true, v, scopeCell)
				default:
					known := append(v.topNames(), sortedKeys(v.ids)...)
					b.d.errorf(at, "field %s: %s %s%s", row.Field, v.produces(), parts[0],
						hint(parts[0], known, " (its values are "+strings.Join(v.topNames(), ", ")+")"))
				}
			}
		}
	}
}

// warnUnchecked says, once per step, which names read from its JSON output
// lint could not check because the output's fields are not declared.
func (b *bodyParser) warnUnchecked(unchecked map[*Step][]string) {
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			names := unchecked[s]
			if k := stepKind(s.Kind); len(names) == 0 || k != nil && k.FieldsRequired {
				continue // nothing unchecked, or requireFields refused it already
			}
			sort.Strings(names)
			b.d.warnf(s.Pos, "step %s reads JSON whose fields are not declared, so lint could not check %s: declare them with an example output (a ```json {example=%s} block) or fields=\"%s:TYPE …\"",
				s.ID, strings.Join(names, ", "), s.ID, names[0])
		}
	}
}

// appendNew appends s to list unless it is there already.
func appendNew(list []string, s string) []string {
	if contains(list, s) {
		return list
	}
	return append(list, s)
}

// lintRead reports a `vars.KEY` or `item.KEY` that names nothing the run
// binds: expr reads a missing key as nil, so every row over it would be
// unknown at run time. vars are the contract's vars (after the inventory
// and --var) and, in a for_each stage, the item's keys; item is the item.
func (b *bodyParser) lintRead(u exprUse, root, key string) {
	ks := &itemKeys{}
	list := ""
	switch {
	case u.stage != nil && u.stage.ForEach != "":
		list = u.stage.ForEach
		ks = b.itemKeys(list)
	case u.scope == scopeAgentSnapshot:
		// An agent's snapshot reads the environment of its stages,
		// whichever list they iterate.
		ks = b.itemKeys(allLists)
	case u.scope == scopeEscalation || u.scope == scopeSnapshot:
		if root == "item" {
			return // item is not a name there: reported as undefined
		}
	case root == "item":
		b.d.errorf(u.pos, "item.%s: this stage has no for_each, so item is never set", key)
		return
	}
	keys, seen := ks.names, ks.has
	at := u.pos
	if i := strings.Index(u.src, root+"."+key); i >= 0 {
		at = offsetPos(u.pos, u.src, i)
	}
	if root == "item" {
		if seen[key] {
			return
		}
		of := "no for_each item"
		if list != "" {
			of = "no item of for_each " + list
		}
		b.d.errorf(at, "item.%s: %s has a key %q%s; the run would read null", key, of, key, hint(key, keys, ""))
		return
	}
	if _, ok := b.c.Vars[key]; ok || seen[key] {
		return
	}
	b.d.errorf(at, "vars.%s: the contract declares no var %q%s; the run would read null", key, key,
		hint(key, append(sortedKeys(b.c.Vars), keys...), " (declare it under vars, with a default)"))
}

// itemKeys are the keys of a for_each list's items: names in the order
// the items give them (each item's sorted), and the same as a set.
type itemKeys struct {
	names []string
	has   map[string]bool
}

// allLists names every for_each list at once in bodyParser.itemKeys.
const allLists = "\x00all"

// itemKeys returns the keys of the items of list (allLists: of every list,
// in the lists' name order), gathered once per contract: every expression
// and every reference of a for_each stage asks.
func (b *bodyParser) itemKeys(list string) *itemKeys {
	if ks, ok := b.keysOf[list]; ok {
		return ks
	}
	var items []map[string]any
	if list == allLists {
		for _, name := range sortedKeys(b.c.ForEach) {
			items = append(items, b.c.ForEach[name]...)
		}
	} else {
		items = b.c.ForEach[list]
	}
	ks := &itemKeys{has: map[string]bool{}}
	for _, item := range items {
		for _, k := range sortedKeys(item) {
			if !ks.has[k] {
				ks.has[k] = true
				ks.names = append(ks.names, k)
			}
		}
	}
	if b.keysOf == nil {
		b.keysOf = map[string]*itemKeys{}
	}
	b.keysOf[list] = ks
	return ks
}

// hint is " (did you mean "x"?)" for the known name nearest to s when it
// is a likely typo, or otherwise; a diagnostic it ends suggests x.
func hint(s string, known []string, otherwise string) didYouMean {
	return didYouMean{wrong: s, right: closest(s, known), otherwise: otherwise}
}

// checkFilled fills a step whose kind fills values into its text (http,
// tcp: StepKind.Filled) with the values known at load (the vars after
// overrides; in a for_each stage, each item's keys) through the functions
// the run fills it with, so a value the run would refuse (an address that
// is not host:port, a URL that is not http) is an error here. A step that
// reads a secret is left to the run: its value comes from the engine's
// environment.
func (b *bodyParser) checkFilled(st *Stage, step *Step) {
	k := stepKind(step.Kind)
	if k == nil || k.Filled == nil || k.Fill == nil {
		return
	}
	texts := k.Filled(step)
	if len(texts) == 0 {
		return
	}
	for _, t := range texts {
		for _, name := range stepfill.Names(t) {
			if contains(b.c.Secrets, name) {
				return
			}
		}
	}
	check := func(vals map[string]string) error { return k.Fill(step, vals) }
	items := []map[string]any{nil}
	if st.ForEach != "" {
		items = b.c.ForEach[st.ForEach]
	}
	var names []string
	for _, t := range texts {
		names = append(names, stepfill.Names(t)...)
	}
	for i, item := range items {
		// The values the texts read, not a copy of every var per item.
		vals := make(map[string]string, len(names))
		missing := ""
		for _, name := range names {
			if v, ok := b.c.StageVar(item, name); ok {
				vals[name] = v
			} else if missing == "" {
				missing = name
			}
		}
		switch {
		case missing == "":
		case item == nil || !b.forEachKey(st, strings.TrimPrefix(missing, "item.")):
			return // an undefined name: reported where it is written
		default:
			b.d.errorf(step.Pos, "%s step %s: for_each %s[%d] has no key %s, which it reads", step.Kind, step.ID, st.ForEach, i, strings.TrimPrefix(missing, "item."))
			return
		}
		err := check(vals)
		switch {
		case err == nil:
			continue
		case item == nil:
			b.d.errorf(step.Pos, "%s step %s: %v", step.Kind, step.ID, err)
		default:
			b.d.errorf(step.Pos, "%s step %s, for_each %s[%d]: %v", step.Kind, step.ID, st.ForEach, i, err)
		}
		return
	}
}

// agentNames are the agents the contract's stages make, sorted: each
// stage's agent=, a for_each stage's for each item (agent=$name), or a
// var's value (agent=$var).
func (b *bodyParser) agentNames() []string {
	seen := map[string]bool{}
	for _, st := range b.c.Stages {
		switch {
		case st.Agent == "":
		case !strings.Contains(st.Agent, "$"):
			seen[st.Agent] = true
		case st.ForEach != "":
			for _, item := range b.c.ForEach[st.ForEach] {
				seen[ExpandAttr(st.Agent, b.c.StageVars(item))] = true
			}
		default:
			seen[ExpandAttr(st.Agent, b.c.StageVars(nil))] = true
		}
	}
	return sortedKeys(seen)
}

// checkReportOnly resolves each name of report_only_agents to an agent of
// the contract: a name that matches none protects nothing, and the agent
// it was meant to protect is repaired. at are the names' positions.
func (b *bodyParser) checkReportOnly(at []Pos) {
	if len(b.c.ReportOnlyAgents) == 0 {
		return
	}
	agents := b.agentNames()
	for i, name := range b.c.ReportOnlyAgents {
		if contains(agents, name) {
			continue
		}
		p := Pos{File: b.d.file, Line: 1, Col: 1}
		if i < len(at) {
			p = at[i]
		}
		if len(agents) == 0 {
			b.d.errorf(p, "report_only_agents: %q names no agent: no stage of this contract has agent=, so nothing is protected", name)
			continue
		}
		b.d.errorf(p, "report_only_agents: %q names no agent of this contract%s; it protects nothing, and the agents are %s",
			name, hint(name, agents, ""), joinWords(agents, "and"))
	}
}

// lintUnjudged warns about a step nothing judges: no health table, no
// `Expected:` line, no verdict of its kind's own, and no expression that
// reads it. Such a step reports healthy whenever it runs (an exec step
// that exits non-zero, or any step that times out, is unknown), so a
// table that was meant to judge it and was lost (a header one keystroke
// off) leaves a probe that never fails. `lint --strict` refuses it.
func (b *bodyParser) lintUnjudged() {
	read := map[*Step]bool{}
	byID := map[string]*Step{}
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			byID[s.ID] = s
		}
	}
	for _, u := range b.uses {
		for _, id := range u.c.idents {
			if s, ok := byID[id.Name]; ok {
				read[s] = true
			}
			if u.stage == nil || u.scope != scopeAction {
				continue
			}
			// A condition reads the stage's merged values: the last
			// step that produces a name is the one it reads.
			for i := len(u.stage.Steps) - 1; i >= 0; i-- {
				if s := u.stage.Steps[i]; b.valuesOf(s).has(id.Name) || b.valuesOf(s).open {
					read[s] = true
					break
				}
			}
		}
	}
	for _, keys := range b.c.Maintains.PerAgent {
		for _, k := range keys {
			for id, s := range byID {
				if strings.HasPrefix(k.Name, id+"_") {
					read[s] = true
				}
			}
		}
	}
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			if len(s.Health) > 0 || read[s] {
				continue
			}
			if k := stepKind(s.Kind); k == nil || k.Verdict {
				continue
			}
			judged, table := "it reports healthy whenever it answers", fmt.Sprintf("`| %s | … |`", stepKind(s.Kind).Values[0].Name)
			if isExecKind(s.Kind) {
				judged, table = "it reports healthy whenever it exits 0 (unknown otherwise)", "`| exit_code | 0 | != 0 |`"
			}
			b.d.warnf(s.Pos, "step %s: nothing judges it: no health table or Expected: line follows it and no expression reads it, so %s; "+
				"judge it with a table (%s, say) or an Expected: line", s.ID, judged, table)
		}
	}
}

// tunnelKinds names the transport kinds http and tcp steps dial through.
func tunnelKinds() string {
	var out []string
	for _, k := range transports.Kinds() {
		if k.Tunnel {
			out = append(out, k.Name)
		}
	}
	return joinWords(out, "or")
}

// checkExampleAgents resolves each agent of the per-agent snapshot
// example to an agent of the contract: an entry that names none describes
// no snapshot (a misspelt agent's keys would fill nothing, and the agent
// meant gets the union of every entry's). A warning: the snapshot's shape
// is wrong, not what the run alerts or repairs; --strict refuses it.
func (b *bodyParser) checkExampleAgents() {
	if len(b.c.Maintains.Agents) == 0 {
		return
	}
	agents := b.agentNames()
	for _, a := range b.c.Maintains.Agents {
		if contains(agents, a) {
			continue
		}
		at, ok := b.examplePos[a]
		if !ok {
			continue
		}
		if len(agents) == 0 {
			b.d.warnf(at, "per-agent snapshot example: %q names no agent: no stage of this contract has agent=", a)
			continue
		}
		b.d.warnf(at, "per-agent snapshot example: %q names no agent of this contract%s; its keys describe nothing, and the agents are %s",
			a, hint(a, agents, ""), joinWords(agents, "and"))
	}
}
