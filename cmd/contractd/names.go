package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
)

// declares matches a contract that declares the command name.
func declares(name string) func(*contracts.Contract) bool {
	return func(c *contracts.Contract) bool { return slices.Contains(c.Commands, name) }
}

// stateName is the contract a state command (status, history, why,
// reset, maintenance) was given: a name as it stands, or the path of a
// contract file (one ending in .md that reads), taken as the name its
// front matter gives, so `contractd status web.md` shows what `contractd
// run web.md` recorded.
func stateName(arg string) string {
	if !strings.HasSuffix(arg, ".md") {
		return arg
	}
	if c, _ := contracts.LoadFile(arg, contracts.Options{}); c != nil && c.Name != "" {
		return c.Name
	}
	return arg
}

// contractDirs are the directories searched for contract files by name:
// dir (--dir or CONTRACTD_DIR) first, then /etc/contractd.
func contractDirs(dir string) []string {
	var dirs []string
	if dir != "" {
		dirs = append(dirs, dir)
	}
	return append(dirs, "/etc/contractd", "/etc/contractd/contracts")
}

// contractFiles loads every contract file of dirs that loads, by name; the
// first of a name wins.
func contractFiles(dirs []string) map[string]*contracts.Contract {
	out := map[string]*contracts.Contract{}
	for _, d := range dirs {
		files, _ := contracts.ContractFiles(d)
		for _, f := range files {
			c, diags := contracts.LoadFile(f, contracts.Options{})
			if c != nil && !diags.HasErrors() && out[c.Name] == nil {
				out[c.Name] = c
			}
		}
	}
	return out
}

// contractFileNames are the names of the contract files of
// contractDirs(dir), sorted: what a "did you mean" offers for a name no
// contract file has.
func contractFileNames(dir string) []string {
	return slices.Sorted(maps.Keys(contractFiles(contractDirs(dir))))
}

// known is what the CLI knows of contract names: the contracts with state
// (in the state dir, or in etcd) and the contract files in the searched
// directories.
type known struct {
	src   *stateSource
	dirs  []string
	state []string                       // contracts with state
	files map[string]*contracts.Contract // contract files by name
}

func (m *Main) known(src *stateSource, dir string) *known {
	k := &known{src: src, dirs: contractDirs(dir)}
	k.state, _ = src.st.Contracts()
	k.files = contractFiles(k.dirs)
	return k
}

func (k *known) names() []string {
	set := map[string]bool{}
	for _, n := range k.state {
		set[n] = true
	}
	for n := range k.files {
		set[n] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// check returns an error for a contract name that has no state and no
// contract file, with the nearest known name as a suggestion.
func (k *known) check(name string) error {
	if slices.Contains(k.names(), name) {
		return nil
	}
	return fmt.Errorf("unknown contract %q: no state in %s and no contract file of that name in %s%s",
		name, k.src.where, strings.Join(k.dirs, ", "), contracts.Suggest(name, k.names()))
}

// agents are the agents contract name is known to have: from its file
// (for_each expanded) and from its last recorded run.
func (k *known) agents(name string) []string {
	set := map[string]bool{}
	if c := k.files[name]; c != nil {
		for _, a := range engine.Agents(c) {
			set[a] = true
		}
	}
	if hist, _ := k.src.st.History(name, 1); len(hist) > 0 {
		for a := range hist[len(hist)-1].Agents {
			set[a] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// checkAgent returns an error for an agent contract name is not known to
// have. A contract whose agents are unknown (never ran, no file) accepts
// any.
func (k *known) checkAgent(name, agent string) error {
	agents := k.agents(name)
	if agent == "" || len(agents) == 0 || slices.Contains(agents, agent) {
		return nil
	}
	return fmt.Errorf("contract %s has no agent %q (its agents: %s)%s", name, agent, strings.Join(agents, ", "), contracts.Suggest(agent, agents))
}

// durationValue is a flag.Value for durations in the contract format's
// one grammar (contracts.ParseDuration: 90s, 15m, 2h, 1d, 1w), whose error
// says what a good one looks like: "90" gets "has no unit", not "parse
// error".
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := contracts.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// durationVar defines a duration flag parsed by contracts.ParseDuration.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationValue{p}, name, usage)
}
