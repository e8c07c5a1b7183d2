package contracts

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/contractd/contractd/transports"
)

// Defaults applied before the front matter is decoded.
const (
	DefaultEvery            = 15 * time.Minute
	DefaultDebounce         = 300 * time.Second
	DefaultGrace            = 30 * time.Second
	DefaultRepeat           = 4 * time.Hour
	DefaultStepTimeout      = 30 * time.Second
	DefaultUnreachableAfter = 1
	DefaultRecoverAfter     = 1
	// DefaultUnknownAfter is how many consecutive runs a unit may stay
	// unknown before that is an incident of its own: a monitor that
	// cannot see says so.
	DefaultUnknownAfter = 3
	DefaultAfter        = 1
)

var (
	reName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	reEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	reVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	reBudget  = regexp.MustCompile(`^\s*(\d+)\s+per\s+(\S+)\s*$`)
)

// yamlDec decodes a goccy/go-yaml AST by hand so that every unknown key and
// every wrong type is reported, each at its own position, in one pass.
type yamlDec struct {
	s       *source
	lineOff int // YAML line 1 is file line lineOff+1
	d       *diags
}

func (y *yamlDec) pos(n ast.Node) Pos {
	if n == nil {
		return y.s.lineCol(y.lineOff+1, 1)
	}
	tok := n.GetToken()
	if tok == nil || tok.Position == nil {
		return y.s.lineCol(y.lineOff+1, 1)
	}
	col := tok.Position.Column
	if col < 1 {
		col = 1
	}
	return y.s.lineCol(tok.Position.Line+y.lineOff, col)
}

// textPos is where a scalar's text starts: its position, or one column
// after it when the scalar is quoted.
func (y *yamlDec) textPos(n ast.Node) Pos {
	p := y.pos(n)
	line := []rune(y.s.lineText(p.Line))
	if p.Col-1 < len(line) && (line[p.Col-1] == '"' || line[p.Col-1] == '\'') {
		p.Col++
	}
	return p
}

// syntaxError converts a goccy parse error into a positioned diagnostic.
func (y *yamlDec) syntaxError(err error) {
	var ye yaml.Error
	if errors.As(err, &ye) {
		msg := ye.GetMessage()
		if tok := ye.GetToken(); tok != nil && tok.Position != nil {
			col := tok.Position.Column
			if col < 1 {
				col = 1
			}
			y.d.errorf(y.s.lineCol(tok.Position.Line+y.lineOff, col), "YAML: %s", msg)
			return
		}
		y.d.errorf(y.s.lineCol(y.lineOff+1, 1), "YAML: %s", msg)
		return
	}
	y.d.errorf(y.s.lineCol(y.lineOff+1, 1), "YAML: %v", err)
}

// parse returns the document body, or nil after reporting a syntax error
// or a text over the YAML limits (checkYAMLShape).
func (y *yamlDec) parse(src []byte) (ast.Node, bool) {
	if e := checkYAMLShape(src); e != nil {
		// Over a limit: the YAML parser never sees the text.
		y.d.errorf(y.s.lineCol(e.line+y.lineOff, e.col), "YAML: %s", e.msg)
		return nil, false
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		y.syntaxError(err)
		return nil, false
	}
	if f == nil || len(f.Docs) == 0 || f.Docs[0] == nil {
		return nil, true
	}
	if len(f.Docs) > 1 {
		y.d.errorf(y.pos(f.Docs[1]), "YAML: only one document is allowed")
	}
	return unwrap(f.Docs[0].Body), true
}

func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		case *ast.DocumentNode:
			n = v.Body
		default:
			return n
		}
	}
}

func kindName(n ast.Node) string {
	switch unwrap(n).(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.AliasNode:
		return "an alias"
	default:
		return "an unsupported value"
	}
}

// entry is one key of a mapping.
type entry struct {
	key   string
	keyN  ast.Node
	value ast.Node
}

