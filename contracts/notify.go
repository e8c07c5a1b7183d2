package contracts

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/mail"
	"net/url"
	"reflect"
	"regexp"
	"slices"
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
// fields counts), or, for the two options written as YAML collections,
// urls (a []string: a list of http(s) URLs) and labels (a
// map[string]string: label names to values); `enum` lists the allowed
// values, `default` the value used when the option is absent,
// `required:"true"` marks a required one, and `doc` says what it does.

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

// AlertmanagerOptions configure the alertmanager notifier: each incident
// is an alert posted to Alertmanager's API (POST URL/api/v2/alerts), kept
// firing while it is open and ended when it resolves.
type AlertmanagerOptions struct {
	URL       string            `opt:"url" type:"url" doc:"Alertmanager's base URL; alerts go to URL/api/v2/alerts (exactly one of url and urls)"`
	URLs      []string          `opt:"urls" type:"urls" doc:"the Alertmanagers of an HA cluster: each gets every alert, and a message is delivered when one of them accepts it (exactly one of url and urls)"`
	Labels    map[string]string `opt:"labels" type:"labels" doc:"labels added to every alert, e.g. {team: ops}; alertname may be set (default ContractdIncident), contract, agent, condition and severity may not"`
	Resend    time.Duration     `opt:"resend" default:"1m" doc:"open incidents are posted again this often; a firing alert ends 4 × resend after it was last posted, so it never expires while contractd runs"`
	PageURL   string            `opt:"page_url" type:"url" doc:"the status page as Alertmanager's users reach it; generatorURL is PAGE_URL/c/CONTRACT (default: the daemon's --listen address)"`
	Timeout   time.Duration     `opt:"timeout" default:"10s" doc:"per attempt"`
	Retries   int               `opt:"retries" default:"2" doc:"further attempts within the run on a transport error, 429 or 5xx; a 4xx is a configuration error, never retried"`
	Backoff   time.Duration     `opt:"backoff" default:"1s" doc:"wait before the first retry; doubles each time"`
	BearerEnv string            `opt:"bearer_env" type:"env" doc:"environment variable holding a bearer token (for an authenticating proxy), read at send time"`
}

// AlertmanagerReserved are the labels the alertmanager notifier sets from
// each message; a route's labels may not set them.
var AlertmanagerReserved = []string{"contract", "agent", "condition", "severity"}

func (o *AlertmanagerOptions) check(report func(option, msg string)) {
	if (o.URL == "") == (len(o.URLs) == 0) {
		report("", "needs exactly one of url (one Alertmanager) or urls (the Alertmanagers of an HA cluster)")
	}
	for _, name := range AlertmanagerReserved {
		if _, set := o.Labels[name]; set {
			report("labels", fmt.Sprintf("%s is set from each message (reserved: %s)", name, strings.Join(AlertmanagerReserved, ", ")))
		}
	}
}

// Alerts returns the Alertmanager base URLs the route posts to: url, or
// every one of urls.
func (o *AlertmanagerOptions) Alerts() []string {
	if o.URL != "" {
		return []string{o.URL}
	}
	return o.URLs
}

// EmailOptions configure the email notifier: one mail per message through
// an SMTP server, a submission port with STARTTLS and a login, or a relay.
type EmailOptions struct {
	Server       string        `opt:"server" required:"true" doc:"the SMTP server as host:port, e.g. smtp.example.com:587"`
	From         string        `opt:"from" required:"true" doc:"the sender, in From: and the envelope, e.g. contractd@example.com"`
	To           string        `opt:"to" required:"true" doc:"the recipients, comma-separated, e.g. ops@example.com, On call <oncall@example.com>"`
	TLS          string        `opt:"tls" type:"enum" enum:"starttls|tls|none" default:"starttls" doc:"starttls: STARTTLS before anything is sent, and a server that does not offer it is refused; tls: TLS from the first byte (port 465); none: plain text, for a relay on loopback or a trusted network"`
	CAFile       string        `opt:"ca_file" type:"path" doc:"PEM certificates the server's certificate must chain to, instead of the system's (a private CA)"`
	Username     string        `opt:"username" doc:"log in (AUTH PLAIN or LOGIN) as this user, with the password from password_env or password_file"`
	PasswordEnv  string        `opt:"password_env" type:"env" doc:"environment variable holding the password, read at send time"`
	PasswordFile string        `opt:"password_file" type:"path" doc:"file holding the password (a systemd credential, say), read at send time"`
	Timeout      time.Duration `opt:"timeout" default:"10s" doc:"per attempt: the whole SMTP conversation"`
	Retries      int           `opt:"retries" default:"2" doc:"further attempts within the run on a connection error or a 4xx answer; a 5xx is a configuration error, never retried"`
	Backoff      time.Duration `opt:"backoff" default:"1s" doc:"wait before the first retry; doubles each time"`
}

