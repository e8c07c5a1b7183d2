package contracts

import (
	"strings"

	"github.com/contractd/contractd/transports"
)

// The front matter's and the inventory's keys as data: what each takes
// and what it does, for the JSON Schema (`contractd schema`) and the
// language server's completion and hover. The names come from the lists
// the decoders read (topKeys, targetKeys, scheduleKeys, …, messageKinds,
// the notifier registry and the transport kinds); keySpecs gives each its
// type and doc by path, and a test checks that every key has one and every
// spec a key. A transport kind's key and a guard setting carry their own
// (transports.Kind, GuardSetting).

// KeyType is the kind of value a key takes.
type KeyType string

// Key types.
const (
	KeyString   KeyType = "string"
	KeyInt      KeyType = "int"      // a YAML integer, at least Key.Min
	KeyBool     KeyType = "bool"     // true or false
	KeyDuration KeyType = "duration" // a duration string (DurationPattern); the integer 0 too when Key.Zero
	KeyScalar   KeyType = "scalar"   // any scalar, kept as written
	KeyList     KeyType = "list"     // a list of Key.Each
	KeyMapping  KeyType = "mapping"  // the keys Key.Keys, or names of the author's each taking Key.Each
	// KeyStrings is a string or a list of strings (a target's identity).
	KeyStrings KeyType = "string or list"
	// KeyRoutes is the notify list: one-key mappings, the key a notifier
	// kind (NotifierKinds) and its value that kind's options.
	KeyRoutes KeyType = "routes"
	// KeyFraction is a fraction written as 50% or 0.5.
	KeyFraction KeyType = "fraction"
)

// Key is one key of the front matter or an inventory.
type Key struct {
	Name string
	Type KeyType
	Doc  string
	// Enum lists the values a string key takes; nil for any.
	Enum []string
	// Pattern is a regular expression a string key's value (or a
	// mapping's names of the author's) must match; "" for any.
	Pattern string
	// Min is the least value of an int key (0: any).
	Min int
	// Max is the most value of an int key (0: any).
	Max int
	// Zero marks a duration that may be 0s (none).
	Zero bool
	// Default is the value in force when the key is absent, as written.
	Default string
	// Example is a value other than the default, as written (a guard
	// setting's, for its docs and the tests that read its declaration).
	Example string
	// Required marks a key its mapping needs.
	Required bool
	// Keys are a mapping's keys, in the order the decoder lists them.
	Keys []Key
	// Each is what every item of a list takes, or every value of a
	// mapping whose names are the author's (targets, vars, for_each).
	Each *Key
	// OneOf names keys of which a mapping sets exactly one (a target's
	// ssh, pct, docker or local).
	OneOf []string
}

// Lookup returns the key at a dotted path below k ("guards.crash_loop.per";
// a mapping of the author's names takes any name: "targets.web.ssh"; a
// list's items are passed through: "for_each.workers.port").
func (k Key) Lookup(path string) (Key, bool) {
	cur := k
	for _, part := range strings.Split(path, ".") {
		next, ok := cur.child(part)
		if !ok {
			return Key{}, false
		}
		cur = next
	}
	return cur, true
}

func (k Key) child(name string) (Key, bool) {
	if k.Type == KeyList && k.Each != nil {
		// A list's items are not named: a path goes through them
		// (for_each.workers.port is a key of every item).
		return k.Each.child(name)
	}
	for _, c := range k.Keys {
		if c.Name == name {
			return c, true
		}
	}
	if k.Type == KeyMapping && k.Each != nil {
		e := *k.Each
		e.Name = name
		return e, true
	}
	return Key{}, false
}

// DurationPattern is a regular expression for the text ParseDuration
// reads (apart from a sign): numbers with units, Go's and d and w.
const DurationPattern = `^\s*\+?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h|d|w))+)\s*$`

