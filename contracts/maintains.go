package contracts

import (
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/yuin/goldmark/ast"
)

// The Maintains rule, the same for lint and the run. A top-level key is
// filled from the snapshot environment: by the expression bound to it in a
// `Key | Value` table under `## Maintains`, else by the value of the same
// name (SnapshotNames). A per-agent key is filled from the agent's
// environment (its steps' fields and ids as action conditions see them,
// plus AgentSnapshotNames, and beneath everything the keys of the agent's
// for_each items): by its bound expression, else by the value of the same
// name, else by `<step>_<field>` (pm2_status is step pm2's status). A key
// nothing fills keeps its previous value, or null; lint warns about it
// when it can know (lintMaintains), and says so in a note when a step's
// JSON output, which it cannot see, may fill it.

// SnapshotNames are the values a top-level Maintains key is filled from
// when it has the same name, or that its `Key | Value` expression reads:
// last_check (the run's start, RFC 3339), overall_severity (the worst agent
// after the run's repairs), last_repair (the newest repair of any unit, or
// null), agents (each agent's snapshot, per the per-agent schema), gate_ok,
// stages (by stage id: {severity, status, agent}), state (the previous
// snapshot) and vars.
var SnapshotNames = []string{"last_check", "overall_severity", "last_repair", "agents", "gate_ok", "stages", "state", "vars"}

// AgentSnapshotNames are the values a per-agent key is filled from besides
// the agent's step fields and step ids: severity (the agent's, after the
// run's repairs), agent (its name), example (its entry in the per-agent JSON
// example, for constants: `example.platform`), vars and item.
var AgentSnapshotNames = []string{"severity", "agent", "example", "vars", "item"}

