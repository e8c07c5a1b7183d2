package monitrc

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
)

// write renders the service's contract.
func (b *builder) write() string {
	s := b.s
	var w strings.Builder
	b.relayNotes()
	b.frontMatter(&w)

	fmt.Fprintf(&w, "# %s\n\n", s.name)
	fmt.Fprintf(&w, "Monit's `check %s %s` (%s), as `contractd import monitrc` translated it. %s\n\n",
		s.kind, s.name, s.at.pos(), b.summary())
	if b.cfg.daemonAt != nil {
		fmt.Fprintf(&w, "Monit looked every %s (`set daemon` at %s)", contracts.FormatDuration(b.cfg.daemon), b.cfg.daemonAt.pos())
	} else {
		fmt.Fprintf(&w, "No `set daemon` was read, so Monit's cycle is taken as %s (Debian's monitrc sets 120 s)", contracts.FormatDuration(defaultCycle))
	}
	if s.every > 1 {
		fmt.Fprintf(&w, " and at this service every %d cycles", s.every)
	}
	fmt.Fprintf(&w, "; this contract runs every %s, repairs on any failing run as Monit did (no debounce), "+
		"and verifies a repair %s later.", contracts.FormatDuration(b.every), contracts.FormatDuration(b.grace()))
	if s.passive {
		w.WriteString(" Monit watched it in passive mode, so its agent is report-only: repairs are logged, never run.")
	}
	if len(s.groups) > 0 {
		fmt.Fprintf(&w, " In Monit it belonged to the group%s %s.", plural(len(s.groups)), strings.Join(quoteAll(s.groups), ", "))
	}
	if len(b.dependsOn) > 0 {
		fmt.Fprintf(&w, " It depends on %s (`depends on` at %s): while %s fails, a failure of this one is suppressed, "+
			"with no repair and no message of its own, and the failing check's incident names it.",
			strings.Join(quoteAll(b.dependsOnChecks), ", "), lineRanges(b.dependsAt),
			map[bool]string{true: "it", false: "one of them"}[len(b.dependsOn) == 1])
	}
	w.WriteString(" When it is critical, its routes are told; that is how Monit's `alert` actions arrive.\n\n")

	if len(b.changed) > 0 {
		b.maintains(&w)
	}

	w.WriteString("## Execution\n\n")
	fmt.Fprintf(&w, "### %s {#%s agent=%s}\n\n", s.name, b.stage, b.name)
	for _, st := range b.steps {
		if len(st.rows) == 0 && st.expect == "" && !b.readByAction(st.id) {
			continue // a step nothing judges is no step
		}
		b.writeStep(&w, st)
	}
	if len(b.actions) > 0 {
		fmt.Fprintf(&w, "**What Monit did when %s failed**\n\n", s.name)
		w.WriteString("| Condition | Action | Guards |\n|-----------|--------|--------|\n")
		for _, a := range b.actions {
			act := a.act
			if !strings.HasPrefix(act, "Alert") && !strings.HasPrefix(act, "Escalate") {
				act = codeSpan(act)
			}
			fmt.Fprintf(&w, "| %s | %s | %s |\n", cell(a.cond), cell(act), cell(b.guards(a)))
		}
		w.WriteString("\n")
	}
	sortedNotes(b.notes)
	if len(b.notes) > 0 {
		w.WriteString("## Left for you after the import\n\n")
		w.WriteString("These parts of the monitrc were not translated, or only in part:\n\n")
		for _, n := range b.notes {
			fmt.Fprintf(&w, "- `%s`: `%s` — %s\n", n.Pos, strings.ReplaceAll(n.Construct, "`", "'"), n.Todo)
		}
		w.WriteString("\n")
	}
	return strings.TrimRight(w.String(), "\n") + "\n"
}

// summary says in a sentence what the check watches.
func (b *builder) summary() string {
	s := b.s
	switch s.kind {
	case "process":
		if s.match != "" {
			return fmt.Sprintf("It keeps the process matching `%s` running.", s.match)
		}
		return fmt.Sprintf("It keeps the process of `%s` running.", s.pidfile)
	case "file", "fifo", "directory":
		return fmt.Sprintf("It watches the %s `%s`.", s.kind, s.path)
	case "filesystem":
		return fmt.Sprintf("It watches the filesystem of `%s`.", s.path)
	case "host":
		return fmt.Sprintf("It watches the host `%s` from here.", s.address)
	case "system":
		return "It watches this machine's resources."
	case "program":
		return fmt.Sprintf("It runs `%s` and judges what it says.", s.path)
	case "network":
		return fmt.Sprintf("It watches the network interface `%s`.", s.iface)
	}
	return ""
}

// grace is how long a repair is given before it is verified: one cycle,
// as Monit looks again at the next one, at most contractd's 30 s.
func (b *builder) grace() time.Duration {
	if b.every < 30*time.Second {
		return b.every
	}
	return 30 * time.Second
}