// mapping returns the entries of a mapping node, reporting a wrong type. A
// null value is an empty mapping.
func (y *yamlDec) mapping(n ast.Node, what string) ([]entry, bool) {
	n = unwrap(n)
	var mvs []*ast.MappingValueNode
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return nil, true
	case *ast.MappingNode:
		mvs = v.Values
	case *ast.MappingValueNode:
		mvs = []*ast.MappingValueNode{v}
	default:
		y.d.errorf(y.pos(n), "%s: expected a mapping, got %s", what, kindName(n))
		return nil, false
	}
	out := make([]entry, 0, len(mvs))
	seen := make(map[string]bool, len(mvs))
	for _, mv := range mvs {
		if mv == nil || mv.Key == nil {
			continue
		}
		k := mv.Key.GetToken()
		key := ""
		if k != nil {
			key = k.Value
		}
		if seen[key] {
			y.d.errorf(y.pos(mv.Key), "%s: duplicate key %q", what, key)
			continue
		}
		seen[key] = true
		out = append(out, entry{key: key, keyN: mv.Key, value: unwrap(mv.Value)})
	}
	return out, true
}

func (y *yamlDec) unknownKey(e entry, what string, known []string) {
	y.d.errorf(y.pos(e.keyN), "unknown key %q in %s%s", e.key, what, hint(e.key, known, ""))
}

// str accepts a string scalar.
func (y *yamlDec) str(n ast.Node, what string) (string, bool) {
	switch v := unwrap(n).(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value != nil {
			return v.Value.Value, true
		}
		return "", true
	}
	y.d.errorf(y.pos(n), "%s: expected a string, got %s", what, kindName(n))
	return "", false
}

// scalarText accepts any scalar and returns it as written (numbers keep their
// spelling, so `version: 3.10` stays "3.10").
func (y *yamlDec) scalarText(n ast.Node, what string) (string, bool) {
	switch v := unwrap(n).(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value != nil {
			return v.Value.Value, true
		}
		return "", true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return v.GetToken().Value, true
	case *ast.NullNode:
		return "", true
	}
	y.d.errorf(y.pos(n), "%s: expected a scalar, got %s", what, kindName(n))
	return "", false
}

func (y *yamlDec) integer(n ast.Node, what string) (int, bool) {
	if v, ok := unwrap(n).(*ast.IntegerNode); ok {
		switch x := v.Value.(type) {
		case int64:
			return int(x), true
		case uint64:
			return int(x), true
		}
	}
	y.d.errorf(y.pos(n), "%s: expected an integer, got %s", what, kindName(n))
	return 0, false
}

func (y *yamlDec) positive(n ast.Node, what string) (int, bool) {
	v, ok := y.integer(n, what)
	if ok && v < 1 {
		y.d.errorf(y.pos(n), "%s: must be at least 1, got %d", what, v)
		return 0, false
	}
	return v, ok
}

func (y *yamlDec) boolean(n ast.Node, what string) (bool, bool) {
	if v, ok := unwrap(n).(*ast.BoolNode); ok {
		return v.Value, true
	}
	y.d.errorf(y.pos(n), "%s: expected true or false, got %s", what, kindName(n))
	return false, false
}

func (y *yamlDec) duration(n ast.Node, what string) (time.Duration, bool) {
	return y.durationOrZero(n, what, false)
}

// durationOrZero reads a duration; zero ("0s", or the integer 0) is
// accepted only when zero is set.
func (y *yamlDec) durationOrZero(n ast.Node, what string, zero bool) (time.Duration, bool) {
	want := "a duration like 300s, 15m or 1h"
	if zero {
		want += " (0s: none)"
	}
	if i, ok := unwrap(n).(*ast.IntegerNode); ok && zero && fmt.Sprint(i.Value) == "0" {
		return 0, true
	}
	v, ok := unwrap(n).(*ast.StringNode)
	if !ok {
		y.d.errorf(y.pos(n), "%s: expected %s, got %s", what, want, kindName(n))
		return 0, false
	}
	dur, err := ParseDuration(v.Value)
	if err != nil || dur < 0 || dur == 0 && !zero {
		y.d.errorf(y.pos(n), "%s: expected %s, got %q", what, want, v.Value)
		return 0, false
	}
	return dur, true
}

