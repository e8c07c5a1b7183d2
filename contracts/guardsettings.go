package contracts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// GuardSetting is one setting of the guards, declared once: a key of the
// front matter's guards: mapping (Contract), a key=value of an action
// row's Guards cell (Row), or both, with its type, default, doc and what
// explain says of it. The decoder, lint, explain (the contract's guards
// line and every row's), the JSON Schema, the language server and the
// docs' table all read the table of them (GuardSettings). The one other
// place a built-in setting is named is the typed fields of explain --json
// (PlanGuards, PlanActGuards), kept as they were for the programs that
// read them; a registered setting appears there under settings.
//
// The built-in settings are bound to their fields of Guards and
// ActionGuard (Set, Get, SetRow, GetRow). A guard registered beyond them
// (package guard's table) declares its settings without a binding: their
// values are kept by key (Guards.Setting, ActionGuard.Settings).
type GuardSetting struct {
	// Key is the setting's name, type, doc, default (as written), range,
	// enum and, for a mapping, its keys.
	Key
	// Contract marks a key of guards:; Row a key an action row's Guards
	// cell takes, which overrides the contract's where both are set.
	Contract, Row bool
	// RowExample is a value as a row writes it, when that differs from
	// Example (slow_retry=3 then 5x).
	RowExample string
	// PerRow marks a contract-wide setting explain also says on every
	// action row, though a row cannot set it (the debounce).
	PerRow bool
	// Parse reads a string setting's text into its value (a budget's "1
	// per 10m"); nil keeps the text.
	Parse func(string) (any, error)
	// ParseRow reads a row's text when a row writes it differently from
	// the front matter (slow_retry=3 then 5x); nil reads it by Type, then
	// Parse.
	ParseRow func(string) (any, error)
	// Build makes a mapping's value of its keys as decoded (only those
	// written are present) and says what is wrong with them together (a
	// crash loop needs both max_restarts and per); nil keeps the map.
	Build func(m map[string]any) (any, error)
	// Say is the setting's value as explain says it ("debounce 5m",
	// "verify after 30s"); every is the schedule's interval. "" leaves it
	// out. Nil says the name and the value ("quiet hours 22:00-06:00").
	Say func(v any, every time.Duration) string

	// Set and Get bind a built-in setting to its field of Guards; SetRow
	// and GetRow to its field of an action row (GetRow's ok says the row
	// sets it). Nil for a registered guard's setting.
	Set    func(g *Guards, v any)
	Get    func(g *Guards) any
	SetRow func(a *ActionRow, v any)
	GetRow func(a *ActionRow) (any, bool)

	// def is Default as a value, for a setting without a binding.
	def any
}

// GuardSettings returns every guard setting, the built-in ones first and
// then those registered, in order: the order the decoder lists their keys
// and explain says them.
func GuardSettings() []GuardSetting {
	out := make([]GuardSetting, len(guardSettings))
	for i, s := range guardSettings {
		out[i] = *s
	}
	return out
}

// RegisterGuardSetting makes the decoder, lint, explain, the schema and
// the language server know the setting of a guard registered beyond the
// built-in ones (package guard calls it for its table's rows). Its value
// is kept by key: Guards.Setting and ActionGuard.Settings. It is not safe
// to call once contracts are being read; it panics on an empty or
// duplicate name, a setting that is neither a contract's nor a row's, a
// binding (those are the built-in settings'), and a default its own type
// does not read.
func RegisterGuardSetting(s GuardSetting) {
	switch {
	case s.Name == "":
		panic("contracts: a guard setting without a name")
	case guardSetting(s.Name) != nil:
		panic("contracts: duplicate guard setting " + s.Name)
	case !s.Contract && !s.Row:
		panic("contracts: guard setting " + s.Name + " is neither a contract's (Contract) nor a row's (Row)")
	case s.Set != nil || s.Get != nil || s.SetRow != nil || s.GetRow != nil:
		panic("contracts: guard setting " + s.Name + " binds a field: a registered setting is kept by key")
	case s.Doc == "":
		panic("contracts: guard setting " + s.Name + " has no doc")
	}
	if s.Default != "" {
		v, err := s.parseText(s.Default, s.Parse)
		if err != nil {
			panic(fmt.Sprintf("contracts: guard setting %s: default: %v", s.Name, err))
		}
		s.def = v
	}
	guardSettings = append(guardSettings, &s)
}

