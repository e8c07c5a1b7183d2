package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/yuin/goldmark/ast"
)

// Type is the type of a value a step produces, as expressions read it.
type Type string

// The types of step values. A JSON number that is whole is an int at run
// time and a float otherwise; expressions compare the two freely.
const (
	TypeString Type = "string"
	TypeInt    Type = "int"
	TypeFloat  Type = "float"
	TypeBool   Type = "bool"
	TypeList   Type = "list"
	TypeMap    Type = "map"
	TypeAny    Type = "any" // null in an example, or a value of no one type
)

// typeNames are the type names a fields= declaration may use, with what
// each stands for ("number" is a float, which an int compares with).
var typeNames = map[string]Type{
	"string": TypeString, "int": TypeInt, "float": TypeFloat, "number": TypeFloat,
	"bool": TypeBool, "list": TypeList, "map": TypeMap, "any": TypeAny,
}

// typeNameList is typeNames' keys as prose, for errors.
const typeNameList = "string, int, float, number, bool, list, map or any"

// Value is one value a step produces: the name expressions read it by,
// its type and a line saying what it holds. A step kind declares the
// values every step of it produces (StepKind.Values), and each form of
// as= what it adds; lint checks every field, cell and condition against
// them, explain and the docs' tables list them, and the run produces
// exactly these.
type Value struct {
	Name string
	Type Type
	Doc  string
}

// AsForm is one way a step may read its output (`as=json`): the values it
// adds to the kind's, and what it does.
type AsForm struct {
	Name   string
	Doc    string
	Values []Value
	// JSON marks the form whose output's fields become values: the names
	// are the author's (an example block or fields=), known to lint only
	// when declared.
	JSON bool
}

// The as= forms the built-in kinds offer.
var (
	AsText = AsForm{Name: "text", Doc: "the output as text only (the default)"}
	AsJSON = AsForm{Name: "json", JSON: true,
		Doc:    "parse the output as JSON: its fields become values, top level, declared by an example block or fields=",
		Values: []Value{{"json", TypeAny, "the whole decoded JSON output"}}}
	AsLines = AsForm{Name: "lines", Doc: "split stdout into its non-empty lines",
		Values: []Value{{"lines", TypeList, "stdout's non-empty lines, each trimmed of spaces at its ends"}}}
)

// Values every step of every kind produces.
var (
	valueDuration    = Value{"duration", TypeFloat, "the step's run time in seconds"}
	valueTimedOut    = Value{"timed_out", TypeBool, "the step's deadline fired (timeout=)"}
	valueUnreachable = Value{"unreachable", TypeBool, "the target could not be reached: the step is unreachable whatever its table says"}
)

// ExecValues are the values of a step a shell runs (bash, sh).
var ExecValues = []Value{
	{"stdout", TypeString, "standard output, trailing newlines trimmed; a cell's ordering (`< 90`) reads a number in it as that number"},
	{"stderr", TypeString, "standard error, trailing newlines trimmed"},
	{"exit_code", TypeInt, "the script's exit status (124 when its deadline killed it)"},
	valueDuration, valueTimedOut, valueUnreachable,
}

// asForm returns the form of as= named name that kind k offers, or nil.
func (k *StepKind) asForm(name string) *AsForm {
	for i := range k.As {
		if k.As[i].Name == name {
			return &k.As[i]
		}
	}
	return nil
}

// asFormNames are the names of the forms of as= kind k offers.
func asFormNames(k *StepKind) []string {
	names := make([]string, len(k.As))
	for i, f := range k.As {
		names[i] = f.Name
	}
	return names
}

// asNames lists the forms of as= kind k offers, as prose.
func (k *StepKind) asNames() string { return joinWords(asFormNames(k), "or") }

// readsJSON reports whether a step's output may become values at run time:
// as=json, or a kind that reads a JSON answer by itself (http) when as=
// does not say otherwise.
func (st *Step) readsJSON() bool {
	if st.As == AsJSON.Name {
		return true
	}
	k := stepKind(st.Kind)
	return st.As == "" && k != nil && k.JSON
}

// stepValues are the values one step produces, as lint knows them.
type stepValues struct {
	step *Step
	// types are the step's values by name: its kind's, its as= form's and
	// its declared JSON fields (those by dotted path too, `result.status`).
	types map[string]Type
	// open is set when the step reads JSON whose fields are not declared:
	// a name lint does not know may still be there at run time.
	open bool
	// asStruct is the step as the type checker sees it by id (stepType).
	asStruct reflect.Type
}

