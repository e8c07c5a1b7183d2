package engine

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
)

// Fleet is what a run knows of the contracts that run beside it (one
// directory, as `serve --dir` runs them): how often each is judged, which
// unit watches a target (runs on it directly), and which units depend on
// which. The judgements themselves are read from the store at run time,
// so under --etcd a dependency owned by another node is its owner's word.
// A Fleet is built whole by NewFleet and not changed after.
type Fleet struct {
	every    map[string]time.Duration
	watchers map[string]string   // target identity → "contract/agent" of the unit that runs on it
	depends  map[string][]string // "contract" or "contract/agent" → the units that depend on it
}

// NewFleet builds the fleet of cs (nil entries are skipped): the watcher of
// each target is the first unit, by contract name and stage order, whose
// stage runs on it.
func NewFleet(cs []*contracts.Contract) *Fleet {
	f := &Fleet{every: map[string]time.Duration{}, watchers: map[string]string{}, depends: map[string][]string{}}
	sorted := make([]*contracts.Contract, 0, len(cs))
	for _, c := range cs {
		if c != nil {
			sorted = append(sorted, c)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, c := range sorted {
		f.every[c.Name] = c.Schedule.Every
		for _, sr := range expandStages(c) {
			if sr.agent == "" {
				continue
			}
			if id := identity(c, sr.target); id != "" {
				if _, ok := f.watchers[id]; !ok {
					f.watchers[id] = c.Name + "/" + unitName(sr)
				}
			}
		}
	}
	for _, c := range sorted {
		for _, sr := range expandStages(c) {
			if sr.agent == "" {
				continue
			}
			self := c.Name + "/" + unitName(sr)
			for _, dep := range f.unitDeps(c, sr) {
				if dep != self && !slices.Contains(f.depends[dep], self) {
					f.depends[dep] = append(f.depends[dep], self)
				}
			}
		}
	}
	for k := range f.depends {
		sort.Strings(f.depends[k])
	}
	return f
}

// unitDeps are what a unit depends on, by the names the fleet keys
// dependents with: the contract's depends_on, and the watchers of the
// targets its stage reaches through via.
func (f *Fleet) unitDeps(c *contracts.Contract, sr *stageRun) []string {
	var out []string
	for _, r := range c.DependsOn {
		switch {
		case r.Target != "":
			if w := f.watchers[identity(c, r.Target)]; w != "" {
				out = append(out, w)
			}
		case r.Agent != "":
			out = append(out, r.Contract+"/"+r.Agent)
		default:
			out = append(out, r.Contract)
		}
	}
	for _, hop := range hops(c, sr.target) {
		if w := f.watchers[identity(c, hop)]; w != "" {
			out = append(out, w)
		}
	}
	return out
}

// unitName is how a stage run's unit is named (judge: unit.name).
func unitName(sr *stageRun) string {
	if sr.item != nil && !strings.Contains(sr.stage.Agent, "$") {
		return sr.id
	}
	return sr.agent
}

// Every returns how often contract is judged; the default interval for a
// contract the fleet does not hold (or a nil fleet).
func (f *Fleet) Every(contract string) time.Duration {
	if f != nil {
		if d := f.every[contract]; d > 0 {
			return d
		}
	}
	return contracts.DefaultEvery
}

// Watcher returns the unit ("contract/agent") whose stage runs directly on
// target of c, "" when none does.
func (f *Fleet) Watcher(c *contracts.Contract, target string) string {
	if f == nil {
		return ""
	}
	return f.watchers[identity(c, target)]
}

// Dependents returns the units ("contract/agent") that depend on unit of
// contract: on it, or on the contract as a whole.
func (f *Fleet) Dependents(contract, unit string) []string {
	if f == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range []string{contract + "/" + unit, contract} {
		for _, d := range f.depends[k] {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// HasDependents reports whether any unit depends on contract or one of
// its units.
func (f *Fleet) HasDependents(contract string) bool {
	if f == nil {
		return false
	}
	for k, ds := range f.depends {
		if len(ds) > 0 && (k == contract || strings.HasPrefix(k, contract+"/")) {
			return true
		}
	}
	return false
}

// DependsOn reports whether a unit of contract depends on something of
// dep (the contract or one of its units): the daemon judges it again at
// once when dep's judgement changes.
func (f *Fleet) DependsOn(contract, dep string) bool {
	if f == nil {
		return false
	}
	for k, ds := range f.depends {
		if k != dep && !strings.HasPrefix(k, dep+"/") {
			continue
		}
		for _, d := range ds {
			if strings.HasPrefix(d, contract+"/") {
				return true
			}
		}
	}
	return false
}

// identity names a target by where it is, not by what a contract calls
// it: its transport chain, outermost first ("ssh root@10.0.0.1:22 → pct
// 112"), so two contracts that name one host differently agree on it. ""
// for the engine's own host or a target that cannot be described.
func identity(c *contracts.Contract, target string) string {
	if target == "" || target == "local" || strings.HasPrefix(target, "$") {
		return ""
	}
	s, err := Spec(c, target)
	if err != nil || s.Kind == "local" {
		return ""
	}
	return s.Chain()
}

// hops are the targets a target is reached through, the engine's side
// first: tanko via amdpve gives [amdpve]. The target itself is not one.
func hops(c *contracts.Contract, target string) []string {
	var out []string
	seen := map[string]bool{target: true}
	for t := c.Targets[target]; t != nil && t.Via != "" && !seen[t.Via]; t = c.Targets[t.Via] {
		seen[t.Via] = true
		out = append([]string{t.Via}, out...)
	}
	return out
}

type fleetKey struct{}

// WithFleet returns a context whose runs know the fleet f (`serve`, and a
// one-shot run of a contract among others).
func WithFleet(ctx context.Context, f *Fleet) context.Context {
	return context.WithValue(ctx, fleetKey{}, f)
}

// fleetOf returns the fleet ctx carries, or nil.
func fleetOf(ctx context.Context) *Fleet {
	f, _ := ctx.Value(fleetKey{}).(*Fleet)
	return f
}