func (y *yamlDec) strList(n ast.Node, what string) ([]string, bool) {
	seq, ok := unwrap(n).(*ast.SequenceNode)
	if !ok {
		if _, null := unwrap(n).(*ast.NullNode); null {
			return nil, true
		}
		y.d.errorf(y.pos(n), "%s: expected a list of strings, got %s", what, kindName(n))
		return nil, false
	}
	out := make([]string, 0, len(seq.Values))
	good := true
	for i, v := range seq.Values {
		s, ok := y.str(v, fmt.Sprintf("%s[%d]", what, i))
		if !ok {
			good = false
			continue
		}
		out = append(out, s)
	}
	return out, good
}

// parseBudget reads "N per DURATION".
func parseBudget(s string) (*Budget, error) {
	m := reBudget.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("expected a budget like \"1 per 10m\", got %q", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("budget count must be at least 1, got %q", m[1])
	}
	w, err := ParseDuration(m[2])
	if err != nil || w <= 0 {
		return nil, fmt.Errorf("budget window must be a duration like 10m, 1h or 1d, got %q", m[2])
	}
	return &Budget{Count: n, Window: w}, nil
}

var topKeys = []string{"kind", "name", "title", "description", "version", "runtime_contract", "agent",
	"report_only_agents", "schedule", "commands", "guards", "targets", "notify", "vars", "secrets",
	"for_each", "alert_on", "log", "messages", "depends_on", "maintenance"}

// frontMatter is what the front matter decoder found besides the model.
type frontMatter struct {
	sawName, sawRuntime bool
	varPos              map[string]Pos
	logPos              Pos   // where the text of log: starts (after a quote)
	reportOnlyPos       []Pos // where each name of report_only_agents is
}

func newContract(path string) *Contract {
	return &Contract{
		Path:     path,
		Kind:     "responsibility",
		Schedule: Schedule{Every: DefaultEvery},
		Guards: Guards{
			Debounce:         DefaultDebounce,
			UnreachableAfter: DefaultUnreachableAfter,
			RecoverAfter:     DefaultRecoverAfter,
			UnknownAfter:     DefaultUnknownAfter,
			After:            DefaultAfter,
			Grace:            DefaultGrace,
			Repeat:           DefaultRepeat,
			Flapping:         &Flapping{Low: DefaultFlapLow, High: DefaultFlapHigh, Runs: DefaultFlapRuns},
		},
		Targets:   map[string]*Target{},
		Vars:      map[string]string{},
		VarValues: map[string]any{},
		ForEach:   map[string][]map[string]any{},
		AlertOn:   "change",
	}
}

