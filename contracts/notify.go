package contracts

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// Notifier options are declared once, here: one option struct per kind, one
// tagged field per option, all listed in notifierKinds. Load decodes every
// notify route against it (after ${var} expansion) and engine/notify builds
// its notifiers from the decoded structs, so whatever lint accepts, the run
// accepts, and docs/contract-format.md is checked against the same table.
//
// Tags: `opt` is the option's name; `type` is url, env, path or enum (a
// plain string when absent; time.Duration fields are durations and int
// fields counts); `enum` lists the allowed values, `default` the value
// used when the option is absent, `required:"true"` marks a required one,
// and `doc` says what it does.

// LogOptions configure the log notifier: one line per message, to the
// engine's log (stderr, or the journal under systemd), or appended to a
// file.
type LogOptions struct {
	Path   string `opt:"path" type:"path" doc:"append to this file (created 0600) instead of the engine's log"`
	Format string `opt:"format" type:"enum" enum:"text|json" default:"text" doc:"text: TIME CONTRACT: [KIND] TEXT, or TIME CONTRACT: TEXT for a repair; json: the message as one JSON object"`
}

// CommandOptions configure the command notifier: a shell command on the
// engine's host that reads each message on stdin.
type CommandOptions struct {
	Run     string        `opt:"run" required:"true" doc:"run with sh -c once per message; the message on stdin, its fields in CONTRACTD_* variables"`
	Format  string        `opt:"format" type:"enum" enum:"text|json" default:"text" doc:"stdin is the message line (text) or the message as JSON (json)"`
	Timeout time.Duration `opt:"timeout" default:"10s" doc:"the command and its children are killed after this"`
}

// WebhookOptions configure the webhook notifier: an HTTP POST per message.
type WebhookOptions struct {
	URL       string        `opt:"url" type:"url" required:"true" doc:"http(s) URL to POST to; errors name only its scheme and host"`
	Format    string        `opt:"format" type:"enum" enum:"json|text" default:"json" doc:"json: the message object; text: {\"text\": LINE} (Slack, Mattermost)"`
	Timeout   time.Duration `opt:"timeout" default:"10s" doc:"per attempt"`
	Retries   int           `opt:"retries" default:"2" doc:"further attempts within the run on a transport error, 429 or 5xx"`
	Backoff   time.Duration `opt:"backoff" default:"1s" doc:"wait before the first retry; doubles each time"`
	BearerEnv string        `opt:"bearer_env" type:"env" doc:"environment variable holding a bearer token, read at send time"`
}

// ZulipOptions configure the zulip notifier: a message through a Zulip
// server's REST API, to a stream or to one person.
type ZulipOptions struct {
	Site        string        `opt:"site" type:"url" required:"true" doc:"the server's base URL; messages go to SITE/api/v1/messages"`
	Stream      string        `opt:"stream" doc:"post to this stream (exactly one of stream and to)"`
	Topic       string        `opt:"topic" doc:"the stream's topic (default: the contract's name)"`
	To          string        `opt:"to" doc:"send a direct message to this email (exactly one of stream and to)"`
	BotEmailEnv string        `opt:"bot_email_env" type:"env" required:"true" doc:"environment variable holding the bot's email, read at send time"`
	APIKeyEnv   string        `opt:"api_key_env" type:"env" required:"true" doc:"environment variable holding the bot's API key, read at send time"`
	Timeout     time.Duration `opt:"timeout" default:"10s" doc:"per attempt"`
	Retries     int           `opt:"retries" default:"2" doc:"further attempts within the run on a transport error, 429 or 5xx"`
	Backoff     time.Duration `opt:"backoff" default:"1s" doc:"wait before the first retry; doubles each time"`
}

func (o *ZulipOptions) check(report func(option, msg string)) {
	if (o.Stream == "") == (o.To == "") {
		report("", "needs exactly one of stream (post to a stream) or to (a direct message)")
	}
}

// NotifierOptions is the decoded option struct of one route: *LogOptions,
// *CommandOptions, *WebhookOptions or *ZulipOptions.
type NotifierOptions interface {
	// NotifierKind returns the kind the options belong to, e.g. "webhook".
	NotifierKind() string
}

// NotifierKind returns "log".
func (*LogOptions) NotifierKind() string { return "log" }

// NotifierKind returns "command".
func (*CommandOptions) NotifierKind() string { return "command" }

// NotifierKind returns "webhook".
func (*WebhookOptions) NotifierKind() string { return "webhook" }