func (o *EmailOptions) check(report func(option, msg string)) {
	host, port, err := net.SplitHostPort(o.Server)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		report("server", fmt.Sprintf("expected host:port with a port in 1..65535, like smtp.example.com:587, got %q", o.Server))
	}
	if _, err := mail.ParseAddress(o.From); err != nil {
		report("from", fmt.Sprintf("expected one email address, got %q", o.From))
	}
	if _, err := mail.ParseAddressList(o.To); err != nil {
		report("to", fmt.Sprintf("expected email addresses separated by commas, got %q", o.To))
	}
	switch {
	case o.Username != "" && (o.PasswordEnv == "") == (o.PasswordFile == ""):
		report("", "username needs exactly one of password_env or password_file")
	case o.Username == "" && (o.PasswordEnv != "" || o.PasswordFile != ""):
		report("", "a password needs the username it belongs to")
	case o.Username != "" && o.TLS == "none" && !isLoopback(host):
		report("tls", "none sends the password in the clear; use starttls or tls (only a server on loopback may take a login over none)")
	}
	if o.CAFile != "" && o.TLS == "none" {
		report("ca_file", "is for TLS; tls is none")
	}
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NotifierOptions is the decoded option struct of one route: *LogOptions,
// *CommandOptions, *WebhookOptions, *ZulipOptions, *AlertmanagerOptions
// or *EmailOptions.
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

// NotifierKind returns "alertmanager".
func (*AlertmanagerOptions) NotifierKind() string { return "alertmanager" }

// NotifierKind returns "email".
func (*EmailOptions) NotifierKind() string { return "email" }

