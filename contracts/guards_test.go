package contracts

import (
	"reflect"
	"strings"
	"testing"
)

// guardSrc is a contract with guards as its guards: mapping's body and
// row as its one action row's Guards cell.
func guardSrc(guards, row string) string {
	return `---
name: guarded
runtime_contract: 2
agent: svc
guards: {` + guards + `}
---

## Execution

### Svc {#svc agent=svc}

` + "```sh {id=pm2 as=json fields=\"status:string restarts:int\"}\necho '{\"status\": \"online\", \"restarts\": 0}'\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`status`" + ` | online | stopped |

| Condition | Action | Guards |
|-----------|--------|--------|
| ` + "`pm2.status == \"stopped\"`" + ` | ` + "`systemctl restart svc`" + ` | ` + row + ` |
`
}

// swapped is key with two letters swapped, a one-keystroke slip.
func swapped(key string) string {
	b := []byte(key)
	b[1], b[2] = b[2], b[1]
	return string(b)
}

// Every guard setting, read from the table that declares them: its example
// lints clean where it may be written (guards:, an action row) and reaches
// the contract, explain says it, and a misspelt or mistyped one is an
// error at its place naming it. A setting added to the table is tested
// here with no edit.
func TestEveryGuardSettingIsReadAsDeclared(t *testing.T) {
	base, ds := Parse("guarded.md", []byte(guardSrc("", "")), Options{})
	if ds.HasErrors() {
		t.Fatalf("the base contract: %v", ds)
	}
	baseRow := Explain(base).Stages[0].Actions[0].Guards.Said
	for _, s := range GuardSettings() {
		t.Run(s.Name, func(t *testing.T) {
			if s.Doc == "" || s.Example == "" || s.Example == s.Default {
				t.Fatalf("%s declares no doc, or no example other than its default (%q)", s.Name, s.Default)
			}
			if s.Contract {
				c, ds := Parse("guarded.md", []byte(guardSrc(s.Name+": "+s.Example, "")), Options{})
				if ds.HasErrors() {
					t.Fatalf("guards: {%s: %s}: %v", s.Name, s.Example, ds)
				}
				if reflect.DeepEqual(s.value(&c.Guards), s.value(&base.Guards)) {
					t.Errorf("guards: {%s: %s} left the value at %v", s.Name, s.Example, s.value(&base.Guards))
				}
				said, _ := contractSaid(c)
				if baseSaid, _ := contractSaid(base); reflect.DeepEqual(said, baseSaid) {
					t.Errorf("explain says the same with and without %s: %v", s.Name, said)
				}
				_, ds = Parse("guarded.md", []byte(guardSrc(swapped(s.Name)+": "+s.Example, "")), Options{})
				if !strings.Contains(ds.String(), `did you mean "`+s.Name+`"`) || !strings.Contains(ds.String(), "guarded.md:5:") {
					t.Errorf("misspelt %s: %v", swapped(s.Name), ds)
				}
				_, ds = Parse("guarded.md", []byte(guardSrc(s.Name+": [1]", "")), Options{})
				if !strings.Contains(ds.String(), "guarded.md:5:") || !strings.Contains(ds.String(), "guards."+s.Name) {
					t.Errorf("%s: [1]: %v", s.Name, ds)
				}
			}
			if s.Row {
				ex := s.Example
				if s.RowExample != "" {
					ex = s.RowExample
				}
				c, ds := Parse("guarded.md", []byte(guardSrc("", s.Name+"="+ex)), Options{})
				if ds.HasErrors() {
					t.Fatalf("row %s=%s: %v", s.Name, ex, ds)
				}
				a := c.Stages[0].Actions[0]
				if _, set := s.rowValue(a); !set {
					t.Errorf("row %s=%s is not the row's", s.Name, ex)
				}
				if said := Explain(c).Stages[0].Actions[0].Guards.Said; reflect.DeepEqual(said, baseRow) && s.Name != "timeout" {
					t.Errorf("the row's guards line says the same with and without %s=%s: %v", s.Name, ex, said)
				}
				_, ds = Parse("guarded.md", []byte(guardSrc("", swapped(s.Name)+"="+ex)), Options{})
				if !strings.Contains(ds.String(), `unknown guard "`+swapped(s.Name)+`"`) || !strings.Contains(ds.String(), `did you mean "`+s.Name+`"`) {
					t.Errorf("misspelt row %s: %v", swapped(s.Name), ds)
				}
			}
		})
	}
}
