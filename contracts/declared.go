package contracts

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// reVarRef matches $name and ${name}: the ways a contract's text (a script,
// an action, an http step, a notifier option) reads a var.
var reVarRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// declareVars records the names the contract reads as vars, from its
// source and its own vars (before any override): the keys of its vars, and
// every name its text refers to as $name or ${name} (a var it expects from
// an inventory or --var).
func (c *Contract) declareVars(src []byte) {
	c.declared = make(map[string]bool, len(c.Vars))
	c.own = make([]string, 0, len(c.Vars))
	for k := range c.Vars {
		c.declared[k] = true
		c.own = append(c.own, k)
	}
	sort.Strings(c.own)
	for _, m := range reVarRef.FindAllSubmatch(src, -1) {
		c.declared[string(m[1])] = true
	}
}

// DeclaresVar reports whether the contract reads var name: a key of its own
// vars, or a $name or ${name} anywhere in its text. An override of any
// other name would change nothing the contract does.
func (c *Contract) DeclaresVar(name string) bool {
	if c.declared == nil {
		_, ok := c.Vars[name]
		return ok
	}
	return c.declared[name]
}

// ownVars returns the keys of the contract's own vars (before any
// override), sorted: the names a near miss is compared with.
func (c *Contract) ownVars() []string {
	if c.own != nil {
		return c.own
	}
	out := make([]string, 0, len(c.Vars))
	for k := range c.Vars {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseVarFlag splits a --var argument "key=value" (the value may hold
// anything, = included). It fails when there is no "=" or the key cannot be
// a var (CheckVarName).
func ParseVarFlag(kv string) (key, value string, err error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("--var %q: want key=value", kv)
	}
	if why := CheckVarName(k); why != "" {
		return "", "", fmt.Errorf("--var %q: %s is %s", kv, k, why)
	}
	return k, v, nil
}

// CheckVarOverrides returns an error for the first --var name (in name
// order) that no contract of cs declares, suggesting a declared name when
// one is a likely typo; nil when every name is declared by at least one.
// Nil contracts (ones that did not load) are skipped.
// A --var is addressed to the contracts it is given with, so a name none
// of them reads is a mistake, not a no-op.
func CheckVarOverrides(cs []*Contract, vars map[string]string) error {
	// One that did not load declares nothing anyone knows of.
	cs = slices.DeleteFunc(slices.Clone(cs), func(c *Contract) bool { return c == nil })
	if len(cs) == 0 {
		return nil
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		declared := false
		var known []string
		for _, c := range cs {
			if c.DeclaresVar(k) {
				declared = true
				break
			}
			known = append(known, c.ownVars()...)
		}
		if declared {
			continue
		}
		who := "the contract declares"
		if len(cs) == 1 {
			who = cs[0].Name + " declares"
		} else if len(cs) > 1 {
			who = "none of the contracts declares"
		}
		msg := fmt.Sprintf("--var %s: %s no var %q", k, who, k)
		if len(cs) > 1 {
			msg = fmt.Sprintf("--var %s: %s a var %q", k, who, k)
		}
		switch s := closest(k, known); {
		case s != "":
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		case len(known) > 0 && len(cs) == 1:
			msg += " (its vars: " + strings.Join(firstN(dedupe(known), 8), ", ") + ")"
		case len(known) > 0:
			msg += " (their vars: " + strings.Join(firstN(dedupe(known), 8), ", ") + ")"
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}