// decodeFrontMatter fills c from the front matter mapping.
func (y *yamlDec) decodeFrontMatter(root ast.Node, c *Contract) frontMatter {
	fm := frontMatter{varPos: map[string]Pos{}}
	entries, ok := y.mapping(root, "front matter")
	if !ok {
		return fm
	}
	for _, e := range entries {
		switch e.key {
		case "kind":
			if s, ok := y.str(e.value, e.key); ok {
				if s != "responsibility" {
					y.d.errorf(y.pos(e.value), "kind: must be responsibility, got %q", s)
				}
				c.Kind = s
			}
		case "name":
			if s, ok := y.str(e.value, e.key); ok {
				fm.sawName = true
				if !reName.MatchString(s) {
					y.d.errorf(y.pos(e.value), "name: %q must be letters, digits, '.', '_' or '-'", s)
				}
				c.Name = s
			}
		case "title":
			c.Title, _ = y.str(e.value, e.key)
		case "description":
			c.Description, _ = y.str(e.value, e.key)
		case "version":
			c.Version, _ = y.scalarText(e.value, e.key)
		case "runtime_contract":
			if v, ok := y.integer(e.value, e.key); ok {
				fm.sawRuntime = true
				if v != 2 {
					y.d.errorf(y.pos(e.value), "runtime_contract: this engine runs format 2, got %d", v)
				}
				c.RuntimeContract = v
			} else {
				fm.sawRuntime = true
			}
		case "agent":
			c.Agent, _ = y.str(e.value, e.key)
		case "report_only_agents":
			c.ReportOnlyAgents, _ = y.strList(e.value, e.key)
			if seq, ok := unwrap(e.value).(*ast.SequenceNode); ok {
				for _, v := range seq.Values {
					fm.reportOnlyPos = append(fm.reportOnlyPos, y.pos(v))
				}
			}
		case "schedule":
			y.decodeSchedule(e.value, &c.Schedule)
		case "commands":
			c.Commands, _ = y.strList(e.value, e.key)
			for _, cmd := range c.Commands {
				if !reName.MatchString(cmd) {
					y.d.errorf(y.pos(e.value), "commands: %q is not a valid command name", cmd)
				}
			}
		case "guards":
			y.decodeGuards(e.value, &c.Guards)
		case "targets":
			y.decodeTargets(e.value, c.Targets)
		case "notify":
			c.Notify = y.decodeNotify(e.value)
		case "vars":
			vs := map[string]varValue{}
			y.decodeVars(e.value, vs)
			for k, v := range vs {
				c.Vars[k], c.VarValues[k], fm.varPos[k] = v.text, v.value, v.pos
			}
		case "secrets":
			c.Secrets, _ = y.strList(e.value, e.key)
			for _, s := range c.Secrets {
				if !reEnvName.MatchString(s) {
					y.d.errorf(y.pos(e.value), "secrets: %q is not an environment variable name", s)
				}
			}
		case "for_each":
			y.decodeForEach(e.value, c.ForEach, &c.Defs)
		case "alert_on":
			if s, ok := y.str(e.value, e.key); ok {
				switch s {
				case "change", "repair", "critical":
					c.AlertOn = s
				default:
					y.d.errorf(y.pos(e.value), "alert_on: must be change, repair or critical, got %q%s", s, hint(s, []string{"change", "repair", "critical"}, ""))
				}
			}
		case "log":
			c.Log, _ = y.str(e.value, e.key)
			fm.logPos = y.textPos(e.value)
		case "messages":
			c.Messages = y.decodeMessages(e.value)
		case "depends_on":
			c.DependsOn = y.decodeDependsOn(e.value)
		case "maintenance":
			c.Maintenance = y.decodeMaintenance(e.value)
		default:
			y.unknownKey(e, "front matter", topKeys)
		}
	}
	return fm
}

// decodeMessages reads `messages: {repair: "restarted {{.Unit}} ({{.Seen}})"}`.
func (y *yamlDec) decodeMessages(n ast.Node) map[string]*template.Template {
	out := map[string]*template.Template{}
	entries, _ := y.mapping(n, "messages")
	for _, e := range entries {
		if !contains(messageKinds, e.key) {
			y.unknownKey(e, "messages", messageKinds)
			continue
		}
		text, ok := y.str(e.value, "messages."+e.key)
		if !ok {
			continue
		}
		t, err := parseMessage(e.key, text)
		if err != nil {
			y.d.errorf(y.pos(e.value), "messages.%s: %v", e.key, err)
			continue
		}
		if e.key == "repair" && !readsOutcome(t) {
			y.d.notef(y.pos(e.value), "messages.repair: %s", outcomeNote)
		}
		out[e.key] = t
	}
	return out
}

func (y *yamlDec) decodeSchedule(n ast.Node, s *Schedule) {
	entries, _ := y.mapping(n, "schedule")
	for _, e := range entries {
		switch e.key {
		case "every":
			if d, ok := y.duration(e.value, "schedule.every"); ok {
				s.Every = d
			}
		case "on_start":
			s.OnStart, _ = y.boolean(e.value, "schedule.on_start")
		case "start_delay":
			if d, ok := y.durationOrZero(e.value, "schedule.start_delay", true); ok {
				s.StartDelay = d
			}
		default:
			y.unknownKey(e, "schedule", scheduleKeys)
		}
	}
}