// notifierKinds is every notifier kind's schema, by kind. It is built once
// from the option structs and never modified.
var notifierKinds = schemas(&LogOptions{}, &CommandOptions{}, &WebhookOptions{}, &ZulipOptions{}, &AlertmanagerOptions{}, &EmailOptions{})

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
	Type     string   // string, url, env, path, enum, duration, count, urls or labels
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
			if want := compoundTypes[o.Type]; (want != nil || f.Type.Kind() != reflect.String && o.Type != "duration" && o.Type != "count") && f.Type != want {
				panic(fmt.Sprintf("contracts: %s option %s: type %s does not fit a %s field", k.Kind, f.Name, o.Type, f.Type))
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

// compoundTypes are the option types written as YAML collections, with
// the Go type of their field.
var compoundTypes = map[string]reflect.Type{
	"urls":   reflect.TypeOf([]string(nil)),
	"labels": reflect.TypeOf(map[string]string(nil)),
}

// Compound reports whether the option is written as a YAML collection (a
// list of URLs, or a mapping of labels) rather than a scalar.
func (o NotifierOption) Compound() bool { return compoundTypes[o.Type] != nil }

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
// route as a whole, item (from 1) the entry of a list or mapping option it
// is about, 0 for the option as a whole.
type optionProblem struct {
	option, msg string
	item        int
}

// optionValue is one option as written, ${var} already expanded: a
// scalar's text, or the items of a list (urls) or of a mapping (labels),
// in the order written.
type optionValue struct {
	text  string
	items []optionItem
	shape string // "" for a scalar, else "list" or "mapping"
}

// optionItem is one entry of a list or mapping option; key is a label's
// name, "" in a list.
type optionItem struct {
	key, value string
}

// reLabelName is a Prometheus label name (Alertmanager's v2 API checks
// the same).
var reLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// decode fills a new option struct from values (option name → value,
// ${var} already expanded; "name" is not among them) and the defaults. It
// returns the struct and every problem found.
func (k *NotifierKind) decode(values map[string]optionValue) (NotifierOptions, []optionProblem) {
	v := reflect.New(k.typ)
	var problems []optionProblem
	for _, o := range k.Options {
		if o.Name == nameOption.Name {
			continue
		}
		val, set := values[o.Name]
		if !set {
			if o.Required {
				problems = append(problems, optionProblem{option: "", msg: "needs " + o.Name + " (" + o.Doc + ")"})
				continue
			}
			if o.Default == "" {
				continue
			}
			val = optionValue{text: o.Default}
		}
		f := v.Elem().Field(o.field)
		if o.Compound() {
			problems = append(problems, o.parseItems(val, f)...)
			continue
		}
		if val.shape != "" {
			problems = append(problems, optionProblem{option: o.Name, msg: "expected a scalar, got a " + val.shape})
			continue
		}
		if err := o.parse(val.text, f); err != nil {
			problems = append(problems, optionProblem{option: o.Name, msg: err.Error()})
		}
	}
	opts := v.Interface().(NotifierOptions)
	if c, ok := opts.(interface{ check(func(string, string)) }); ok && len(problems) == 0 {
		c.check(func(option, msg string) { problems = append(problems, optionProblem{option: option, msg: msg}) })
	}
	return opts, problems
}

// parseItems checks the items of a list or mapping option and stores them
// in f, returning a problem per bad item.
func (o NotifierOption) parseItems(val optionValue, f reflect.Value) []optionProblem {
	var problems []optionProblem
	bad := func(i int, format string, args ...any) {
		problems = append(problems, optionProblem{option: o.Name, item: i + 1, msg: fmt.Sprintf(format, args...)})
	}
	if val.shape == shapeReported {
		return []optionProblem{{option: o.Name, msg: shapeReported}}
	}
	switch o.Type {
	case "urls":
		if val.shape != "list" {
			return []optionProblem{{option: o.Name, msg: "expected a list of http(s) URLs like [http://am1:9093, http://am2:9093]"}}
		}
		if len(val.items) == 0 {
			return []optionProblem{{option: o.Name, msg: "must list at least one URL"}}
		}
		list := make([]string, 0, len(val.items))
		for i, it := range val.items {
			if err := CheckHTTPURL(it.value); err != nil {
				bad(i, "expected an http or https URL, got %q", redactURL(it.value))
			}
			list = append(list, it.value)
		}
		f.Set(reflect.ValueOf(list))
	case "labels":
		if val.shape != "mapping" {
			return []optionProblem{{option: o.Name, msg: "expected a mapping of label names to values like {team: ops}"}}
		}
		m := make(map[string]string, len(val.items))
		for i, it := range val.items {
			switch {
			case !reLabelName.MatchString(it.key) || strings.HasPrefix(it.key, "__"):
				bad(i, "%q is not a label name (letters, digits and _, not starting with a digit or __)", it.key)
			case it.value == "":
				bad(i, "label %s: the value must not be empty", it.key)
			}
			m[it.key] = it.value
		}
		f.Set(reflect.ValueOf(m))
	}
	return problems
}

// parse checks text against the option's type and stores it in f.
func (o NotifierOption) parse(text string, f reflect.Value) error {
	switch o.Type {
	case "duration":
		d, err := ParseDuration(text)
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
	Kind string // "log", "command", "webhook", "zulip", "alertmanager" or "email"
	// Name tells routes apart in reports, metrics and the outbox: the
	// `name` option, else the kind, with #2, #3 … for a repeated kind.
	Name string
	// Options is *LogOptions, *CommandOptions, *WebhookOptions,
	// *ZulipOptions, *AlertmanagerOptions or *EmailOptions, defaults
	// filled in.
	Options NotifierOptions
	Pos     Pos
	what    string      // notify[N].KIND, for diagnostics
	raw     []rawOption // as written, before ${var} expansion
}

// rawOption is one option as written: a scalar's value, or the items of a
// list or mapping option (shape says which).
type rawOption struct {
	key, value string
	pos        Pos // the value's position
	shape      string
	items      []rawItem
}

type rawItem struct {
	key, value string // key: a mapping entry's key; "" in a list
	pos        Pos    // the item's value
}

// NewNotifyRoute decodes a route from option texts, as Load decodes a
// contract's notify list; name is the route's name ("" for the kind). It
// returns an error naming every problem: an unknown kind, an unknown,
// missing or malformed option. Options written as YAML collections (an
// alertmanager route's urls and labels) need NewNotifyRouteOptions.
func NewNotifyRoute(kind, name string, opts map[string]string) (NotifyRoute, error) {
	all := make(map[string]any, len(opts))
	for k, v := range opts {
		all[k] = v
	}
	return NewNotifyRouteOptions(kind, name, all)
}

// NewNotifyRouteOptions is NewNotifyRoute with each option's value a
// string, a []string (a list option: urls) or a map[string]string (a
// mapping option: labels). It returns an error naming every problem, a
// value of another Go type included.
func NewNotifyRouteOptions(kind, name string, opts map[string]any) (NotifyRoute, error) {
	k, ok := notifierKinds[kind]
	if !ok {
		return NotifyRoute{}, fmt.Errorf("unknown notifier kind %q (want one of %s)", kind, strings.Join(notifierKindNames(), ", "))
	}
	var msgs []string
	values := make(map[string]optionValue, len(opts))
	for key, v := range opts {
		if _, known := k.option(key); !known || key == nameOption.Name {
			msgs = append(msgs, fmt.Sprintf("unknown option %q (want one of %s)", key, strings.Join(k.optionNames(), ", ")))
			continue
		}
		switch v := v.(type) {
		case string:
			values[key] = optionValue{text: v}
		case []string:
			val := optionValue{shape: "list"}
			for _, item := range v {
				val.items = append(val.items, optionItem{value: item})
			}
			values[key] = val
		case map[string]string:
			val := optionValue{shape: "mapping"}
			for _, name := range slices.Sorted(maps.Keys(v)) {
				val.items = append(val.items, optionItem{key: name, value: v[name]})
			}
			values[key] = val
		default:
			msgs = append(msgs, fmt.Sprintf("%s: a %T is not an option value (want a string, []string or map[string]string)", key, v))
		}
	}
	decoded, problems := k.decode(values)
	for _, p := range problems {
		switch {
		case p.option != "" && p.item > 0:
			msgs = append(msgs, fmt.Sprintf("%s[%d]: %s", p.option, p.item-1, p.msg))
		case p.option != "":
			msgs = append(msgs, p.option+": "+p.msg)
		default:
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
// of the wrong shape (a list where a scalar belongs) are reported here;
// the options are checked against their types once ${var} is expanded
// (checkNotify).
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
			opt, known := k.option(o.key)
			if !known {
				y.d.errorf(y.pos(o.keyN), "unknown option %q in %s%s", o.key, what,
					hint(o.key, k.optionNames(), " (options: "+strings.Join(k.optionNames(), ", ")+")"))
				continue
			}
			if opt.Compound() {
				if raw, ok := y.compoundOption(o, opt, what+"."+o.key); ok {
					r.raw = append(r.raw, raw)
				}
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

// shapeReported marks an option whose value had the wrong shape, already
// reported: it counts as given, and nothing more is said about it.
const shapeReported = "reported"

// compoundOption reads a list option (urls: a list of scalars) or a
// mapping option (labels: names to scalars) as written.
func (y *yamlDec) compoundOption(o entry, opt NotifierOption, what string) (rawOption, bool) {
	raw := rawOption{key: o.key, pos: y.pos(o.value)}
	switch opt.Type {
	case "urls":
		seq, ok := unwrap(o.value).(*ast.SequenceNode)
		if !ok {
			y.d.errorf(y.pos(o.value), "%s: expected a list of http(s) URLs like [http://am1:9093, http://am2:9093], got %s", what, kindName(o.value))
			raw.shape = shapeReported
			return raw, true
		}
		raw.shape = "list"
		good := true
		for i, v := range seq.Values {
			text, ok := y.scalarText(v, fmt.Sprintf("%s[%d]", what, i))
			good = good && ok
			raw.items = append(raw.items, rawItem{value: text, pos: y.pos(v)})
		}
		return raw, good
	default: // labels
		entries, ok := y.mapping(o.value, what)
		if !ok {
			raw.shape = shapeReported
			return raw, true
		}
		raw.shape = "mapping"
		good := true
		for _, e := range entries {
			text, ok := y.scalarText(e.value, what+"."+e.key)
			good = good && ok
			pos := y.pos(e.keyN)
			if e.value != nil {
				pos = y.pos(e.value)
			}
			raw.items = append(raw.items, rawItem{key: e.key, value: text, pos: pos})
		}
		return raw, good
	}
}

// checkNotify expands ${var} in every route's option texts, decodes them
// against the kind's schema, reporting each problem at the option's value
// (or the item's, in a list or mapping; or at the route), and names the
// routes.
func (b *bodyParser) checkNotify() {
	for i := range b.c.Notify {
		r := &b.c.Notify[i]
		k := notifierKinds[r.Kind]
		values := make(map[string]optionValue, len(r.raw))
		at := make(map[string]Pos, len(r.raw))
		itemAt := map[string][]Pos{}
		// unexpanded holds the options (option) and items (option[i])
		// whose ${var} could not be filled in, already reported.
		unexpanded := map[string]bool{}
		// expand fills ${var} into one value, reporting what cannot be.
		expand := func(o rawOption, item, text string, pos Pos) string {
			before := len(b.d.list)
			v := b.expandAt(text, func(int) Pos { return pos })
			if strings.Contains(v, "${") {
				// An undefined var was reported by expandAt; a secret is
				// never expanded into a notifier option.
				unexpanded[o.key+item] = true
				if len(b.d.list) == before {
					b.d.errorf(pos, "%s.%s: secrets are not expanded in notifier options; name the environment variable in an *_env option instead", r.what, o.key)
				}
			}
			return v
		}
		for _, o := range r.raw {
			at[o.key] = o.pos
			if o.shape != "" {
				val := optionValue{shape: o.shape}
				for j, it := range o.items {
					val.items = append(val.items, optionItem{key: it.key, value: expand(o, fmt.Sprintf("[%d]", j), it.value, it.pos)})
					itemAt[o.key] = append(itemAt[o.key], it.pos)
				}
				values[o.key] = val
				continue
			}
			if r.Kind == "command" && o.key == "run" && reDollarVar.MatchString(o.value) {
				// A command line is shell text: a value spliced into it
				// could run anything.
				b.d.errorf(o.pos, "%s.run: ${…} is not filled into a command line (the command reads the message on stdin and in CONTRACTD_* variables)", r.what)
				unexpanded[o.key], values[o.key] = true, optionValue{text: o.value}
				continue
			}
			v := expand(o, "", o.value, o.pos)
			if o.key == nameOption.Name {
				if v == "" {
					b.d.errorf(o.pos, "%s.name: must not be empty", r.what)
				}
				r.Name = v
				continue
			}
			values[o.key] = optionValue{text: v}
		}
		opts, problems := k.decode(values)
		for _, p := range problems {
			if unexpanded[p.option] || p.item > 0 && unexpanded[fmt.Sprintf("%s[%d]", p.option, p.item-1)] || p.msg == shapeReported {
				continue
			}
			switch pos, ok := at[p.option]; {
			case ok && p.item > 0 && p.item <= len(itemAt[p.option]):
				b.d.errorf(itemAt[p.option][p.item-1], "%s.%s[%d]: %s", r.what, p.option, p.item-1, p.msg)
			case ok:
				b.d.errorf(pos, "%s.%s: %s", r.what, p.option, p.msg)
			default:
				b.d.errorf(r.Pos, "%s: %s", r.what, p.msg)
			}
		}
		r.Options = opts
	}
	b.nameRoutes()
}

// checkLog fills ${var} into the front matter's log: path as into every
// other attribute of the contract, so the run appends to the file lint
// showed: `log: ${out}/run.log` with `vars: {out: /srv/x}` is
// /srv/x/run.log. An undefined var is an error at its column (with a
// suggestion for a near miss); a secret is never filled into a path, which
// reports and `explain` print. at is where the path's text starts.
func (b *bodyParser) checkLog(at Pos) {
	if !strings.Contains(b.c.Log, "${") {
		return
	}
	raw := b.c.Log
	posOf := func(off int) Pos { return offsetPos(at, raw, off) }
	before := len(b.d.list)
	b.c.Log = b.expandAt(raw, posOf)
	if len(b.d.list) > before {
		return
	}
	if m := reDollarVar.FindStringSubmatchIndex(b.c.Log); m != nil {
		// Left as written by expandAt: a secret.
		b.d.errorf(posOf(strings.Index(raw, b.c.Log[m[0]:m[1]])), "log: secret %s is not filled into the log file's path (the path is shown in reports and by explain); use a var", b.c.Log[m[2]:m[3]])
	}
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