func (b *builder) frontMatter(w *strings.Builder) {
	s := b.s
	w.WriteString("---\n")
	fmt.Fprintf(w, "name: %s\n", b.name)
	fmt.Fprintf(w, "title: %s\n", strconv.Quote(s.name+" — imported from Monit"))
	fmt.Fprintf(w, "description: %s\n", strconv.Quote(fmt.Sprintf("check %s %s at %s, translated by contractd import monitrc", s.kind, s.name, s.at.pos())))
	w.WriteString("runtime_contract: 2\n")
	if s.passive {
		fmt.Fprintf(w, "report_only_agents: [%s]   # mode passive\n", b.name)
	}
	if len(b.dependsOn) > 0 {
		names := make([]string, len(b.dependsOn))
		for i, n := range b.dependsOn {
			names[i] = yamlWord(n)
		}
		fmt.Fprintf(w, "depends_on: [%s]   # depends on %s\n", strings.Join(names, ", "), strings.Join(b.dependsOnChecks, ", "))
	}
	fmt.Fprintf(w, "schedule: {every: %s, on_start: true", contracts.FormatDuration(b.every))
	if b.cfg.startDelay > 0 {
		fmt.Fprintf(w, ", start_delay: %s", contracts.FormatDuration(b.cfg.startDelay))
	}
	w.WriteString("}\n")
	w.WriteString("guards:\n")
	w.WriteString("  debounce: 0s   # Monit repairs on every failing cycle\n")
	if g := b.grace(); g != engineTimeout {
		fmt.Fprintf(w, "  grace: %s   # verify one cycle after a repair\n", contracts.FormatDuration(g))
	}
	if a := b.contractAfter(); a > 1 {
		fmt.Fprintf(w, "  after: %d   # for %d cycles\n", a, a)
	}
	if r := b.reminder(); r > 0 {
		fmt.Fprintf(w, "  repeat: %s   # reminder\n", contracts.FormatDuration(r))
	}
	if cl := b.crashLoop(); cl != "" {
		fmt.Fprintf(w, "  crash_loop: %s   # %s\n", cl, oneLine(b.s.limits[0].text))
	}
	if b.cfg.log != "" {
		fmt.Fprintf(w, "log: %s\n", strconv.Quote(b.cfg.log))
	}
	w.WriteString("notify:\n  - {log: {}}\n")
	for _, r := range b.emailRoutes() {
		w.WriteString("  - " + r + "\n")
	}
	w.WriteString("---\n\n")
}

// yamlWord writes a contract name as YAML reads it back as that string:
// plain, or quoted where YAML would read a number, a bool or null.
func yamlWord(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
		return strconv.Quote(s)
	}
	if s == "" || s[0] < 'A' || s[0] > 'Z' && s[0] < 'a' || s[0] > 'z' {
		return strconv.Quote(s)
	}
	return s
}

// reminder is guards.repeat from the alerts' `reminder N cycles`.
func (b *builder) reminder() time.Duration {
	n := 0
	for _, a := range b.recipients() {
		if a.reminder > 0 && (n == 0 || a.reminder < n) {
			n = a.reminder
		}
	}
	return time.Duration(n) * b.every
}

// recipients are the service's alert recipients: its own, and the global
// ones it does not turn off with noalert.
func (b *builder) recipients() []alert {
	var out []alert
	seen := map[string]bool{}
	for _, a := range append(append([]alert{}, b.s.alerts...), b.cfg.alerts...) {
		if seen[strings.ToLower(a.to)] {
			continue
		}
		skip := false
		for _, n := range b.s.noalerts {
			skip = skip || strings.EqualFold(n, a.to)
		}
		if !skip {
			seen[strings.ToLower(a.to)] = true
			out = append(out, a)
		}
	}
	return out
}