// The keys of the front matter's mappings, as the decoders below read
// them; FrontMatterKeys (keys.go) gives each its type and doc.
var (
	scheduleKeys  = []string{"every", "on_start", "start_delay"}
	inventoryKeys = []string{"vars", "targets"}
)

// fraction reads a share written as 50% or 0.5, above 0 and at most 1.
func (y *yamlDec) fraction(n ast.Node, what string) (float64, bool) {
	text, ok := y.scalarText(n, what)
	if !ok {
		return 0, false
	}
	f, ok := parseFraction(text)
	if !ok {
		y.d.errorf(y.pos(n), "%s: want a fraction such as 50%% or 0.5, got %q", what, text)
	}
	return f, ok
}

// parseSlowRetry reads a row's `slow_retry="3 then 5x"` or `slow_retry=off`.
func parseSlowRetry(s string) (*SlowRetry, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return &SlowRetry{}, nil
	}
	f := strings.Fields(s)
	var after, factor int
	var err1, err2 error = errors.New("missing"), errors.New("missing")
	if len(f) == 3 && f[1] == "then" && strings.HasSuffix(f[2], "x") {
		after, err1 = strconv.Atoi(f[0])
		factor, err2 = strconv.Atoi(strings.TrimSuffix(f[2], "x"))
	}
	if err1 != nil || err2 != nil || after < 1 || factor < 2 {
		return nil, fmt.Errorf(`want "N then Fx" (after N failed repairs in a row, repair every F× the schedule interval, F ≥ 2) or off, got %q`, s)
	}
	return &SlowRetry{After: after, Factor: factor}, nil
}

// targetKeys are the keys a target takes: one transport kind's name (its
// address), the kinds' own options, and via and sudo.
func targetKeys() []string {
	keys := []string{}
	for _, k := range transports.Kinds() {
		keys = append(keys, k.Name)
	}
	keys = append(keys, "via", "sudo")
	for _, k := range transports.Kinds() {
		for _, o := range k.Options {
			if !contains(keys, o) {
				keys = append(keys, o)
			}
		}
	}
	return keys
}

// optionKinds are the kinds that take option o (ssh: known_hosts, …).
func optionKinds(o string) []string {
	var out []string
	for _, k := range transports.Kinds() {
		if contains(k.Options, o) {
			out = append(out, k.Name)
		}
	}
	return out
}