// keySpec is what keySpecs says of one key.
type keySpec struct {
	typ     KeyType
	doc     string
	enum    []string
	pattern string
	min     int
	zero    bool
	def     string
}

// keySpecs are the types and docs of the front matter's and the
// inventory's keys, by path: a mapping of the author's names is "*"
// ("targets.*.ssh"). FrontMatterKeys and InventoryKeys read it.
var keySpecs = map[string]keySpec{
	"kind":                      {typ: KeyString, doc: "the contract's kind: responsibility, the only one", enum: []string{"responsibility"}, def: "responsibility"},
	"name":                      {typ: KeyString, doc: "the contract's name (required): its state files, alerts and commands are named after it; letters, digits, '.', '_' and '-'", pattern: reName.String()},
	"title":                     {typ: KeyString, doc: "a title for people and reports"},
	"description":               {typ: KeyString, doc: "one paragraph for people"},
	"version":                   {typ: KeyScalar, doc: "the contract's version, kept as written (3.10 stays 3.10)"},
	"runtime_contract":          {typ: KeyInt, doc: "the format version (required): this engine runs format 2", enum: []string{"2"}},
	"agent":                     {typ: KeyString, doc: "who answers for the contract (shown by explain); a stage's agent= names the unit it judges"},
	"report_only_agents":        {typ: KeyList, doc: "agents whose repairs are logged and never executed: detect and report, never fix"},
	"report_only_agents.*":      {typ: KeyString, doc: "an agent a stage's agent= names"},
	"schedule":                  {typ: KeyMapping, doc: "when the contract runs under contractd serve"},
	"schedule.every":            {typ: KeyDuration, doc: "the interval between runs under contractd serve", def: "15m"},
	"schedule.on_start":         {typ: KeyBool, doc: "also run once when the daemon starts", def: "false"},
	"schedule.start_delay":      {typ: KeyDuration, zero: true, doc: "no run (on_start included) until this long after the daemon started (0s: none)", def: "0s"},
	"commands":                  {typ: KeyList, doc: "on-demand command names: `contractd NAME` (or a symlink NAME) runs this contract now"},
	"commands.*":                {typ: KeyString, doc: "a command name", pattern: reName.String()},
	"guards":                    {typ: KeyMapping, doc: "the contract-wide guards around every repair"},
	"depends_on":                {typ: KeyList, doc: "what every unit depends on: while one fails, a unit that fails too is suppressed (no repair, no incident); the targets a unit reaches through via count by themselves"},
	"depends_on.*":              {typ: KeyString, pattern: depRefPattern, doc: "CONTRACT (another contract of the directory), CONTRACT/AGENT (one of its agents) or target:NAME (a target of this contract)"},
	"maintenance":               {typ: KeyList, doc: "recurring maintenance windows: repairs paused, new alerts held"},
	"maintenance.*":             {typ: KeyMapping, doc: "one window: from each elapse of calendar, for its duration"},
	"maintenance.*.calendar":    {typ: KeyString, doc: `when each occurrence starts, in systemd's OnCalendar syntax ("Sun *-*-* 02:00", "Mon..Fri 12:00", "weekly")`},
	"maintenance.*.for":         {typ: KeyDuration, doc: "how long each occurrence lasts"},
	"maintenance.*.timezone":    {typ: KeyString, doc: "the IANA time zone the calendar is read in (Europe/Berlin)", def: "UTC"},
	"maintenance.*.agents":      {typ: KeyList, doc: "the agents it covers; the whole contract when absent"},
	"maintenance.*.agents.*":    {typ: KeyString, doc: "an agent a stage's agent= names"},
	"maintenance.*.reason":      {typ: KeyString, doc: "said in the report, the page and the messages"},
	"maintenance.*.announce":    {typ: KeyBool, doc: "a message when the window opens and one when it ends", def: "false"},
	"targets":                   {typ: KeyMapping, doc: "the links of the transport chains stages and steps run on, by name (on=NAME); each sets exactly one of ssh, pct, docker or local"},
	"targets.*":                 {typ: KeyMapping, pattern: reName.String(), doc: "one target: exactly one of ssh, pct, docker or local, and via for the target it is reached through"},
	"targets.*.via":             {typ: KeyString, doc: "the target this one is reached through"},
	"targets.*.known_hosts":     {typ: KeyString, doc: "ssh: the known_hosts file (default ~/.ssh/known_hosts)"},
	"targets.*.host_key":        {typ: KeyString, enum: []string{"strict", "accept-new"}, doc: "ssh: strict checks the host key against known_hosts; accept-new adds a host seen for the first time", def: "strict"},
	"targets.*.identity":        {typ: KeyStrings, doc: "ssh: the key file, or a list of them"},
	"targets.*.connect_timeout": {typ: KeyDuration, doc: "ssh: the dial timeout"},
	"targets.*.sudo":            {typ: KeyBool, doc: "the login on this link is not root: repairs and sudo=true steps run as `sudo -n -- COMMAND` (local, ssh), or pct/docker exec runs through sudo on the parent", def: "false"},
	"notify":                    {typ: KeyRoutes, doc: "the alert routes: one-key mappings whose key is the notifier kind, e.g. - {log: {}}"},
	"vars":                      {typ: KeyMapping, doc: "values scripts, commands, URLs and expressions read as ${name} (and vars.name), typed as written; an inventory or --var overrides them"},
	"vars.*":                    {typ: KeyScalar, pattern: reVarName.String(), doc: "a var: its value, typed as written (a number, true or false, or a string)"},
	"secrets":                   {typ: KeyList, doc: "environment variables exported to scripts and redacted everywhere"},
	"secrets.*":                 {typ: KeyString, pattern: reEnvName.String(), doc: "an environment variable's name"},
	"for_each":                  {typ: KeyMapping, doc: "lists a stage runs once per item of (for_each=NAME): each item a mapping its agent=, on= and ${item.key} read"},
	"for_each.*":                {typ: KeyList, doc: "a list of items, each a mapping of scalars"},
	"for_each.*.*":              {typ: KeyMapping, doc: "one item: its keys are read as ${key} and item.key"},
	"for_each.*.*.*":            {typ: KeyScalar, pattern: reVarName.String(), doc: "an item's value"},
	"alert_on":                  {typ: KeyString, enum: []string{AlertOnChange, AlertOnRepair, AlertOnCritical}, doc: "which messages are sent: change (every incident message and repair), repair (repairs and escalations only) or critical (incidents raised at critical too)", def: AlertOnChange},
	"log":                       {typ: KeyString, doc: "append one line per run, action, alert and error to this file (${var} filled)"},
	"messages":                  {typ: KeyMapping, doc: "the words of the contract's messages by kind, as Go templates ({{.Unit}}, {{.Seen}}, …)"},
	"messages.*":                {typ: KeyString, doc: "the template of one kind of message"},
	// The inventory's keys.
	"inventory.vars":    {typ: KeyMapping, doc: "values that override the contracts' vars of the same name"},
	"inventory.targets": {typ: KeyMapping, doc: "targets that replace the contracts' targets of the same name, wholesale"},
}

