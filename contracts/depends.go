package contracts

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// DepRef is one entry of depends_on: what the contract's units depend on.
// One form names all three kinds, as written:
//
//	jumphost          another contract: failing while any unit of it is
//	jumphost/jump     an agent of another contract
//	target:docker     a target of this contract (its host, reached or not)
//
// Exactly one of Target or Contract is set; Agent only with Contract.
type DepRef struct {
	Contract string
	Agent    string
	Target   string
	Pos      Pos
}

// TargetPrefix starts a depends_on entry that names a target.
const TargetPrefix = "target:"

// depRefPattern is a regular expression for the text ParseDepRef reads.
const depRefPattern = `^(target:[A-Za-z0-9][A-Za-z0-9._-]*|[A-Za-z0-9][A-Za-z0-9._-]*(/.+)?)$`

// String renders the reference as written: "jumphost/jump", "target:docker".
func (r *DepRef) String() string {
	switch {
	case r.Target != "":
		return TargetPrefix + r.Target
	case r.Agent != "":
		return r.Contract + "/" + r.Agent
	}
	return r.Contract
}

// ParseDepRef reads one depends_on entry; the error says what the three
// forms are.
func ParseDepRef(s string) (*DepRef, error) {
	const forms = `want CONTRACT, CONTRACT/AGENT or target:NAME`
	if name, ok := strings.CutPrefix(s, TargetPrefix); ok {
		if !reName.MatchString(name) {
			return nil, fmt.Errorf("%q: %q is not a target name (%s)", s, name, forms)
		}
		return &DepRef{Target: name}, nil
	}
	contract, agent, hasAgent := strings.Cut(s, "/")
	if !reName.MatchString(contract) || hasAgent && agent == "" {
		return nil, fmt.Errorf("%q is not a dependency: %s", s, forms)
	}
	return &DepRef{Contract: contract, Agent: agent}, nil
}

// decodeDependsOn reads `depends_on: [jumphost, web/api, target:docker]`.
func (y *yamlDec) decodeDependsOn(n ast.Node) []*DepRef {
	var out []*DepRef
	seq, ok := unwrap(n).(*ast.SequenceNode)
	if !ok {
		if s, single := unwrap(n).(*ast.StringNode); single {
			seq = &ast.SequenceNode{Values: []ast.Node{s}}
		} else {
			y.d.errorf(y.pos(n), "depends_on: expected a list of CONTRACT, CONTRACT/AGENT or target:NAME, got %s", kindName(n))
			return nil
		}
	}
	seen := map[string]bool{}
	for i, v := range seq.Values {
		s, ok := y.str(v, fmt.Sprintf("depends_on[%d]", i))
		if !ok {
			continue
		}
		ref, err := ParseDepRef(s)
		if err != nil {
			y.d.errorf(y.textPos(v), "depends_on: %v", err)
			continue
		}
		if seen[s] {
			y.d.errorf(y.textPos(v), "depends_on: %q is listed twice", s)
			continue
		}
		seen[s] = true
		ref.Pos = y.textPos(v)
		out = append(out, ref)
	}
	return out
}

// checkDependsOn resolves the entries that name something of the contract
// itself: a target must be one of its targets, and a contract does not
// depend on itself (a gate stage is how one part of a contract waits for
// another).
func (b *bodyParser) checkDependsOn() {
	c := b.c
	for _, r := range c.DependsOn {
		switch {
		case r.Target != "":
			if _, ok := c.Targets[r.Target]; !ok || r.Target == "local" {
				b.d.errorf(r.Pos, "depends_on: %q names no target of this contract%s", r.String(), hint(r.Target, sortedKeys(c.Targets), " (define it under targets)"))
			}
		case r.Contract == c.Name:
			b.d.errorf(r.Pos, "depends_on: %q is this contract: a contract cannot depend on itself (a .gate stage skips the stages after it while it is down)", r.String())
		}
	}
}

// UnitNames are the units of the contract as the engine names them in
// reports and incidents: each stage's agent, a for_each stage's item
// ("lanes[alpha]") when its agent is the same for every item. Gates and
// other agentless stages are not units. Sorted.
func (c *Contract) UnitNames() []string {
	seen := map[string]bool{}
	for _, st := range c.Stages {
		switch {
		case st.Agent == "":
		case st.ForEach == "":
			seen[ExpandAttr(st.Agent, c.StageVars(nil))] = true
		case !strings.Contains(st.Agent, "$"):
			for i, item := range c.ForEach[st.ForEach] {
				seen[fmt.Sprintf("%s[%s]", st.ID, ItemName(item, i))] = true
			}
		default:
			for _, item := range c.ForEach[st.ForEach] {
				seen[ExpandAttr(st.Agent, c.StageVars(item))] = true
			}
		}
	}
	return sortedKeys(seen)
}