// decodeTargets adds or replaces targets by name (an inventory replaces a
// contract's target wholesale). A target has exactly one transport kind's
// key, whose value that kind checks (transports.Kind.Address); the kinds'
// table says which options and which via each takes.
func (y *yamlDec) decodeTargets(n ast.Node, into map[string]*Target) {
	entries, _ := y.mapping(n, "targets")
	for _, e := range entries {
		what := "targets." + e.key
		t := &Target{Name: e.key, Pos: y.pos(e.keyN)}
		if !reName.MatchString(e.key) {
			y.d.errorf(y.pos(e.keyN), "targets: %q is not a valid target name", e.key)
		}
		// "local" names the engine's own host: it may be declared only
		// as that host, to set its options (sudo).
		sub, ok := y.mapping(e.value, what)
		if !ok {
			continue
		}
		var kindsSet []string
		var options []ast.Node
		for _, s := range sub {
			w := what + "." + s.key
			if k, ok := transports.KindOf(s.key); ok {
				kindsSet = append(kindsSet, k.Name)
				if v, ok := y.targetAddress(s.value, w, k); ok {
					t.Kind, t.Address = k.Name, v
				}
				continue
			}
			if len(optionKinds(s.key)) > 0 {
				options = append(options, s.keyN)
			}
			switch s.key {
			case "via":
				t.Via, _ = y.str(s.value, w)
			case "known_hosts":
				t.KnownHosts, _ = y.str(s.value, w)
			case "host_key":
				if v, ok := y.str(s.value, w); ok {
					if v != "strict" && v != "accept-new" {
						y.d.errorf(y.pos(s.value), "%s: must be strict or accept-new, got %q%s", w, v, hint(v, []string{"strict", "accept-new"}, ""))
					}
					t.HostKey = v
				}
			case "identity":
				if _, single := unwrap(s.value).(*ast.StringNode); single {
					v, _ := y.str(s.value, w)
					t.Identity = []string{v}
				} else {
					t.Identity, _ = y.strList(s.value, w)
				}
			case "connect_timeout":
				t.ConnectTimeout, _ = y.duration(s.value, w)
			case "sudo":
				t.Sudo, _ = y.boolean(s.value, w)
			default:
				y.unknownKey(s, what, targetKeys())
			}
		}
		k, _ := transports.KindOf(t.Kind)
		switch {
		case len(kindsSet) == 0:
			y.d.errorf(y.pos(e.keyN), "%s: needs exactly one of %s", what, transports.KindNames("or"))
			continue
		case len(kindsSet) > 1:
			y.d.errorf(y.pos(e.keyN), "%s: sets %s: a target is exactly one transport kind", what, joinWords(kindsSet, "and"))
		case k.Via == transports.ViaRequired && t.Via == "":
			y.d.errorf(y.pos(e.keyN), "%s: %s needs via (the host it runs on)", what, k.Name)
		case k.Via == transports.ViaNone && t.Via != "":
			y.d.errorf(y.pos(e.keyN), "%s: %s cannot have via", what, k.Name)
		case e.key == "local" && t.Kind != "local":
			y.d.errorf(y.pos(e.keyN), "targets: \"local\" is the engine's own host: it can only be {local: true} (with its options, such as sudo)")
		}
		for _, o := range options {
			name := o.(*ast.StringNode).Value
			if len(kindsSet) == 1 && t.Kind != "" && !contains(k.Options, name) {
				y.d.errorf(y.pos(o), "%s: %s applies only to %s targets", what, name, joinWords(optionKinds(name), "and"))
			}
		}
		if t.Kind == "ssh" && t.HostKey == "" {
			t.HostKey = "strict"
		}
		into[e.key] = t
	}
}

// targetAddress reads a kind's key's value as the kind writes it (a
// string, a positive int, or true) and checks it with the kind's own
// Address, the run's; it returns the address as written ("" for local).
func (y *yamlDec) targetAddress(n ast.Node, what string, k transports.Kind) (string, bool) {
	var v string
	switch k.Value {
	case transports.ValueInt:
		i, ok := y.positive(n, what)
		if !ok {
			return "", false
		}
		v = strconv.Itoa(i)
	case transports.ValueTrue:
		b, ok := y.boolean(n, what)
		if !ok {
			return "", false
		}
		if !b {
			y.d.errorf(y.pos(n), "%s: only %s: true is meaningful", what, k.Name)
			return "", false
		}
		return "", true
	default:
		s, ok := y.str(n, what)
		if !ok {
			return "", false
		}
		if s == "" {
			y.d.errorf(y.pos(n), "%s: needs a value, like %s: %s", what, k.Name, k.Example)
			return "", false
		}
		v = s
	}
	if err := k.Address(v, &transports.Spec{}); err != nil {
		y.d.errorf(y.pos(n), "%s: %v", what, err)
		return v, false
	}
	return v, true
}

func (y *yamlDec) decodeVars(n ast.Node, into map[string]varValue) {
	entries, _ := y.mapping(n, "vars")
	for _, e := range entries {
		if why := CheckVarName(e.key); why != "" {
			y.d.errorf(y.pos(e.keyN), "vars: %q is %s", e.key, why)
			continue
		}
		if v, ok := y.scalarText(e.value, "vars."+e.key); ok {
			into[e.key] = varValue{text: v, value: typedScalar(e.value, v), pos: y.pos(e.keyN)}
		}
	}
}