// NotifierKind returns "zulip".
func (*ZulipOptions) NotifierKind() string { return "zulip" }

// notifierKinds is every notifier kind's schema, by kind. It is built once
// from the option structs and never modified.
var notifierKinds = schemas(&LogOptions{}, &CommandOptions{}, &WebhookOptions{}, &ZulipOptions{})

// nameOption is the option every kind takes: the route's name.
var nameOption = NotifierOption{Name: "name", Type: "string",
	Doc: "the route's name in reports, metrics and the outbox (default: the kind; a repeated kind gets #2, #3 …)"}

// NotifierKind is the schema of one notifier kind.
type NotifierKind struct {
	Kind    string
	Options []NotifierOption // in declaration order, name last
	typ     reflect.Type
}

// NotifierOption is one option of a notifier kind.
type NotifierOption struct {
	Name     string
	Type     string   // string, url, env, path, enum, duration or count
	Required bool     // the route is invalid without it
	Default  string   // used when the option is absent; "" for none
	Enum     []string // the allowed values of an enum
	Doc      string
	field    int
}

// NotifierKinds returns every notifier kind's schema, sorted by kind. It
// never fails.
func NotifierKinds() []NotifierKind {
	out := make([]NotifierKind, 0, len(notifierKinds))
	for _, k := range notifierKinds {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

func notifierKindNames() []string {
	names := make([]string, 0, len(notifierKinds))
	for k := range notifierKinds {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// schemas reads the option structs' tags. A malformed tag or a duplicate
// kind is a programming error and panics at init.
func schemas(structs ...NotifierOptions) map[string]*NotifierKind {
	out := map[string]*NotifierKind{}
	for _, s := range structs {
		k := &NotifierKind{Kind: s.NotifierKind(), typ: reflect.TypeOf(s).Elem()}
		if _, dup := out[k.Kind]; dup {
			panic("contracts: notifier kind " + k.Kind + " declared twice")
		}
		for i := 0; i < k.typ.NumField(); i++ {
			f := k.typ.Field(i)
			o := NotifierOption{Name: f.Tag.Get("opt"), Type: f.Tag.Get("type"), Required: f.Tag.Get("required") == "true",
				Default: f.Tag.Get("default"), Doc: f.Tag.Get("doc"), field: i}
			switch {
			case f.Type == reflect.TypeOf(time.Duration(0)):
				o.Type = "duration"
			case f.Type.Kind() == reflect.Int:
				o.Type = "count"
			case o.Type == "":
				o.Type = "string"
			}
			if o.Type == "enum" {
				o.Enum = strings.Split(f.Tag.Get("enum"), "|")
			}
			if o.Name == "" || o.Name == nameOption.Name || o.Doc == "" {
				panic(fmt.Sprintf("contracts: %s option %s: needs an opt tag other than name, and a doc tag", k.Kind, f.Name))
			}
			k.Options = append(k.Options, o)
		}
		k.Options = append(k.Options, nameOption)
		scratch := reflect.New(k.typ).Elem()
		for _, o := range k.Options {
			if o.Default != "" {
				if err := o.parse(o.Default, scratch.Field(o.field)); err != nil {
					panic(fmt.Sprintf("contracts: %s option %s: default: %v", k.Kind, o.Name, err))
				}
			}
		}
		out[k.Kind] = k
	}
	return out
}

func (k *NotifierKind) option(name string) (NotifierOption, bool) {
	for _, o := range k.Options {
		if o.Name == name {
			return o, true
		}
	}
	return NotifierOption{}, false
}

func (k *NotifierKind) optionNames() []string {
	names := make([]string, len(k.Options))
	for i, o := range k.Options {
		names[i] = o.Name
	}
	return names
}

// optionProblem is one problem with a route's options; option "" is the
// route as a whole.
type optionProblem struct {
	option, msg string
}

// decode fills a new option struct from values (option name → text, ${var}
// already expanded; "name" is not among them) and the defaults. It returns
// the struct and every problem found.
func (k *NotifierKind) decode(values map[string]string) (NotifierOptions, []optionProblem) {
	v := reflect.New(k.typ)
	var problems []optionProblem
	for _, o := range k.Options {
		if o.Name == nameOption.Name {
			continue
		}
		text, set := values[o.Name]
		if !set {
			if o.Required {
				problems = append(problems, optionProblem{"", "needs " + o.Name + " (" + o.Doc + ")"})
				continue
			}
			if o.Default == "" {
				continue
			}
			text = o.Default
		}
		f := v.Elem().Field(o.field)
		if err := o.parse(text, f); err != nil {
			problems = append(problems, optionProblem{o.Name, err.Error()})
		}
	}
	opts := v.Interface().(NotifierOptions)
	if c, ok := opts.(interface{ check(func(string, string)) }); ok && len(problems) == 0 {
		c.check(func(option, msg string) { problems = append(problems, optionProblem{option, msg}) })
	}
	return opts, problems
}

// parse checks text against the option's type and stores it in f.
func (o NotifierOption) parse(text string, f reflect.Value) error {
	switch o.Type {
	case "duration":
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return fmt.Errorf("expected a duration like 10s, got %q", text)
		}
		f.SetInt(int64(d))
		return nil
	case "count":
		n, err := strconv.Atoi(text)
		if err != nil || n < 0 {
			return fmt.Errorf("expected a count (0 or more), got %q", text)
		}
		f.SetInt(int64(n))
		return nil
	case "enum":
		for _, e := range o.Enum {
			if text == e {
				f.SetString(text)
				return nil
			}
		}
		return fmt.Errorf("must be %s, got %q", strings.Join(o.Enum, " or "), text)
	case "url":
		if err := CheckHTTPURL(text); err != nil {
			return fmt.Errorf("expected an http or https URL, got %q", redactURL(text))
		}
	case "env":
		if !reEnvName.MatchString(text) {
			return fmt.Errorf("expected the name of an environment variable (the engine reads the value at send time), got %q", text)
		}
	case "path", "string":
		if text == "" {
			return errors.New("must not be empty")
		}
	}
	f.SetString(text)
	return nil
}

// redactURL keeps only the scheme and host of a URL-looking string, since
// webhook URLs often carry their secret in the path.
// CheckHTTPURL is the one rule for a URL a notifier posts to, read by lint
// and by the notifier alike: http or https, a host, a port (when written)
// in 1..65535. Its error names only the URL's scheme and host.
func CheckHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("%q is not an http(s) URL", redactURL(s))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q is not a number in 1..65535", redactURL(s), p)
		}
	}
	return nil
}

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// NotifyRoute is one configured notifier: its kind, its name and its
// options decoded against the kind's schema.
type NotifyRoute struct {
	Kind string // "log", "command", "webhook" or "zulip"
	// Name tells routes apart in reports, metrics and the outbox: the
	// `name` option, else the kind, with #2, #3 … for a repeated kind.
	Name string
	// Options is *LogOptions, *CommandOptions, *WebhookOptions or
	// *ZulipOptions, defaults filled in.
	Options NotifierOptions
	Pos     Pos
	what    string      // notify[N].KIND, for diagnostics
	raw     []rawOption // as written, before ${var} expansion
}

