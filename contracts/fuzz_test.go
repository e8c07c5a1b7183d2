package contracts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlast "github.com/goccy/go-yaml/ast"
	yamlparser "github.com/goccy/go-yaml/parser"
	gmast "github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// FuzzParse feeds arbitrary bytes to the parser without the recover safety
// net: a malformed file must never panic, and a file with errors must never
// come back half-loaded.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.md")
	seeds = append(seeds, zulipFixture)
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: x\nruntime_contract: 2\n---\n## Execution\n### S {#s}\n```bash {id=\n```\n| Field | Healthy |\n|-|-|\n| `x` | `it >` |\n"))
	l := newLoader(Options{})
	md := newMarkdownParser()
	f.Fuzz(func(t *testing.T, src []byte) {
		c, ds := l.parse(md, "fuzz.md", src, false)
		// A draft (what an editor is given, errors and all) explains
		// without a panic: hover reads it.
		_ = Explain(c)
		if !ds.HasErrors() && c == nil {
			t.Fatalf("no contract and no error:\n%s", ds)
		}
		for _, d := range ds {
			if d.Pos.Line < 1 || d.Pos.Col < 1 {
				t.Fatalf("diagnostic without a position: %s", d)
			}
		}
	})
}

// fuzzInventoryContract declares the vars the inventory fuzz target sets,
// reads one through ${…} in an action and uses a target it may replace.
const fuzzInventoryContract = "---\nkind: responsibility\nname: inv\nruntime_contract: 2\nvars: {port: \"9\", host: h}\ntargets:\n  box: {local: true}\n---\n\n## Execution\n\n### Box {#box agent=a on=box}\n\n```bash {id=probe}\necho \"$port\"\n```\n\nExpected: `9`\n\n| Condition | Action |\n|---|---|\n| `probe.stdout == \"bad\"` | `restart \"${unit}\"` |\n"

// FuzzInventoryAndVar feeds arbitrary inventories and --var arguments to
// the loader without the recover safety net: no panic, no half-loaded
// contract, every diagnostic positioned, and when the contract loads, the
// overrides land with --var winning over the inventory.
func FuzzInventoryAndVar(f *testing.F) {
	for _, s := range []struct{ inv, kv string }{
		{"vars:\n  port: \"10\"\n  unit: web\ntargets:\n  box: {ssh: root@127.0.0.1:2222, known_hosts: /tmp/kh}\n", "port=11"},
		{"\ufeffvars: {host: x}\n", "unit=a=b"},
		{"vars:\n  prot: 1\n", "nosuch"},
		{"vars: [[[[[[]]]]]]\n", "=1"},
		{"targets:\n  box: {via: box, docker: c}\n", "PATH=/tmp"},
		{"vars:\n  unit: |\n    two\n    lines\n", "unit=$(touch x)"},
		{"- a\n- b\n", "host=\n"},
	} {
		f.Add([]byte(s.inv), s.kv)
	}
	md := newMarkdownParser()
	cache := newExprCache()
	f.Fuzz(func(t *testing.T, inv []byte, kv string) {
		vars := map[string]string{}
		if k, v, err := ParseVarFlag(kv); err == nil {
			if CheckVarName(k) != "" || k+"="+v != kv {
				t.Fatalf("ParseVarFlag(%q) = %q, %q", kv, k, v)
			}
			vars[k] = v
		} else if i := strings.IndexByte(kv, '='); i > 0 && CheckVarName(kv[:i]) == "" {
			t.Fatalf("ParseVarFlag(%q) refused a valid argument: %v", kv, err)
		}
		l := &loader{opts: Options{Vars: vars}, cache: cache, inv: parseInventory("inv.yaml", inv)}
		c, ds := l.parse(md, "c.md", []byte(fuzzInventoryContract), false)
		if c == nil {
			t.Fatalf("no contract with diagnostics:\n%s", ds)
		}
		if ds.HasErrors() {
			c = nil
		}
		for _, d := range ds {
			if d.Pos.Line < 1 || d.Pos.Col < 1 || d.Pos.File != "inv.yaml" && d.Pos.File != "c.md" {
				t.Fatalf("diagnostic without a position: %s", d)
			}
		}
		if err := CheckVarOverrides([]*Contract{c}, vars); c != nil && err != nil && !strings.HasPrefix(err.Error(), "--var ") {
			t.Fatalf("CheckVarOverrides: %v", err)
		}
		if c == nil {
			return
		}
		for k, v := range l.inv.vars {
			if _, over := vars[k]; !over && c.Vars[k] != v.text {
				t.Fatalf("inventory var %s = %q, contract has %q", k, v.text, c.Vars[k])
			}
		}
		for k, v := range vars {
			if c.Vars[k] != v {
				t.Fatalf("--var %s = %q, contract has %q", k, v, c.Vars[k])
			}
		}
	})
}