func (y *yamlDec) decodeForEach(n ast.Node, into map[string][]map[string]any, defs *Defs) {
	entries, _ := y.mapping(n, "for_each")
	defs.Lists, defs.Items = map[string]Pos{}, map[string]map[string]Pos{}
	for _, e := range entries {
		what := "for_each." + e.key
		defs.Lists[e.key] = y.pos(e.keyN)
		keyPos := map[string]Pos{}
		defs.Items[e.key] = keyPos
		seq, ok := e.value.(*ast.SequenceNode)
		if !ok {
			y.d.errorf(y.pos(e.value), "%s: expected a list of mappings, got %s", what, kindName(e.value))
			continue
		}
		items := make([]map[string]any, 0, len(seq.Values))
		for i, v := range seq.Values {
			w := fmt.Sprintf("%s[%d]", what, i)
			fields, ok := y.mapping(v, w)
			if !ok {
				continue
			}
			item := make(map[string]any, len(fields))
			for _, f := range fields {
				if why := CheckVarName(f.key); why != "" {
					y.d.errorf(y.pos(f.keyN), "%s: key %q is %s", w, f.key, why)
					continue
				}
				if _, seen := keyPos[f.key]; !seen {
					keyPos[f.key] = y.pos(f.keyN)
				}
				switch x := f.value.(type) {
				case *ast.IntegerNode:
					switch iv := x.Value.(type) {
					case int64:
						item[f.key] = int(iv)
					case uint64:
						item[f.key] = int(iv)
					}
				case *ast.FloatNode:
					item[f.key] = x.Value
				case *ast.BoolNode:
					item[f.key] = x.Value
				case *ast.NullNode, nil:
					item[f.key] = nil
				default:
					if s, ok := y.str(f.value, w+"."+f.key); ok {
						item[f.key] = s
					}
				}
			}
			items = append(items, item)
		}
		into[e.key] = items
	}
}

// inventory is an --inventory file: vars and targets that override the
// contract's defaults.
type inventory struct {
	vars    map[string]varValue // each with its text, typed value and position
	targets map[string]*Target
	diags   Diagnostics
}

// nearMisses warns about inventory vars that c does not declare but that
// look like a typo of one it does and the inventory does not set: the
// contract would silently keep its default. Other names c does not declare
// are fine: one inventory describes a deployment that several contracts
// share.
func (inv *inventory) nearMisses(c *Contract, d *diags) {
	var unset []string
	for _, k := range c.ownVars() {
		if _, ok := inv.vars[k]; !ok {
			unset = append(unset, k)
		}
	}
	names := make([]string, 0, len(inv.vars))
	for k := range inv.vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if c.DeclaresVar(k) {
			continue
		}
		if s := closest(k, unset); s != "" {
			d.warnf(inv.vars[k].pos, "vars: %s declares no var %q%s", c.Name, k,
				suggest(k, s, fmt.Sprintf(" (did you mean %q? as written, %s keeps its default)", s, s)))
		}
	}
}

// parseInventory reads an inventory file. Problems are returned as
// diagnostics naming the inventory file.
func parseInventory(path string, src []byte) *inventory {
	// A byte order mark is accepted as in a contract, and is not a
	// character: columns on line 1 count from after it.
	src = bytes.TrimPrefix(src, utf8BOM)
	inv := &inventory{vars: map[string]varValue{}, targets: map[string]*Target{}}
	d := &diags{file: path}
	y := &yamlDec{s: newSource(path, src), d: d}
	root, ok := y.parse(src)
	if ok {
		entries, _ := y.mapping(root, "inventory")
		for _, e := range entries {
			switch e.key {
			case "vars":
				y.decodeVars(e.value, inv.vars)
			case "targets":
				y.decodeTargets(e.value, inv.targets)
			default:
				y.unknownKey(e, "inventory", inventoryKeys)
			}
		}
	}
	inv.diags = d.list
	return inv
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