type rawOption struct {
	key, value string
	pos        Pos // the value's position
}

// NewNotifyRoute decodes a route from option texts, as Load decodes a
// contract's notify list; name is the route's name ("" for the kind). It
// returns an error naming every problem: an unknown kind, an unknown,
// missing or malformed option.
func NewNotifyRoute(kind, name string, opts map[string]string) (NotifyRoute, error) {
	k, ok := notifierKinds[kind]
	if !ok {
		return NotifyRoute{}, fmt.Errorf("unknown notifier kind %q (want one of %s)", kind, strings.Join(notifierKindNames(), ", "))
	}
	var msgs []string
	for key := range opts {
		if _, known := k.option(key); !known || key == nameOption.Name {
			msgs = append(msgs, fmt.Sprintf("unknown option %q (want one of %s)", key, strings.Join(k.optionNames(), ", ")))
		}
	}
	decoded, problems := k.decode(opts)
	for _, p := range problems {
		if p.option != "" {
			msgs = append(msgs, p.option+": "+p.msg)
		} else {
			msgs = append(msgs, p.msg)
		}
	}
	if len(msgs) > 0 {
		sort.Strings(msgs)
		return NotifyRoute{}, fmt.Errorf("notifier %s: %s", kind, strings.Join(msgs, "; "))
	}
	if name == "" {
		name = kind
	}
	return NotifyRoute{Kind: kind, Name: name, Options: decoded}, nil
}

