package docs

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
)

var update = flag.Bool("update", false, "rewrite the generated tables of the docs")

// valuesTables renders what every registered step kind produces, and the
// forms of as= with what each adds, as the tables of contract-format.md's
// "What a step produces": one row per value, kinds that produce the same
// value the same way sharing it.
func valuesTables() string {
	names := make([]string, 0, len(steps.Kinds))
	for n := range steps.Kinds {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return kindOrder(names[i]) < kindOrder(names[j]) })
	type row struct {
		kinds []string
		v     contracts.Value
	}
	var rows []*row
	for _, n := range names {
		for _, v := range steps.Kinds[n].Values {
			i := slices.IndexFunc(rows, func(r *row) bool { return r.v == v })
			if i < 0 {
				rows = append(rows, &row{v: v})
				i = len(rows) - 1
			}
			rows[i].kinds = append(rows[i].kinds, "`"+n+"`")
		}
	}
	var b strings.Builder
	b.WriteString("| kind | value | type | what it holds |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", strings.Join(r.kinds, ", "), shownName(r.v.Name), r.v.Type, r.v.Doc)
	}
	b.WriteString("\n| `as=` | kinds | adds | what it does |\n| --- | --- | --- | --- |\n")
	type form struct {
		kinds []string
		f     contracts.AsForm
	}
	var forms []*form
	for _, n := range names {
		for _, f := range steps.Kinds[n].As {
			i := slices.IndexFunc(forms, func(x *form) bool { return x.f.Name == f.Name })
			if i < 0 {
				forms = append(forms, &form{f: f})
				i = len(forms) - 1
			}
			forms[i].kinds = append(forms[i].kinds, "`"+n+"`")
		}
	}
	for _, f := range forms {
		var adds []string
		for _, v := range f.f.Values {
			adds = append(adds, fmt.Sprintf("`%s` (%s)", v.Name, v.Type))
		}
		if f.f.JSON {
			adds = append(adds, "the output's fields")
		}
		if len(adds) == 0 {
			adds = []string{"—"}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.f.Name, strings.Join(f.kinds, ", "), strings.Join(adds, ", "), f.f.Doc)
	}
	return b.String()
}

// shownName is a value's name as a contract reads it: a path below a map
// whose keys are the run's (perf.*.value) with a key in brackets,
// perf["…"].value.
func shownName(name string) string {
	return strings.ReplaceAll(name, "."+contracts.Any+".", `["…"].`)
}

// kindOrder puts the built-in kinds first, in the order the docs
// introduce them, and any other after them by name.
func kindOrder(name string) string {
	if i := slices.Index([]string{"bash", "sh", "http", "tcp", "agent", "nagios"}, name); i >= 0 {
		return fmt.Sprint(i)
	}
	return "9" + name
}

const (
	valuesBegin = "<!-- the tables below are generated from the step kinds' declarations: go test ./docs -run TestValuesTables -update -->\n\n"
	valuesEnd   = "<!-- end of generated tables -->"
)

// TestValuesTables: the docs' tables of step values are the kinds'
// declarations, which lint, explain and the run read; a value added to a
// kind shows here, or this fails.
func TestValuesTables(t *testing.T) {
	generated(t, "contract-format.md", valuesBegin, valuesEnd, valuesTables(), "TestValuesTables")
}

// generated checks that page holds want between begin and end, as test
// (which -update rewrites it) generates it.
func generated(t *testing.T, page, begin, end, want, test string) {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, begin)
	stop := strings.Index(doc, end)
	if start < 0 || stop < start+len(begin) {
		t.Fatalf("%s has no generated section (between %q and %q)", page, begin, end)
	}
	want += "\n"
	got := doc[start+len(begin) : stop]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(page, []byte(doc[:start+len(begin)]+want+doc[stop:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's generated section differs from the declarations; run go test ./docs -run %s -update. Want:\n%s", page, test, want)
}
