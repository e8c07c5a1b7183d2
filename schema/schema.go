// Package schema generates the JSON Schemas of the files an author writes:
// a contract's front matter, an --inventory file and a test file
// (NAME.test.yaml). They are built from the declarations lint and the test
// runner read (contracts.FrontMatterKeys, contracts.InventoryKeys, the
// notifier registry, and engine/replay's File with its tags), so an editor
// that reads them (yaml-language-server) completes, describes and checks
// what contractd accepts. packaging/schema/ holds them as generated;
// `contractd schema NAME` prints one.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/replay"
)

// Names are the schemas there are, in the order `contractd schema` lists
// them; each is packaging/schema/NAME.json.
var Names = []string{"front-matter", "inventory", "test"}

// draft is the JSON Schema dialect the schemas are written in.
const draft = "https://json-schema.org/draft/2020-12/schema"

// Generate returns the schema called name as indented JSON ending in a
// newline. It fails only on a name that is not one of Names, naming the
// nearest.
func Generate(name string) ([]byte, error) {
	var s obj
	switch name {
	case "front-matter":
		s = keySchema(contracts.FrontMatterKeys())
		s["title"] = "contractd contract front matter"
	case "inventory":
		s = keySchema(contracts.InventoryKeys())
		s["title"] = "contractd inventory"
	case "test":
		s = typeSchema(reflect.TypeFor[replay.File](), "")
		s["title"] = "contractd test file (NAME.test.yaml)"
		s["description"] = "recorded step outputs and the verdicts each run must come to: contractd test runs the contract through the engine with a fake clock and no targets"
	default:
		return nil, fmt.Errorf("no schema %q (want %s)%s", name, strings.Join(Names, ", "), contracts.Suggest(name, Names))
	}
	s["$schema"] = draft
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// obj is one JSON Schema object.
type obj = map[string]any

// nullable is the type of a mapping or a list, which the decoders also
// take as null (an empty one).
func nullable(t string) []string { return []string{t, "null"} }

// keySchema is the schema of one front-matter or inventory key.
func keySchema(k contracts.Key) obj {
	s := obj{}
	if k.Doc != "" {
		s["description"] = describe(k.Doc, k.Default)
	}
	switch k.Type {
	case contracts.KeyString:
		s["type"] = "string"
		if len(k.Enum) > 0 {
			s["enum"] = k.Enum
		}
		if k.Pattern != "" {
			s["pattern"] = k.Pattern
		}
	case contracts.KeyInt:
		s["type"] = "integer"
		if k.Min > 0 {
			s["minimum"] = k.Min
		}
		if k.Max > 0 {
			s["maximum"] = k.Max
		}
		if len(k.Enum) > 0 {
			var ints []int
			for _, e := range k.Enum {
				n, err := strconv.Atoi(e)
				if err != nil {
					panic("schema: int key " + k.Name + " with enum " + e)
				}
				ints = append(ints, n)
			}
			s["enum"] = ints
		}
	case contracts.KeyBool:
		s["type"] = "boolean"
		if len(k.Enum) == 1 {
			s["const"] = k.Enum[0] == "true"
		}
	case contracts.KeyDuration:
		dur := obj{"type": "string", "pattern": contracts.DurationPattern}
		if k.Zero {
			s["anyOf"] = []obj{dur, {"const": 0}}
		} else {
			mergeInto(s, dur)
		}
	case contracts.KeyScalar:
		s["type"] = []string{"string", "number", "boolean", "null"}
	case contracts.KeyFraction:
		s["anyOf"] = []obj{
			{"type": "number", "exclusiveMinimum": 0, "maximum": 1},
			{"type": "string", "pattern": `^\s*[0-9]+(\.[0-9]*)?%\s*$`},
		}
	case contracts.KeyStrings:
		s["anyOf"] = []obj{{"type": "string"}, {"type": "array", "items": obj{"type": "string"}}}
	case contracts.KeyList:
		s["type"] = nullable("array")
		if k.Each != nil {
			s["items"] = keySchema(*k.Each)
		}
	case contracts.KeyMapping:
		s["type"] = nullable("object")
		if len(k.Keys) > 0 {
			props := obj{}
			var required []string
			for _, c := range k.Keys {
				props[c.Name] = keySchema(c)
				if c.Required {
					required = append(required, c.Name)
				}
			}
			s["properties"] = props
			s["additionalProperties"] = false
			if len(required) > 0 {
				s["required"] = required
			}
		}
		if k.Each != nil {
			// Names of the author's: the pattern is the names'.
			each := *k.Each
			if each.Pattern != "" {
				s["propertyNames"] = obj{"pattern": each.Pattern}
			}
			if each.Type != contracts.KeyString {
				each.Pattern = ""
			}
			s["additionalProperties"] = keySchema(each)
		}
		if len(k.OneOf) > 0 {
			var one []obj
			for _, n := range k.OneOf {
				one = append(one, obj{"required": []string{n}})
			}
			s["oneOf"] = one
		}
	case contracts.KeyRoutes:
		s["type"] = nullable("array")
		s["items"] = routeSchema()
	default:
		panic("schema: key " + k.Name + " of type " + string(k.Type))
	}
	return s
}

// routeSchema is one notify route: a one-key mapping whose key is a
// notifier kind and whose value that kind's options.
func routeSchema() obj {
	props := obj{}
	for _, kind := range contracts.NotifierKinds() {
		opts := obj{}
		var required []string
		for _, o := range kind.Options {
			opts[o.Name] = optionSchema(o)
			if o.Required {
				required = append(required, o.Name)
			}
		}
		ks := obj{"type": nullable("object"), "description": "the " + kind.Kind + " notifier's options", "properties": opts, "additionalProperties": false}
		if len(required) > 0 {
			ks["required"] = required
		}
		props[kind.Kind] = ks
	}
	return obj{"type": "object", "description": "one route: its notifier kind and that kind's options",
		"properties": props, "additionalProperties": false, "minProperties": 1, "maxProperties": 1}
}

// filled matches a value with a ${var} in it: option values are checked
// against their type once the vars are filled in, which lint does.
var filled = obj{"type": "string", "pattern": `\$\{[A-Za-z_][A-Za-z0-9_.]*\}`}

// optionSchema is one notifier option, by its declared type.
func optionSchema(o contracts.NotifierOption) obj {
	s := obj{"description": describe(o.Doc, o.Default)}
	switch o.Type {
	case "enum":
		s["anyOf"] = []obj{{"enum": o.Enum}, filled}
	case "count":
		s["anyOf"] = []obj{{"type": "integer", "minimum": 0}, filled}
	case "urls":
		s["type"] = "array"
		s["items"] = obj{"type": "string"}
		s["minItems"] = 1
	case "labels":
		s["type"] = "object"
		s["additionalProperties"] = obj{"type": []string{"string", "number", "boolean"}}
	default: // string, url, env, path, duration: text, checked after ${var}
		s["type"] = "string"
		if o.Type == "duration" {
			s["anyOf"] = []obj{{"pattern": contracts.DurationPattern}, filled}
		}
	}
	return s
}

// describe is a key's doc with its default.
func describe(doc, def string) string {
	if def == "" {
		return doc
	}
	return doc + " (default " + def + ")"
}

func mergeInto(dst, src obj) {
	for k, v := range src {
		dst[k] = v
	}
}

// enums are the value lists a test file's `enum` tag names.
var enums = map[string]func() []string{
	"severity": severityNames,
}

// severityNames are the severities by name, in the order the engine
// escalates them.
func severityNames() []string {
	var out []string
	for s := contracts.SeverityUnknown; !strings.HasPrefix(s.String(), "severity("); s++ {
		out = append(out, s.String())
	}
	return out
}

// typeSchema is the schema of a Go type the test file decodes into, read
// from its yaml tags and the doc, enum, type, key and required tags. doc
// is the field's doc.
func typeSchema(t reflect.Type, doc string) obj {
	s := obj{}
	if doc != "" {
		s["description"] = doc
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		s["type"] = "object"
		props := obj{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			if f.Tag.Get("doc") == "" {
				panic("schema: " + t.Name() + "." + f.Name + " has no doc tag")
			}
			props[name] = fieldSchema(f)
			if f.Tag.Get("required") == "true" {
				required = append(required, name)
			}
		}
		s["properties"] = props
		s["additionalProperties"] = false
		if len(required) > 0 {
			sort.Strings(required)
			s["required"] = required
		}
	case reflect.String:
		s["type"] = "string"
	case reflect.Int, reflect.Int64:
		s["type"] = "integer"
	case reflect.Bool:
		s["type"] = "boolean"
	case reflect.Interface:
		// any value (an http body: a string or JSON)
	default:
		panic("schema: no schema for " + t.String())
	}
	return s
}

// fieldSchema is one struct field: its type, and what its tags add.
func fieldSchema(f reflect.StructField) obj {
	doc := f.Tag.Get("doc")
	t := f.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s obj
	switch t.Kind() {
	case reflect.Map:
		s = obj{"type": "object", "description": doc, "additionalProperties": valueSchema(t.Elem(), f)}
		if f.Tag.Get("key") == "stage/step" {
			s["propertyNames"] = obj{"pattern": "^[^/]+/.+$"}
		}
	case reflect.Slice:
		s = obj{"type": "array", "description": doc, "items": valueSchema(t.Elem(), f)}
	default:
		s = valueSchema(f.Type, f)
		s["description"] = doc
	}
	return s
}

// valueSchema is a field's value (or its items'), with the field's enum
// and type tags applied to a string.
func valueSchema(t reflect.Type, f reflect.StructField) obj {
	s := typeSchema(t, "")
	if s["type"] != "string" {
		return s
	}
	if e := f.Tag.Get("enum"); e != "" {
		list, ok := enums[e]
		if !ok {
			panic("schema: unknown enum " + e)
		}
		s["enum"] = list()
	}
	if f.Tag.Get("type") == "duration" {
		s["pattern"] = contracts.DurationPattern
	}
	return s
}