// messageDocs say what each kind of message is.
var messageDocs = map[string]string{
	"open":     "an incident opens",
	"reminder": "an incident is still open after guards.repeat",
	"resolved": "an incident resolved",
	"repair":   "a repair ran (and how its verification went)",
}

// specKey builds the key at path from keySpecs, named name.
func specKey(path, name string) Key {
	s, ok := keySpecs[path]
	if !ok {
		panic("contracts: no key spec for " + path)
	}
	return Key{Name: name, Type: s.typ, Doc: s.doc, Enum: s.enum, Pattern: s.pattern, Min: s.min, Zero: s.zero, Default: s.def}
}

// FrontMatterKeys returns the keys of a contract's front matter, in the
// order the decoder lists them, each with its type, doc and the keys
// below it. It never fails.
func FrontMatterKeys() Key {
	root := Key{Name: "front matter", Type: KeyMapping, Doc: "a responsibility contract's front matter"}
	for _, name := range topKeys {
		k := specKey(name, name)
		switch name {
		case "name", "runtime_contract":
			k.Required = true
		case "report_only_agents", "commands", "secrets":
			e := specKey(name+".*", "")
			k.Each = &e
		case "schedule":
			k.Keys = subKeys(name, scheduleKeys)
		case "guards":
			var rows []string
			for _, g := range guardSettings {
				if g.Contract {
					k.Keys = append(k.Keys, g.Key)
					if g.Row {
						rows = append(rows, g.Name)
					}
				}
			}
			k.Doc += "; an action row may override " + joinWords(rows, "and")
		case "targets":
			k.Each = targetKey()
		case "vars":
			k.Each = varKey()
		case "for_each":
			list, item, value := specKey("for_each.*", ""), specKey("for_each.*.*", ""), specKey("for_each.*.*.*", "")
			item.Each, list.Each = &value, &item
			k.Each = &list
		case "depends_on":
			e := specKey("depends_on.*", "")
			k.Each = &e
		case "maintenance":
			w := specKey("maintenance.*", "")
			w.Keys = subKeys("maintenance.*", windowKeys)
			markRequired(&w, "calendar", "for")
			for i := range w.Keys {
				if w.Keys[i].Name == "agents" {
					a := specKey("maintenance.*.agents.*", "")
					w.Keys[i].Each = &a
				}
			}
			k.Each = &w
		case "messages":
			for _, kind := range messageKinds {
				m := specKey("messages.*", kind)
				m.Doc = "the words of the message sent when " + messageDocs[kind] + "; " + m.Doc
				k.Keys = append(k.Keys, m)
			}
		}
		root.Keys = append(root.Keys, k)
	}
	return root
}