// FuzzYAMLShape holds the YAML limits to what the parser builds: text that
// checkYAMLShape lets through never parses into collections nested deeper
// than MaxYAMLDepth or holding more than MaxYAMLEntries entries, so no
// spelling (anchors, tags, flow inside block, "- - -", "? ") gets a bomb
// past the check.
func FuzzYAMLShape(f *testing.F) {
	for _, s := range []string{
		"a: [[[[1]]]]\n", "a: &x [[1]]\n", "a: !!seq [[1]]\n", "- - - - x\n", "? [a]\n: b\n",
		"a:\n  b:\n    c: {d: [e, {f: g}]}\n", "a: |\n  [[[[\n", "a: \"[[[[\"\n", "a: [\n  [\n    [1]]]\n",
		"a: 'it''s [[[' # [[[\n", "- &a\n  - !t\n    - x\n", "{a: {b: {c: 1}}}\n", "[[[], [[]]]]\n",
	} {
		f.Add([]byte(s))
	}
	// Just inside the depth limit, in each spelling, so that a mutation
	// or two crosses it.
	const d = MaxYAMLDepth - 1
	var block strings.Builder
	for i := range d {
		block.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	for _, s := range []string{
		"a: " + strings.Repeat("[", d-1) + strings.Repeat("]", d-1) + "\n",
		"a: &x " + strings.Repeat("{b: ", d-1) + "1" + strings.Repeat("}", d-1) + "\n",
		strings.Repeat("- ", d) + "x\n",
		block.String(),
		"a:\n  - " + strings.Repeat("!t [", d-2) + strings.Repeat("]", d-2) + "\n",
		"a: [\n" + strings.Repeat("[\n", d-2) + strings.Repeat("]\n", d-1),
		"a: " + strings.Repeat("x, ", MaxYAMLEntries-1) + "\n",
		"a: [" + strings.Repeat("x, ", MaxYAMLEntries-1) + "x]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 16<<10 {
			return
		}
		if checkYAMLShape(src) != nil {
			return
		}
		file, err := yamlparser.ParseBytes(src, 0)
		if err != nil || file == nil {
			return
		}
		for _, doc := range file.Docs {
			if depth, widest := yamlExtent(doc, false); depth > MaxYAMLDepth || widest > MaxYAMLEntries {
				t.Fatalf("checkYAMLShape let through depth %d, a collection of %d:\n%q", depth, widest, src)
			}
		}
	})
}

// yamlExtent returns how deep mappings and lists nest under n and the most
// entries one of them holds.
func yamlExtent(n yamlast.Node, inMapping bool) (depth, widest int) {
	sub := func(children []yamlast.Node, own int) {
		for _, c := range children {
			d, w := yamlExtent(c, false)
			depth, widest = max(depth, d), max(widest, w)
		}
		depth += own
	}
	switch v := n.(type) {
	case nil:
	case *yamlast.DocumentNode:
		return yamlExtent(v.Body, false)
	case *yamlast.AnchorNode:
		return yamlExtent(v.Value, inMapping)
	case *yamlast.TagNode:
		return yamlExtent(v.Value, inMapping)
	case *yamlast.SequenceNode:
		kids := make([]yamlast.Node, len(v.Values))
		copy(kids, v.Values)
		sub(kids, 1)
		widest = max(widest, len(v.Values))
	case *yamlast.MappingNode:
		var kids []yamlast.Node
		for _, mv := range v.Values {
			kids = append(kids, mv.Key, mv.Value)
		}
		sub(kids, 1)
		widest = max(widest, len(v.Values))
	case *yamlast.MappingValueNode:
		own := 1
		if inMapping {
			own = 0
		}
		sub([]yamlast.Node{v.Key, v.Value}, own)
		widest = max(widest, 1)
	}
	return depth, widest
}

// FuzzMarkdownShape holds the body limits to what goldmark builds: a body
// that checkMarkdownShape lets through never parses into block quotes and
// lists nested deeper than MaxMarkdownNesting, or a table over its limits.
func FuzzMarkdownShape(f *testing.F) {
	const d = MaxMarkdownNesting - 1
	var indented strings.Builder
	for i := range d {
		indented.WriteString(strings.Repeat("  ", i) + "- x\n")
	}
	for _, s := range []string{
		"> a\n> > b\n", "- a\n  - b\n    > c\n", "1. a\n   2) b\n", "```\n> > > >\n```\n",
		"| a | b |\n|---|---|\n| 1 | 2 |\n", "### H {#a .b c=d}\n", "H {#a}\n===\n",
		strings.Repeat("> ", d) + "x\n", strings.Repeat("- ", d) + "x\n", strings.Repeat("> - ", d/2) + "x\n",
		indented.String(), "  " + strings.Repeat("* ", d) + "\n", strings.Repeat(">", d) + "\n" + strings.Repeat(">", d) + " - x\n",
	} {
		f.Add([]byte(s))
	}
	md := newMarkdownParser()
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 16<<10 || checkMarkdownShape(src) != nil {
			return
		}
		doc := md.Parse(text.NewReader(src))
		var walk func(n gmast.Node, depth int)
		walk = func(n gmast.Node, depth int) {
			switch n.Kind() {
			case gmast.KindBlockquote, gmast.KindList:
				depth++
			case extast.KindTable:
				rows, cols := 0, 0
				for r := n.FirstChild(); r != nil; r = r.NextSibling() {
					rows++
					cols = max(cols, r.ChildCount())
				}
				if rows > MaxTableRows+1 || cols > MaxTableColumns {
					t.Fatalf("checkMarkdownShape let through a table of %d rows, %d columns:\n%q", rows, cols, src)
				}
			}
			if depth > MaxMarkdownNesting {
				t.Fatalf("checkMarkdownShape let through nesting %d:\n%q", depth, src)
			}
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				walk(c, depth)
			}
		}
		walk(doc, 0)
	})
}