// decodeNotify reads the notify list as written: each route's kind and
// option texts with their positions. Unknown kinds and options and values
// that are not scalars are reported here; the options are checked against
// their types once ${var} is expanded (checkNotify).
func (y *yamlDec) decodeNotify(n ast.Node) []NotifyRoute {
	seq, ok := unwrap(n).(*ast.SequenceNode)
	if !ok {
		if _, null := unwrap(n).(*ast.NullNode); null {
			return nil
		}
		y.d.errorf(y.pos(n), "notify: expected a list of one-key mappings like - {log: {}}, got %s", kindName(n))
		return nil
	}
	kinds := notifierKindNames()
	var out []NotifyRoute
	for i, item := range seq.Values {
		what := fmt.Sprintf("notify[%d]", i)
		entries, ok := y.mapping(item, what)
		if !ok {
			continue
		}
		if len(entries) != 1 {
			y.d.errorf(y.pos(item), "%s: expected exactly one notifier (%s), got %d keys", what, strings.Join(kinds, ", "), len(entries))
			continue
		}
		e := entries[0]
		k, ok := notifierKinds[e.key]
		if !ok {
			y.unknownKey(e, "notify", kinds)
			continue
		}
		what += "." + e.key
		r := NotifyRoute{Kind: e.key, Pos: y.pos(e.keyN), what: what}
		opts, _ := y.mapping(e.value, what)
		for _, o := range opts {
			if _, known := k.option(o.key); !known {
				msg := fmt.Sprintf("unknown option %q in %s", o.key, what)
				if s := closest(o.key, k.optionNames()); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				} else {
					msg += " (options: " + strings.Join(k.optionNames(), ", ") + ")"
				}
				y.d.errorf(y.pos(o.keyN), "%s", msg)
				continue
			}
			if v, ok := y.scalarText(o.value, what+"."+o.key); ok {
				r.raw = append(r.raw, rawOption{key: o.key, value: v, pos: y.pos(o.value)})
			}
		}
		out = append(out, r)
	}
	return out
}

// checkNotify expands ${var} in every route's option texts, decodes them
// against the kind's schema, reporting each problem at the option's value
// (or at the route), and names the routes.
func (b *bodyParser) checkNotify() {
	for i := range b.c.Notify {
		r := &b.c.Notify[i]
		k := notifierKinds[r.Kind]
		values := make(map[string]string, len(r.raw))
		at := make(map[string]Pos, len(r.raw))
		unexpanded := map[string]bool{}
		for _, o := range r.raw {
			if r.Kind == "command" && o.key == "run" && reDollarVar.MatchString(o.value) {
				// A command line is shell text: a value spliced into it
				// could run anything.
				b.d.errorf(o.pos, "%s.run: ${…} is not filled into a command line (the command reads the message on stdin and in CONTRACTD_* variables)", r.what)
				at[o.key], unexpanded[o.key], values[o.key] = o.pos, true, o.value
				continue
			}
			before := len(b.d.list)
			v := b.expandAt(o.value, func(int) Pos { return o.pos })
			at[o.key] = o.pos
			if strings.Contains(v, "${") {
				// An undefined var was reported by expandAt; a secret is
				// never expanded into a notifier option.
				unexpanded[o.key] = true
				if len(b.d.list) == before {
					b.d.errorf(o.pos, "%s.%s: secrets are not expanded in notifier options; name the environment variable in an *_env option instead", r.what, o.key)
				}
			}
			if o.key == nameOption.Name {
				if v == "" {
					b.d.errorf(o.pos, "%s.name: must not be empty", r.what)
				}
				r.Name = v
				continue
			}
			values[o.key] = v
		}
		opts, problems := k.decode(values)
		for _, p := range problems {
			if unexpanded[p.option] {
				continue
			}
			if pos, ok := at[p.option]; ok {
				b.d.errorf(pos, "%s.%s: %s", r.what, p.option, p.msg)
			} else {
				b.d.errorf(r.Pos, "%s: %s", r.what, p.msg)
			}
		}
		r.Options = opts
	}
	b.nameRoutes()
}

// nameRoutes gives every route a unique name: a `name` option must be
// unique; a route without one is named after its kind, with #2, #3 … when
// that name is taken.
func (b *bodyParser) nameRoutes() {
	taken := map[string]bool{}
	for _, r := range b.c.Notify {
		if r.Name == "" {
			continue
		}
		if taken[r.Name] {
			b.d.errorf(r.Pos, "notify: two routes are named %q (names tell routes apart in the outbox and in reports)", r.Name)
		}
		taken[r.Name] = true
	}
	for i := range b.c.Notify {
		r := &b.c.Notify[i]
		if r.Name != "" {
			continue
		}
		r.Name = r.Kind
		for n := 2; taken[r.Name]; n++ {
			r.Name = fmt.Sprintf("%s#%d", r.Kind, n)
		}
		taken[r.Name] = true
	}
}