// InventoryKeys returns the keys of an --inventory file: vars and
// targets, as in the front matter. It never fails.
func InventoryKeys() Key {
	root := Key{Name: "inventory", Type: KeyMapping, Doc: "an --inventory file: vars and targets that override the contracts' own"}
	for _, name := range inventoryKeys {
		k := specKey("inventory."+name, name)
		switch name {
		case "vars":
			k.Each = varKey()
		case "targets":
			k.Each = targetKey()
		}
		root.Keys = append(root.Keys, k)
	}
	return root
}

// targetKey is a target: a key per transport kind, its type and doc the
// kind's own (transports.Kind), exactly one of them set; then via, sudo
// and the kinds' options, from keySpecs.
func targetKey() *Key {
	t := specKey("targets.*", "")
	for _, name := range targetKeys() {
		k, isKind := transports.KindOf(name)
		if !isKind {
			t.Keys = append(t.Keys, specKey("targets.*."+name, name))
			continue
		}
		key := Key{Name: name, Type: KeyString, Doc: k.Doc}
		switch k.Value {
		case transports.ValueInt:
			key.Type, key.Min = KeyInt, 1
		case transports.ValueTrue:
			key.Type, key.Enum = KeyBool, []string{"true"}
		}
		if k.Example != "" {
			key.Doc += " (e.g. " + k.Example + ")"
		}
		t.Keys = append(t.Keys, key)
		t.OneOf = append(t.OneOf, name)
	}
	return &t
}

func varKey() *Key {
	v := specKey("vars.*", "")
	return &v
}

func subKeys(parent string, names []string) []Key {
	out := make([]Key, 0, len(names))
	for _, n := range names {
		out = append(out, specKey(parent+"."+n, n))
	}
	return out
}

func markRequired(k *Key, names ...string) {
	for i := range k.Keys {
		if contains(names, k.Keys[i].Name) {
			k.Keys[i].Required = true
		}
	}
}