// emailRoutes is the email route for the recipients, through the first
// mail server (Monit's default is localhost:25).
func (b *builder) emailRoutes() []string {
	rcpt := b.recipients()
	if len(rcpt) == 0 {
		return nil
	}
	var to []string
	from := b.cfg.mailFrom
	for _, a := range rcpt {
		to = append(to, a.to)
		if len(a.events) > 0 {
			b.note(a.at, "alert "+a.to+" "+map[bool]string{true: "not ", false: ""}[a.not]+"on {"+strings.Join(a.events, ", ")+"}",
				"the event filter is not translated: every message of the contract goes to every recipient "+
					"(alert_on: critical or repair narrows what is sent)")
		}
		if a.from != "" {
			from = a.from
		}
	}
	if from == "" {
		from = "monit@" + b.opts.Hostname
	}
	ms := mailserver{host: "localhost"}
	if len(b.cfg.mailservers) > 0 {
		ms = b.cfg.mailservers[0]
	}
	port := ms.port
	tls := "none"
	switch {
	case ms.security == "ssl" || strings.HasPrefix(ms.security, "sslv"):
		tls = "tls"
		if port == 0 {
			port = 465
		}
	case ms.security != "":
		tls = "starttls"
	}
	if port == 0 {
		port = 25
	}
	opts := []string{"server: " + strconv.Quote(hostPort(ms.host, port))}
	if tls != "starttls" {
		opts = append(opts, "tls: "+tls)
	}
	opts = append(opts, "from: "+strconv.Quote(from), "to: "+strconv.Quote(strings.Join(to, ", ")))
	if ms.username != "" {
		if tls == "none" && !loopback(ms.host) {
			opts[1] = "tls: starttls"
			b.note(ms.at, "set mailserver "+ms.host+" username "+ms.username, "contractd sends a login only over TLS: the route "+
				"asks for STARTTLS, which the server must offer")
		}
		opts = append(opts, "username: "+strconv.Quote(ms.username), "password_env: MONIT_SMTP_PASSWORD")
		b.note(ms.at, "set mailserver "+ms.host+" password …", "the password is not copied into the contract: "+
			"give it to contractd in the environment variable MONIT_SMTP_PASSWORD (or point password_file at a file)")
	}
	if ms.timeout > 0 {
		opts = append(opts, "timeout: "+contracts.FormatDuration(ms.timeout))
	}
	return []string{"{email: {" + strings.Join(opts, ", ") + "}}"}
}

func loopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}

// maintains declares the per-agent snapshot keys the `changed` tests
// compare with.
func (b *builder) maintains(w *strings.Builder) {
	w.WriteString("## Maintains\n\n")
	w.WriteString("- agents: map of what the previous run saw, for the tests that alert on a change\n\n")
	w.WriteString("### Per-Agent Snapshot Schema\n\n```json\n")
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(b.changed)) {
		kv = append(kv, fmt.Sprintf("%q: %s", k, b.changed[k]))
	}
	fmt.Fprintf(w, "{%q: {%s}}\n```\n\n", b.name, strings.Join(kv, ", "))
}

func (b *builder) readByAction(id string) bool {
	for _, a := range b.actions {
		if strings.Contains(a.cond, id+".") {
			return true
		}
	}
	return false
}

func (b *builder) writeStep(w *strings.Builder, st *step) {
	if st.intro != "" {
		w.WriteString(st.intro)
		for i, t := range st.sources {
			if i == 0 {
				w.WriteString(" Monit:")
			} else {
				w.WriteString(";")
			}
			fmt.Fprintf(w, " %s (%s)", codeSpan(t.text), t.at.pos())
		}
		w.WriteString("\n\n")
	}
	attrs := "id=" + st.id
	if st.timeout > 0 && st.timeout != engineTimeout {
		attrs += " timeout=" + contracts.FormatDuration(st.timeout)
	}
	if st.fields != "" {
		attrs += fmt.Sprintf(" as=json fields=%q", st.fields)
	}
	fence := "```"
	for strings.Contains(st.body, fence) {
		fence += "`"
	}
	fmt.Fprintf(w, "%s%s {%s}\n%s\n%s\n\n", fence, st.kind, attrs, st.body, fence)
	if len(st.rows) > 0 {
		w.WriteString("| Field | Healthy | Critical |\n|-------|---------|----------|\n")
		for _, r := range st.rows {
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", r.field, cell(r.healthy), cell(r.failing))
		}
		w.WriteString("\n")
	}
}

// cell escapes a table cell's pipes.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// codeSpan writes s as inline code, with enough backticks around it.
func codeSpan(s string) string {
	ticks := "`"
	for strings.Contains(s, ticks) {
		ticks += "`"
	}
	if ticks == "`" {
		return "`" + s + "`"
	}
	return ticks + " " + s + " " + ticks
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = "`" + s + "`"
	}
	return out
}

// lineRanges writes FILE:LINE positions with each file named once and
// runs of lines as ranges: "rc:8–12, 14, other:3".
func lineRanges(ps []string) string {
	var out []string
	prevFile := ""
	for i := 0; i < len(ps); {
		f, first := splitPos(ps[i])
		last := first
		j := i + 1
		for ; j < len(ps); j++ {
			g, n := splitPos(ps[j])
			if g != f || n != last+1 {
				break
			}
			last = n
		}
		r := strconv.Itoa(first)
		if last > first {
			r += "–" + strconv.Itoa(last)
		}
		if f != prevFile {
			r, prevFile = f+":"+r, f
		}
		out = append(out, r)
		i = j
	}
	return strings.Join(out, ", ")
}

// sortedNotes orders notes by file and line.
func sortedNotes(ns []Note) {
	sort.SliceStable(ns, func(i, j int) bool {
		fi, li := splitPos(ns[i].Pos)
		fj, lj := splitPos(ns[j].Pos)
		if fi != fj {
			return fi < fj
		}
		return li < lj
	})
}

func splitPos(p string) (string, int) {
	i := strings.LastIndexByte(p, ':')
	n, _ := strconv.Atoi(p[i+1:])
	return p[:i], n
}
