package contracts

import (
	"fmt"
	"sort"
	"strings"

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
				b.d.errorf(meta.forEachPos, "undefined for_each list %q (define it under for_each)", st.ForEach)
			}
		}
		b.checkOn(st, st.On, meta.onPos)
		if name, ok := attrVar(st.Agent); ok && !b.forEachKey(st, name) {
			if _, isVar := c.Vars[name]; !isVar {
				b.d.errorf(st.Pos, "agent=%s: undefined var %q (a for_each item key or a var)", st.Agent, name)
			}
		}
		for _, step := range st.Steps {
			sm := b.stepMeta[step]
			if step.On != "" && step.On != st.On {
				b.checkOn(st, step.On, sm.onPos)
			}
			if step.Via != "" {
				t, ok := c.Targets[step.Via]
				switch {
				case !ok:
					b.d.errorf(sm.viaPos, "undefined target %q in via= (define it under targets)", step.Via)
				case t.SSH == "":
					b.d.errorf(sm.viaPos, "via=%s: %s steps tunnel only through ssh targets", step.Via, stepKindList(false, "and"))
				}
			}
			b.checkFilled(st, step)
		}
	}
	_, sudo := c.SudoCommands()
	b.d.list = append(b.d.list, sudo...)
	b.bindSnapshotValues()
	b.warnStrayValues()
	b.lintIdents()
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
			b.d.errorf(at, "undefined target %q in on= (define it under targets)", on)
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
			b.d.errorf(at, "on=%s: undefined var %q (a for_each item key or a var)", on, name)
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
			b.d.errorf(t.Pos, "targets.%s: via names undefined target %q", n, t.Via)
			continue
		}
		// An ssh connection is dialed from the engine's host or tunnelled
		// through another ssh connection; a container has no tunnel.
		if t.SSH != "" && parent.Kind() != "ssh" {
			b.d.errorf(t.Pos, "targets.%s: an ssh target is reached only through another ssh target, and %s is %s", n, t.Via, parent.Kind())
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

func (b *bodyParser) lintIdents() {
	for _, u := range b.uses {
		for _, w := range u.c.badWindows {
			b.d.errorf(u.pos, "restarts(agent, %q): the window must be a duration like 1h or 30m (the run would count 0)", w)
		}
		for _, id := range u.c.idents {
			steps := u.scope != scopeEscalation && u.scope != scopeSnapshot // scopes that see step fields and ids
			known := scopeNames[u.scope][id.Name] || steps && (b.fields[id.Name] || b.stepIDs[id.Name] != Pos{}) ||
				// An agent's snapshot reads its for_each items' keys by name.
				u.scope == scopeAgentSnapshot && b.itemKeys(allLists).has[id.Name]
			switch {
			case id.Call && !functionNames[id.Name]:
				b.d.errorf(u.pos, "unknown function %s (the engine provides restarts(agent, window))", id.Name)
			case id.Call:
			case known:
			case id.Member && steps:
				b.d.errorf(u.pos, "undefined step %s (no step has id=%s)", id.Name, id.Name)
			case u.scope == scopeSnapshot:
				b.d.errorf(u.pos, "undefined variable %s (a Maintains key reads the snapshot values %s; a stage's state is stages.ID.severity)",
					id.Name, strings.Join(SnapshotNames, ", "))
			default:
				b.d.errorf(u.pos, "undefined variable %s", id.Name)
			}
		}
		for _, path := range u.c.reads {
			root, rest, _ := strings.Cut(path, ".")
			key, _, _ := strings.Cut(rest, ".")
			if key != "" && (root == "vars" || root == "item") {
				b.lintRead(u, root, key)
			}
		}
	}
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
// is a likely typo, or otherwise.
func hint(s string, known []string, otherwise string) string {
	if k := closest(s, known); k != "" {
		return fmt.Sprintf(" (did you mean %q?)", k)
	}
	return otherwise
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