// CheckFleet checks what one contract cannot check alone: that every
// depends_on entry naming another contract (and its agent) resolves among
// cs, with the nearest name when it does not, and that no dependency
// chain comes back to where it started. A cycle is reported at the entry
// of each contract on it that closes it. cs are the contracts that run
// together (one directory, as `serve --dir` runs them); nil entries (files
// that did not load) are skipped. It returns the diagnostics in file order.
func CheckFleet(cs []*Contract) Diagnostics {
	byName := map[string]*Contract{}
	for _, c := range cs {
		if c != nil {
			byName[c.Name] = c
		}
	}
	names := sortedKeys(byName)
	var out Diagnostics
	add := func(p Pos, format string, args ...any) {
		out = append(out, Diagnostic{Pos: p, Severity: DiagError, Msg: fmt.Sprintf(format, args...)})
	}
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, r := range c.DependsOn {
			if r.Target != "" || r.Contract == c.Name {
				continue
			}
			dep, ok := byName[r.Contract]
			if !ok {
				add(r.Pos, "depends_on: no contract named %q runs beside this one%s", r.Contract, hint(r.Contract, names, ""))
				continue
			}
			if r.Agent != "" {
				if units := dep.UnitNames(); !contains(units, r.Agent) {
					add(r.Pos, "depends_on: %q: contract %s has no agent %q%s", r.String(), dep.Name, r.Agent, hint(r.Agent, units, " (its agents are "+joinWords(units, "and")+")"))
				}
			}
		}
	}
	said := map[string]bool{}
	for _, cyc := range dependencyCycles(cs, byName) {
		k := cyc.path[0] + "\x00" + cyc.path[1]
		if said[k] {
			continue
		}
		said[k] = true
		add(cyc.at.Pos, "depends_on: dependency cycle %s: each would wait for the other, so neither is ever judged on its own", strings.Join(cyc.path, " → "))
	}
	sortDiagnostics(out)
	return out
}

// cycle is one dependency cycle, reported at the entry of one of its
// contracts that leads back into it.
type cycle struct {
	at   *DepRef
	path []string
}

// dependencyCycles finds the contracts whose depends_on (on another
// contract or one of its agents) leads back to themselves, and for each
// the entry that starts the way back.
func dependencyCycles(cs []*Contract, byName map[string]*Contract) []cycle {
	var out []cycle
	deps := contractDeps(byName)
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, r := range c.DependsOn {
			if r.Target != "" || byName[r.Contract] == nil || r.Contract == c.Name {
				continue
			}
			if path := DependencyPath(r.Contract, c.Name, deps); path != nil {
				out = append(out, cycle{at: r, path: append([]string{c.Name}, path...)})
			}
		}
	}
	return out
}

// contractDeps is what each contract depends on among the others (its
// entries naming a contract or one of its agents), by name, in order, for
// DependencyPath.
func contractDeps(byName map[string]*Contract) func(string) []string {
	return func(name string) []string {
		c := byName[name]
		if c == nil {
			return nil
		}
		var out []string
		for _, r := range c.DependsOn {
			if r.Target == "" {
				out = append(out, r.Contract)
			}
		}
		sort.Strings(out)
		return out
	}
}

// DependencyPath returns the names from `from` to `to` along deps (what
// each name depends on, in the order they are tried), both included, or
// nil when there is no such way: the walk that finds a dependency cycle,
// among contracts (CheckFleet) or among the checks of a Monit control file
// (contracts/monitrc).
func DependencyPath(from, to string, deps func(name string) []string) []string {
	seen := map[string]bool{}
	var walk func(n string) []string
	walk = func(n string) []string {
		if n == to {
			return []string{to}
		}
		if seen[n] {
			return nil
		}
		seen[n] = true
		for _, d := range deps(n) {
			if p := walk(d); p != nil {
				return append([]string{n}, p...)
			}
		}
		return nil
	}
	return walk(from)
}

// Fleet loads the contracts that run beside the given ones, for
// CheckFleet: every contract file of their directories (ContractFiles) that
// is not among loaded, with opts. Files that do not load are left out
// (their own lint says why). It returns loaded and those, by path.
func Fleet(loaded []*Contract, opts Options) []*Contract {
	return fleet(loaded, opts, false)
}

// DraftFleet is Fleet for lint: a file beside them that does not load is
// there as far as it was read (Draft), so its name still answers the
// contracts that depend on it. Never run what it returns.
func DraftFleet(loaded []*Contract, opts Options) []*Contract {
	return fleet(loaded, opts, true)
}

func fleet(loaded []*Contract, opts Options, drafts bool) []*Contract {
	have := map[string]bool{}
	dirs := map[string]bool{}
	for _, c := range loaded {
		if c == nil {
			continue
		}
		abs, err := filepath.Abs(c.Path)
		if err != nil {
			abs = c.Path
		}
		have[abs] = true
		dirs[filepath.Dir(abs)] = true
	}
	out := append([]*Contract(nil), loaded...)
	var more []string
	for _, dir := range sortedKeys(dirs) {
		paths, err := ContractFiles(dir)
		if err != nil {
			continue
		}
		for _, p := range paths {
			if !have[p] {
				more = append(more, p)
			}
		}
	}
	cs, _ := LoadMany(more, opts)
	for i, c := range cs {
		if c == nil && drafts {
			c = DraftFile(more[i], opts)
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// DraftFile is Draft of the file at path: the contract as far as it was
// read, or nil when the file cannot be read or was refused whole.
func DraftFile(path string, opts Options) *Contract {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	c, _ := Draft(path, src, opts)
	return c
}