// Fill returns the value of key k in env by the Maintains rule, and whether
// anything gave one. An expression that fails gives nothing.
func (k *MaintainedKey) Fill(env map[string]any) (any, bool) {
	if k.Program != nil {
		out, err := expr.Run(k.Program, env)
		if err != nil {
			return nil, false
		}
		return out, true
	}
	if v, ok := env[k.Name]; ok {
		if _, fn := v.(func(string, string) int); !fn {
			return v, true
		}
	}
	// <step>_<field>: every split at an underscore, shortest step id first.
	for i := strings.IndexByte(k.Name, '_'); i > 0; {
		if m, ok := env[k.Name[:i]].(map[string]any); ok {
			if v, ok := m[k.Name[i+1:]]; ok {
				return v, true
			}
		}
		j := strings.IndexByte(k.Name[i+1:], '_')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil, false
}

// KeysFilledBy returns the top-level keys whose value is exactly the
// snapshot value name: a key of that name with no expression of its own, or
// a key whose expression is just that name (`restart_debounce | last_repair`).
func (m Maintains) KeysFilledBy(name string) []*MaintainedKey {
	var out []*MaintainedKey
	for _, k := range m.Keys {
		if k.Program == nil && k.Name == name || k.Program != nil && strings.TrimSpace(k.Value) == name {
			out = append(out, k)
		}
	}
	return out
}

// snapshotBinding is one row of a `Key | Value` table, resolved once the
// whole body (the bullets and the per-agent example) is known.
type snapshotBinding struct {
	name, text, src string
	keyPos, valPos  Pos
}

// warnStrayValues warns about a `Key | Value` table outside `## Maintains`
// whose keys are Maintains keys: only the table under `## Maintains` fills
// the snapshot, so such a table, read as documentation, fills nothing, and
// the keys it names keep the values the engine gives them by default.
func (b *bodyParser) warnStrayValues() {
	m := &b.c.Maintains
	keys := map[string]bool{}
	for _, k := range append(append([]*MaintainedKey{}, m.Keys...), m.Agent...) {
		keys[k.Name] = true
	}
	for _, table := range b.strayValues {
		var named []string
		seen := map[string]bool{}
		var at Pos
		for _, r := range table {
			if keys[r.name] && !seen[r.name] {
				if len(named) == 0 {
					at = r.keyPos
				}
				seen[r.name] = true
				named = append(named, r.name)
			}
		}
		if len(named) > 0 {
			b.d.warnf(at, "this Key | Value table is outside ## Maintains, so it fills nothing; %s %s Maintains %s (move the table under ## Maintains to fill %s)",
				strings.Join(named, ", "), plural(len(named), "is a", "are"), plural(len(named), "key", "keys"), plural(len(named), "it", "them"))
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// bindSnapshotValues gives each `Key | Value` row's expression to the key it
// names: a top-level bullet, or a per-agent key of the JSON example.
func (b *bodyParser) bindSnapshotValues() {
	m := &b.c.Maintains
	// By name, the last of a name as a scan would find it: there may be
	// as many keys as rows.
	tops, agents := map[string]*MaintainedKey{}, map[string]*MaintainedKey{}
	for _, k := range m.Keys {
		tops[k.Name] = k
	}
	for _, k := range m.Agent {
		agents[k.Name] = k
	}
	perAgent := map[string][]*MaintainedKey{}
	for _, keys := range m.PerAgent {
		for _, k := range keys {
			perAgent[k.Name] = append(perAgent[k.Name], k)
		}
	}
	for _, r := range b.snapshotRows {
		top, agent := tops[r.name], agents[r.name]
		switch {
		case top == nil && agent == nil:
			b.d.errorf(r.keyPos, "%q is neither a Maintains key nor a key of the per-agent snapshot example", r.name)
			continue
		case top != nil && agent != nil:
			b.d.errorf(r.keyPos, "%q is both a Maintains key and a per-agent key: rename one, so the binding says which it fills", r.name)
			continue
		}
		sc := scopeSnapshot
		if agent != nil {
			sc = scopeAgentSnapshot
		}
		comp := b.compile(r.text, true, r.src, r.valPos)
		if comp == nil {
			continue
		}
		b.uses = append(b.uses, exprUse{c: comp, pos: r.valPos, scope: sc})
		if top != nil {
			top.Value, top.Program = r.text, comp.prog
			continue
		}
		agent.Value, agent.Program = r.text, comp.prog
		for _, k := range perAgent[r.name] {
			k.Value, k.Program = r.text, comp.prog
		}
	}
}

// lintMaintains warns about every key the Maintains rule fills with
// nothing: it would stay null in every snapshot.
func (b *bodyParser) lintMaintains() {
	m := b.c.Maintains
	hasAgents := false
	for _, k := range m.Keys {
		if k.Name == "agents" || k.Program != nil && strings.Contains(k.Value, "agents") {
			hasAgents = true
		}
		if k.Program == nil && !contains(SnapshotNames, k.Name) {
			b.d.warnf(k.Pos, "maintained key %s is filled by nothing: name it like a snapshot value (%s) or bind it in a `Key | Value` table under ## Maintains",
				k.Name, strings.Join(SnapshotNames[:5], ", "))
		}
	}
	if len(m.Agents) > 0 && !hasAgents && len(m.Keys) > 0 {
		b.d.warnf(m.Keys[0].Pos, "the per-agent snapshots are written nowhere: declare `- agents: map` (or bind a key to `agents`)")
	}
	agents := make([]string, 0, len(m.PerAgent))
	for a := range m.PerAgent {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	warned := map[string]bool{}
	items := b.itemKeys(allLists)
	for _, a := range agents {
		for _, k := range m.PerAgent[a] {
			steps := b.agentSteps(a)
			if k.Program != nil || contains(AgentSnapshotNames, k.Name) || b.produced(steps, k.Name) ||
				b.stepField(k.Name) || items.has[k.Name] || warned[k.Name] {
				continue
			}
			warned[k.Name] = true
			if json := b.openStep(steps); json != nil {
				// The run fills the key from a JSON field of that name,
				// which lint cannot see: no warning, which would be false
				// when the field is there, but a note saying what to
				// write so lint can check it.
				b.d.notef(k.Pos, "per-agent key %s (agent %s) is filled only if step %s's JSON output has a field %s, which lint cannot see: "+
					"its fields are not declared; to make it checked, declare them (`fields=\"%s:TYPE …\"` on the step, or an example output block)",
					k.Name, a, json.ID, k.Name, k.Name)
				continue
			}
			example := "example." + k.Name // a constant of the example
			if len(steps) > 0 {
				example = steps[0].ID + ".stdout"
			}
			b.d.warnf(k.Pos, "per-agent key %s (agent %s) is filled by nothing: no health-row field, step value, <step>_<field> or for_each item key is named so; "+
				"bind it in a `Key | Value` table under ## Maintains (`| %s | %s |`)", k.Name, a, k.Name, example)
		}
	}
}

// noteNullRows says, where lint can know a field may be null, what the
// run does then. A per-agent key the example shows as null, filled by the
// field of its name, says the field may be null; a health row over that
// field none of whose cells holds on null (a comparison such as `< 26`
// cannot compare null) leaves the row unknown whenever it is. That is the
// semantics of null in cells, so a note, not a warning: it says what
// happens and how to judge null instead.
func (b *bodyParser) noteNullRows() {
	m := b.c.Maintains
	agents := make([]string, 0, len(m.PerAgent))
	for a := range m.PerAgent {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	noted := map[*HealthRow]bool{}
	for _, a := range agents {
		for _, k := range m.PerAgent[a] {
			if k.Type != "any" || k.Program != nil {
				continue // not null in the example, or bound to an expression
			}
			for _, step := range b.agentSteps(a) {
				for _, row := range step.Health {
					if row.Field != k.Name || noted[row] || holdsOnNull(row) {
						continue
					}
					noted[row] = true
					b.d.notef(row.Pos, "%s can be null (agent %s's example shows it null) and no cell of this row holds on null, so a null %s leaves the row unknown (%s is null); "+
						"to judge null, put `null` in its column (or write `null or < N`)", k.Name, a, k.Name, k.Name)
				}
			}
		}
	}
}

// holdsOnNull reports whether some cell of row holds when its field is
// null, as steps.EvaluateRow judges it: a cell that fails on null does
// not hold.
func holdsOnNull(row *HealthRow) bool {
	for _, c := range row.Cells {
		if c.Program == nil {
			continue
		}
		if out, err := expr.Run(c.Program, map[string]any{"it": nil}); err == nil && out == true {
			return true
		}
	}
	return false
}

// agentSteps are the steps of the stages that agent a's snapshot reads:
// the stages with agent=a, and the for_each stages one of whose items
// makes a (agent=$name).
func (b *bodyParser) agentSteps(a string) []*Step {
	var out []*Step
	for _, st := range b.c.Stages {
		of := st.Agent == a
		if !of && st.ForEach != "" && strings.Contains(st.Agent, "$") {
			for _, item := range b.c.ForEach[st.ForEach] {
				if ExpandAttr(st.Agent, b.c.StageVars(item)) == a {
					of = true
					break
				}
			}
		}
		if of {
			out = append(out, st.Steps...)
		}
	}
	return out
}

// produced reports whether one of steps produces a value called name.
func (b *bodyParser) produced(steps []*Step, name string) bool {
	for _, s := range steps {
		if b.valuesOf(s).has(name) {
			return true
		}
	}
	return false
}

// openStep is the first of steps whose output is JSON with undeclared
// fields (as=json, or an http step's JSON body), or nil: what else its
// fields are is known only at run time.
func (b *bodyParser) openStep(steps []*Step) *Step {
	for _, s := range steps {
		if b.valuesOf(s).open {
			return s
		}
	}
	return nil
}

// stepField reports whether name reads as <step id>_<field>.
func (b *bodyParser) stepField(name string) bool {
	for i, c := range name {
		if c == '_' && i > 0 {
			if _, ok := b.stepIDs[name[:i]]; ok {
				return true
			}
		}
	}
	return false
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
				if b.examplePos == nil {
					b.examplePos = map[string]Pos{}
				}
				b.examplePos[v] = b.s.pos(tm.fileOff(int(dec.InputOffset()) - len(v) - 2))
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