// guardSetting returns the setting named key, or nil.
func guardSetting(key string) *GuardSetting {
	for _, s := range guardSettings {
		if s.Name == key {
			return s
		}
	}
	return nil
}

// guardKeys are the keys of guards:, in order.
func guardKeys() []string {
	var out []string
	for _, s := range guardSettings {
		if s.Contract {
			out = append(out, s.Name)
		}
	}
	return out
}

// rowGuardKeys are the keys an action row's Guards cell takes, in order.
func rowGuardKeys() []string {
	var out []string
	for _, s := range guardSettings {
		if s.Row {
			out = append(out, s.Name)
		}
	}
	return out
}

// Setting returns the value in force of a registered guard's setting
// (RegisterGuardSetting): the contract's, else its default; nil when
// neither is set. A built-in setting is its field.
func (g Guards) Setting(key string) any {
	if v, ok := g.Settings[key]; ok {
		return v
	}
	if s := guardSetting(key); s != nil {
		return s.def
	}
	return nil
}

// value is the setting's value in force in g.
func (s *GuardSetting) value(g *Guards) any {
	if s.Get != nil {
		return s.Get(g)
	}
	if !s.Contract {
		return nil
	}
	return g.Setting(s.Name)
}

// set puts v, decoded from guards:, into g.
func (s *GuardSetting) set(g *Guards, v any) {
	if s.Set != nil {
		s.Set(g, v)
		return
	}
	if g.Settings == nil {
		g.Settings = map[string]any{}
	}
	g.Settings[s.Name] = v
}

// rowValue is the row's own value of the setting, if it sets one.
func (s *GuardSetting) rowValue(a *ActionRow) (any, bool) {
	if s.GetRow != nil {
		return s.GetRow(a)
	}
	v, ok := a.Guard.Settings[s.Name]
	return v, ok
}

// setRow puts v, read from a row's Guards cell, into a.
func (s *GuardSetting) setRow(a *ActionRow, v any) {
	if s.SetRow != nil {
		s.SetRow(a, v)
		return
	}
	if a.Guard.Settings == nil {
		a.Guard.Settings = map[string]any{}
	}
	a.Guard.Settings[s.Name] = v
}

// say is the setting's value as explain says it.
func (s *GuardSetting) say(v any, every time.Duration) string {
	if s.Say != nil {
		return s.Say(v, every)
	}
	return strings.ReplaceAll(s.Name, "_", " ") + " " + showValue(v)
}

// showValue writes a setting's value as a contract would.
func showValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "off"
	case time.Duration:
		return fmtDuration(x)
	case float64:
		return strconv.FormatFloat(100*x, 'g', -1, 64) + "%"
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// parseText reads a setting written as text (a row's key=value, a
// registered setting's default) by its type, then with parse.
func (s *GuardSetting) parseText(text string, parse func(string) (any, error)) (any, error) {
	switch s.Type {
	case KeyInt:
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil || n < max(s.Min, 1) || s.Max > 0 && n > s.Max {
			return nil, fmt.Errorf("must be a whole number %s, got %q", s.rangeText(), text)
		}
		return n, nil
	case KeyDuration:
		d, err := ParseDuration(text)
		if err != nil || d < 0 || d == 0 && !s.Zero {
			return nil, fmt.Errorf("must be a duration like 30s, got %q", text)
		}
		return d, nil
	case KeyBool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("must be true or false, got %q", text)
		}
		return b, nil
	case KeyFraction:
		f, ok := parseFraction(text)
		if !ok {
			return nil, fmt.Errorf("want a fraction such as 50%% or 0.5, got %q", text)
		}
		return f, nil
	case KeyString:
		if len(s.Enum) > 0 && !contains(s.Enum, text) {
			return nil, fmt.Errorf("must be %s, got %q%s", joinWords(s.Enum, "or"), text, hint(text, s.Enum, ""))
		}
		if parse != nil {
			return parse(text)
		}
		return text, nil
	}
	return nil, fmt.Errorf("a %s is not written in a row", s.Type)
}