// has reports whether name (a top-level name) is one of the values.
func (v *stepValues) has(name string) bool {
	_, ok := v.types[name]
	return ok
}

// names lists the top-level names, sorted: what a near miss is compared
// with.
func (v *stepValues) names() []string {
	var out []string
	for n := range v.types {
		if !strings.Contains(n, ".") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// path checks a dotted path below a declared value: "" when the values
// have it (or lint cannot know: an undeclared JSON step, a map or a value
// of type any with no declared fields below it), otherwise the part that
// is missing and the names beside it.
func (v *stepValues) path(parts []string) (missing string, near []string) {
	prefix := parts[0]
	for _, p := range parts[1:] {
		t, ok := v.types[prefix]
		if !ok {
			return "", nil // the root is checked by the caller
		}
		children := v.children(prefix)
		if len(children) == 0 {
			// Nothing declared below: a map or an any is open; a string,
			// a number or a bool has no fields.
			if t == TypeMap || t == TypeAny || t == TypeList {
				return "", nil
			}
			return prefix + "." + p, nil
		}
		next := prefix + "." + p
		if _, ok := v.types[next]; !ok {
			return next, children
		}
		prefix = next
	}
	return "", nil
}

// children are the names declared directly below prefix.
func (v *stepValues) children(prefix string) []string {
	var out []string
	for n := range v.types {
		if rest, ok := strings.CutPrefix(n, prefix+"."); ok && !strings.Contains(rest, ".") {
			out = append(out, rest)
		}
	}
	sort.Strings(out)
	return out
}

// Values returns what the step produces, as lint checks what reads it:
// its kind's values, its as= form's, then the JSON fields its author
// declared (by dotted path, sorted, with no doc), each name once. A step
// of no registered kind produces none.
func (st *Step) Values() []Value {
	var out []Value
	seen := map[string]bool{}
	add := func(x Value) {
		if !seen[x.Name] {
			seen[x.Name] = true
			out = append(out, x)
		}
	}
	if k := stepKind(st.Kind); k != nil {
		for _, x := range k.Values {
			add(x)
		}
		form := st.As
		if form == "" && st.readsJSON() {
			form = AsJSON.Name
		}
		if f := k.asForm(form); f != nil {
			for _, x := range f.Values {
				add(x)
			}
		}
	}
	if st.readsJSON() {
		for _, p := range sortedKeys(st.Fields) {
			add(Value{Name: p, Type: st.Fields[p]})
		}
	}
	return out
}

// ValueType returns the type of the value name (a dotted path for a
// declared JSON field) that st produces, as lint knows it, and false
// when st does not declare it.
func (st *Step) ValueType(name string) (Type, bool) {
	for _, v := range st.Values() {
		if v.Name == name {
			return v.Type, true
		}
	}
	return "", false
}

// valuesOf returns the values step st produces, built once per step.
func (b *bodyParser) valuesOf(st *Step) *stepValues {
	if v, ok := b.values[st]; ok {
		return v
	}
	v := &stepValues{step: st, types: map[string]Type{}, open: st.readsJSON() && st.Fields == nil}
	for _, x := range st.Values() {
		v.types[x.Name] = x.Type
	}
	if b.values == nil {
		b.values = map[*Step]*stepValues{}
	}
	b.values[st] = v
	return v
}

// parseFields reads a fields= attribute: `name:type` items separated by
// spaces or commas, a name a dotted path (`result.status:string`). It
// returns the fields by path, with the parents of a dotted path declared
// as maps, or an error naming the first item it cannot read.
func parseFields(s string) (map[string]Type, error) {
	out := map[string]Type{}
	items := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(items) == 0 {
		return nil, fmt.Errorf("fields: expected name:type items, like fields=\"status:string restarts:int\"")
	}
	for _, item := range items {
		name, typ, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("fields: %q needs a type (name:type, the type one of %s)", item, typeNameList)
		}
		if !reIdent.MatchString(name) {
			return nil, fmt.Errorf("fields: %q is not a field name (letters, digits, _ and dots)", name)
		}
		t, ok := typeNames[typ]
		if !ok {
			return nil, fmt.Errorf("fields: unknown type %q for %s (want %s)%s", typ, name, typeNameList, hint(typ, sortedKeys(typeNames), ""))
		}
		declareField(out, name, t)
	}
	return out, nil
}

// declareField records path with its type, and each parent of a dotted
// path as a map unless declared otherwise.
func declareField(out map[string]Type, path string, t Type) {
	out[path] = t
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
		if _, ok := out[path[:i]]; !ok {
			out[path[:i]] = TypeMap
		}
	}
}

// exampleFields declares the fields of a JSON example of a step's output:
// every key of the object, nested objects' keys by dotted path, each with
// the type of its example value (null: any). It returns an error when the
// example is not a JSON object.
func exampleFields(v any) (map[string]Type, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("an example output must be a JSON object, the step's fields its keys")
	}
	out := map[string]Type{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, x := range m {
			p := prefix + k
			out[p] = jsonType(x)
			if sub, ok := x.(map[string]any); ok {
				walk(p+".", sub)
			}
		}
	}
	walk("", m)
	return out, nil
}

// jsonType is the type of a decoded JSON value (numbers decoded as
// json.Number or float64).
func jsonType(x any) Type {
	switch n := x.(type) {
	case nil:
		return TypeAny
	case string:
		return TypeString
	case bool:
		return TypeBool
	case float64:
		if n == float64(int64(n)) {
			return TypeInt
		}
		return TypeFloat
	case interface{ Int64() (int64, error) }:
		if _, err := n.Int64(); err == nil {
			return TypeInt
		}
		return TypeFloat
	case []any:
		return TypeList
	case map[string]any:
		return TypeMap
	}
	return TypeAny
}

// exampleBlock is a fenced ```json {example=ID} block: an example of step
// ID's output, which declares its fields.
type exampleBlock struct {
	step   string
	idPos  Pos // the example= attribute
	tm     textMap
	fenced Pos
}

// exampleBlock reads a ```json {example=ID} block's attributes; the block
// is bound to its step once every step is known (bindExamples).
func (b *bodyParser) exampleBlock(f *ast.FencedCodeBlock, inner string, off int) {
	at := b.s.pos(f.Info.Segment.Start)
	attrs, aerr := parseAttrs(inner, off)
	if aerr != nil {
		b.d.errorf(b.s.pos(aerr.Off), "example attributes: %s", aerr.Msg)
		return
	}
	ex := exampleBlock{fenced: at, tm: blockText(f, b.s.src)}
	for _, a := range attrs {
		if a.Key != "example" {
			b.d.errorf(b.s.pos(a.Off), "unknown example attribute %q (an example block takes only example=STEP)", a.Key)
			return
		}
		ex.step, ex.idPos = a.Value, b.s.pos(a.Off)
	}
	b.examples = append(b.examples, ex)
}

// requireFields refuses a step of a kind whose output must be declared
// (StepKind.FieldsRequired) and is not: its output is checked against
// the declaration at run time, so without one nothing could pass.
func (b *bodyParser) requireFields() {
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			if k := stepKind(s.Kind); k != nil && k.FieldsRequired && s.Fields == nil {
				b.d.errorf(s.Pos, "step %s: %s %s step's output must be declared, each field with its type: its report is checked against the declaration, and the briefing lists it; "+
					"add fields=\"NAME:TYPE …\" to the step or an example report (a ```json {example=%s} block)", s.ID, article(s.Kind), s.Kind, s.ID)
			}
		}
	}
}

// bindExamples declares each example's fields on its step: the step must
// read JSON, and the example must be a JSON object. A syntax error is
// reported where it is in the block.
func (b *bodyParser) bindExamples() {
	if len(b.examples) == 0 {
		return
	}
	byID := map[string]*Step{}
	for _, st := range b.c.Stages {
		for _, s := range st.Steps {
			byID[s.ID] = s
		}
	}
	for _, ex := range b.examples {
		s, ok := byID[ex.step]
		if !ok {
			b.d.errorf(ex.idPos, "example=%s: no step has id=%s%s", ex.step, ex.step, hint(ex.step, sortedKeys(byID), ""))
			continue
		}
		if !s.readsJSON() {
			b.d.errorf(ex.idPos, "example=%s: step %s does not read its output as JSON (add as=json to it)", ex.step, ex.step)
			continue
		}
		dec := json.NewDecoder(strings.NewReader(ex.tm.text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			at := ex.fenced
			var se *json.SyntaxError
			if errors.As(err, &se) && len(ex.tm.starts) > 0 {
				at = b.s.pos(ex.tm.fileOff(int(max(se.Offset-1, 0))))
			}
			b.d.errorf(at, "example=%s: the example is not JSON: %v", ex.step, err)
			continue
		}
		fields, err := exampleFields(v)
		if err != nil {
			b.d.errorf(ex.idPos, "example=%s: %v", ex.step, err)
			continue
		}
		if s.Fields == nil {
			s.Fields = fields
			continue
		}
		for p, t := range fields {
			if _, ok := s.Fields[p]; !ok {
				s.Fields[p] = t
			}
		}
	}
}