// rangeText says the least (and most) an int setting takes.
func (k Key) rangeText() string {
	if k.Max > 0 {
		return fmt.Sprintf("from %d to %d", max(k.Min, 1), k.Max)
	}
	return fmt.Sprintf("of at least %d", max(k.Min, 1))
}

// parseFraction reads a share written as 50% or 0.5, above 0 and at most 1.
func parseFraction(text string) (float64, bool) {
	text = strings.TrimSpace(text)
	pct := strings.HasSuffix(text, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(text, "%"), 64)
	if pct {
		f /= 100
	}
	return f, err == nil && f > 0 && f <= 1
}

// decodeGuards reads guards: by the table, each key by its setting.
func (y *yamlDec) decodeGuards(n ast.Node, g *Guards) {
	entries, _ := y.mapping(n, "guards")
	for _, e := range entries {
		s := guardSetting(e.key)
		if s == nil || !s.Contract {
			y.unknownKey(e, "guards", guardKeys())
			continue
		}
		if v, ok := y.settingValue(s, e, "guards."+e.key); ok {
			s.set(g, v)
		}
	}
}

// settingValue decodes one setting's value from its entry: by its type,
// a mapping key by key, then Parse or Build.
func (y *yamlDec) settingValue(s *GuardSetting, e entry, what string) (any, bool) {
	if s.Type != KeyMapping {
		v, ok := y.keyValue(s.Key, e.value, what)
		if ok && s.Parse != nil {
			var err error
			if v, err = s.Parse(v.(string)); err != nil {
				y.d.errorf(y.pos(e.value), "%s: %v", what, err)
				return nil, false
			}
		}
		return v, ok
	}
	m := map[string]any{}
	sub, ok := y.mapping(e.value, what)
	names := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		names[i] = k.Name
	}
	for _, kv := range sub {
		i := slices.Index(names, kv.key)
		if i < 0 {
			y.unknownKey(kv, what, names)
			continue
		}
		if v, good := y.keyValue(s.Keys[i], kv.value, what+"."+kv.key); good {
			m[kv.key] = v
		} else {
			ok = false // said where it is; the whole is not judged again
		}
	}
	if !ok {
		return nil, false
	}
	if s.Build == nil {
		return m, true
	}
	v, err := s.Build(m)
	if err != nil {
		y.d.errorf(y.pos(e.keyN), "%s: %v", what, err)
		return nil, false
	}
	return v, true
}

// keyValue decodes a scalar by its key's type, range and enum.
func (y *yamlDec) keyValue(k Key, n ast.Node, what string) (any, bool) {
	switch k.Type {
	case KeyDuration:
		return y.durationOrZero(n, what, k.Zero)
	case KeyInt:
		v, ok := y.integer(n, what)
		if ok && (v < max(k.Min, 1) || k.Max > 0 && v > k.Max) {
			y.d.errorf(y.pos(n), "%s: must be %s, got %d", what, strings.TrimPrefix(k.rangeText(), "of "), v)
			return nil, false
		}
		return v, ok
	case KeyBool:
		return y.boolean(n, what)
	case KeyFraction:
		return y.fraction(n, what)
	case KeyString:
		v, ok := y.str(n, what)
		if ok && len(k.Enum) > 0 && !contains(k.Enum, v) {
			y.d.errorf(y.pos(n), "%s: must be %s, got %q%s", what, joinWords(k.Enum, "or"), v, hint(v, k.Enum, ""))
			return nil, false
		}
		return v, ok
	}
	panic("contracts: a guard setting of type " + string(k.Type))
}

// rowGuard reads one key=value of a row's Guards cell by its setting.
func (s *GuardSetting) rowGuard(a *ActionRow, text string) error {
	var v any
	var err error
	if s.ParseRow != nil {
		v, err = s.ParseRow(text)
	} else {
		v, err = s.parseText(text, s.Parse)
	}
	if err != nil {
		return err
	}
	s.setRow(a, v)
	return nil
}
