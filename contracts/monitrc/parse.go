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

// parser reads Monit's grammar from the token stream: global set
// statements, check entries and their statements. What it does not know
// becomes a note at its line, and the reader goes on at the next
// statement, as a person reading the file would.
type parser struct {
	toks []token
	i    int
	cfg  *config
	cur  *service
}

// noise are the words Monit ignores wherever they stand ("if", "then" and
// "for" are read by the statements that need them).
var noise = map[string]bool{"and": true, "with": true, "within": true, "has": true, "using": true, "use": true,
	"on": true, "only": true, "of": true, "is": true, "as": true, "but": true, "the": true}

// serviceStarts are the words that start a statement inside a check entry.
var serviceStarts = map[string]bool{"if": true, "start": true, "stop": true, "restart": true, "depends": true, "depend": true,
	"group": true, "every": true, "not": true, "mode": true, "onreboot": true, "alert": true, "noalert": true, "ignore": true}

func (p *parser) end() bool { return p.i >= len(p.toks) }

func (p *parser) peek() token {
	if p.end() {
		return token{}
	}
	return p.toks[p.i]
}

func (p *parser) next() token {
	t := p.peek()
	if !p.end() {
		p.i++
	}
	return t
}

// accept consumes the next token, noise skipped first, when it is one of
// the keywords.
func (p *parser) accept(kw ...string) bool {
	p.skipNoise()
	if p.peek().is(kw...) {
		p.i++
		return true
	}
	return false
}

func (p *parser) skipNoise() {
	for !p.end() && !p.peek().quoted && noise[p.peek().lower()] {
		p.i++
	}
}

// statementStart reports whether t starts a statement where the parser
// stands: a global one anywhere, a service one inside a check entry.
func (p *parser) statementStart(t token) bool {
	if t.quoted {
		return false
	}
	if t.is("set", "check") {
		return true
	}
	return p.cur != nil && serviceStarts[t.lower()]
}

// text is the source of tokens from..p.i as written, on one line.
func (p *parser) text(from int) string {
	if from >= p.i || from >= len(p.toks) {
		return ""
	}
	first, last := p.toks[from], p.toks[p.i-1]
	if first.src == last.src && last.end > first.off {
		return oneLine(stripComments(first.src.text[first.off:last.end]))
	}
	var words []string
	for _, t := range p.toks[from:p.i] {
		words = append(words, t.text)
	}
	return strings.Join(words, " ")
}

// stripComments removes # comments (outside quotes) from source text.
func stripComments(s string) string {
	var b strings.Builder
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte(' ')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// skipStatement consumes tokens up to the next statement and returns their
// text.
func (p *parser) skipStatement(from int) string {
	if p.i == from {
		p.i++
	}
	depth := 0
	for !p.end() {
		t := p.peek()
		switch {
		case t.is("{", "["):
			depth++
		case t.is("}", "]"):
			depth--
		case depth <= 0 && p.statementStart(t):
			return p.text(from)
		}
		p.i++
	}
	return p.text(from)
}

// note records a construct the import does not translate.
func (p *parser) note(at token, construct, todo string) {
	if p.cur != nil {
		p.cur.notes = append(p.cur.notes, newNote(at, p.cur.name, construct, todo))
		return
	}
	p.cfg.notes = append(p.cfg.notes, newNote(at, "", construct, todo))
}

func (p *parser) parse() {
	for !p.end() {
		t := p.peek()
		start := p.i
		switch {
		case t.is("set"):
			p.cur = nil
			p.parseSet()
		case t.is("check"):
			p.parseCheck()
		case p.cur != nil && serviceStarts[t.lower()] && !t.quoted:
			p.parseServiceStatement()
		default:
			text := p.skipStatement(start)
			if hint := didYouMean(t, p.statementWords()); hint != "" {
				p.note(t, text, hint+"not understood by the import; translate it by hand")
				break
			}
			p.note(t, text, "not understood by the import; translate it by hand (monit -t reads it?)")
		}
		if p.i == start {
			p.i++ // never loop on a token no statement took
		}
	}
}

// globalStarts are the words that start a statement outside a check
// entry (include is read where it stands).
var globalStarts = []string{"set", "check", "include"}

// statementWords are the words that may start a statement where the
// parser stands, for a suggestion.
func (p *parser) statementWords() []string {
	words := append([]string(nil), globalStarts...)
	if p.cur != nil {
		for w := range serviceStarts {
			words = append(words, w)
		}
	}
	sort.Strings(words)
	return words
}

// didYouMean is "did you mean "start"? (…); " when the word t is a likely
// typo of one of words (contracts.Suggest), else "".
func didYouMean(t token, words []string) string {
	if t.quoted || t.text == "" || strings.Trim(t.lower(), "abcdefghijklmnopqrstuvwxyz-") != "" {
		return ""
	}
	for _, w := range words {
		if strings.EqualFold(w, t.text) {
			return "" // a word spelt right is wrong for another reason
		}
	}
	hint := contracts.Suggest(t.text, words)
	if hint == "" {
		return ""
	}
	return strings.TrimPrefix(hint, "; ") + " (monit -t refuses what Monit does not read); "
}

// number reads an integer token.
func (p *parser) number() (int, bool) {
	p.skipNoise()
	n, ok := digits(p.peek())
	if !ok {
		return 0, false
	}
	p.i++
	return n, true
}

// digits is t's value when t is a number as Monit writes one: unquoted
// digits, no sign.
func digits(t token) (int, bool) {
	if t.quoted || t.text == "" || strings.Trim(t.text, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(t.text)
	return n, err == nil
}

// written says what a token is in an error: its text, quoted, or nothing
// (a statement cut short).
func written(t token) string {
	if t.file == "" {
		return "nothing"
	}
	if _, ok := digits(t); ok {
		return t.text
	}
	return strconv.Quote(t.text)
}

// prev is the token before the parser's place, for an error at the end
// of the input.
func (p *parser) prev() token {
	if p.i == 0 || p.i > len(p.toks) {
		return token{}
	}
	return p.toks[p.i-1]
}

// mustNumber reads the number a statement needs after the keyword what,
// as config.number reads it; a word that is no number is taken, so the
// statement reads on.
func (p *parser) mustNumber(what string, min int) int {
	p.skipNoise()
	t := p.peek()
	n, ok := p.cfg.number(t, p.prev(), what, min)
	if ok || !p.end() && !p.statementStart(t) {
		p.i++
	}
	return n
}

// mustPort reads the port a statement needs after `port`.
func (p *parser) mustPort() int {
	p.skipNoise()
	t := p.peek()
	n, ok := port(t)
	if !ok {
		p.cfg.errorf(t, p.prev(), "%s", notAPort(t))
		if !p.end() && !p.statementStart(t) {
			p.i++
		}
		return 0
	}
	p.i++
	return n
}

// port is t's value when it is a TCP or UDP port, 1–65535.
func port(t token) (int, bool) {
	n, ok := digits(t)
	return n, ok && n >= 1 && n <= 65535
}

// notAPort is the error for a port that is not one.
func notAPort(t token) string {
	if t.file == "" {
		return "port needs a number from 1 to 65535 after it"
	}
	return fmt.Sprintf("port %s is not a port: a port is a number from 1 to 65535", written(t))
}

// mustSeconds reads the duration a statement needs after what (as
// mustNumber reads its number), at least min of its unit.
func (p *parser) mustSeconds(what string, min int) time.Duration {
	n := p.mustNumber(what, min)
	return time.Duration(n) * p.unit()
}

// unit reads the unit after a number: seconds when none is written.
func (p *parser) unit() time.Duration {
	switch p.peek().lower() {
	case "second", "seconds", "s", "sec":
		p.i++
	case "minute", "minutes", "min":
		p.i++
		return time.Minute
	case "hour", "hours":
		p.i++
		return time.Hour
	case "day", "days":
		p.i++
		return 24 * time.Hour
	case "millisecond", "milliseconds", "ms":
		p.i++
		return time.Millisecond
	}
	return time.Second
}

// block skips a {…} block and returns its tokens.
func (p *parser) block() []token {
	p.skipNoise()
	if !p.peek().is("{") {
		return nil
	}
	p.i++
	var out []token
	for depth := 1; !p.end(); {
		t := p.next()
		switch {
		case t.is("{"):
			depth++
		case t.is("}"):
			depth--
			if depth == 0 {
				return out
			}
		}
		out = append(out, t)
	}
	return out
}

func (p *parser) parseSet() {
	start := p.i
	at := p.next() // set
	what := p.peek()
	p.i++
	switch what.lower() {
	case "daemon":
		d := p.mustSeconds("set daemon", 1)
		if d > 0 {
			p.cfg.daemon, p.cfg.daemonAt = d, &what
		}
		if p.accept("start") {
			p.accept("delay")
			p.cfg.startDelay = p.mustSeconds("start delay", 0)
		}
		return
	case "log", "logfile":
		p.skipNoise()
		t := p.next()
		if t.is("syslog") {
			if p.accept("facility") {
				p.next()
			}
			p.cfg.dropped = append(p.cfg.dropped, p.text(start)+" (contractd logs to its own log: the journal under systemd)")
			return
		}
		p.cfg.log, p.cfg.logAt = t.text, &what
		return
	case "idfile", "statefile", "pidfile":
		p.next()
		p.cfg.dropped = append(p.cfg.dropped, p.text(start)+" (contractd keeps its state in its state directory)")
		return
	case "eventqueue":
		for p.accept("basedir", "slots") {
			p.next()
		}
		p.cfg.dropped = append(p.cfg.dropped, p.text(start)+" (contractd queues every message it could not deliver, always)")
		return
	case "init", "fips":
		p.cfg.dropped = append(p.cfg.dropped, p.text(start))
		return
	case "terminal":
		p.accept("batch")
		p.cfg.dropped = append(p.cfg.dropped, p.text(start))
		return
	case "mailserver":
		p.parseMailserver(start)
		return
	case "mail-format":
		p.cfg.mailFrom = p.mailFormat(start, at)
		return
	case "alert":
		if a, ok := p.parseAlert(start); ok {
			p.cfg.alerts = append(p.cfg.alerts, a)
		}
		return
	case "limits":
		p.parseLimits(start, at)
		return
	case "onreboot":
		if p.accept("start") {
			p.cfg.dropped = append(p.cfg.dropped, p.text(start))
			return
		}
		p.note(at, p.skipStatement(start), "contractd has no counterpart: every contract runs whenever contractd does; "+
			"to keep a service down across reboots, disable its unit or remove its contract")
		return
	case "httpd":
		p.note(at, p.skipStatement(start), "Monit's web interface is not translated: contractd serve has its own status page, "+
			"API and /metrics (--listen, --token-file; docs/operations.md)")
		return
	case "mmonit":
		p.note(at, p.skipStatement(start), "M/Monit is not translated: point Prometheus at contractd serve's /metrics, "+
			"or send alerts to a webhook or Alertmanager route")
		return
	case "ssl", "expectbuffer", "hostname", "heartbeat":
		p.block()
		p.cfg.dropped = append(p.cfg.dropped, p.skipStatement(start))
		return
	}
	p.note(at, p.skipStatement(start), didYouMean(what, setWords)+"a setting the import does not know; translate it by hand")
}

// setWords are the settings Monit has (`set WORD`), for a suggestion.
var setWords = []string{"daemon", "log", "logfile", "idfile", "statefile", "pidfile", "eventqueue", "init", "fips", "terminal",
	"mailserver", "mail-format", "alert", "limits", "onreboot", "httpd", "mmonit", "ssl", "expectbuffer", "hostname", "heartbeat"}

// parseMailserver reads `set mailserver HOST [port N] [username U]
// [password P] [using ssl|tls] …, HOST … [with timeout N seconds] [using
// hostname H]`.
func (p *parser) parseMailserver(start int) {
	at := p.toks[start]
	for {
		p.skipNoise()
		if p.end() || p.statementStart(p.peek()) {
			break
		}
		h := p.next()
		ms := mailserver{host: h.text, at: h}
		for {
			switch {
			case p.accept("port"):
				ms.port = p.mustPort()
			case p.accept("username"):
				ms.username = p.next().text
			case p.accept("password"):
				p.next()
				ms.password = true
			case p.accept("ssl", "tls", "sslauto", "sslv2", "sslv3", "tlsv1", "tlsv11", "tlsv12", "tlsv13"):
				ms.security = strings.ToLower(p.toks[p.i-1].text)
				if p.accept("options") {
					p.block()
				}
			case p.accept("certificate"):
				p.accept("checksum")
				p.accept("md5", "sha1")
				p.next()
				p.note(at, "certificate checksum", "not translated: the email route checks the server's certificate against the system's CAs or ca_file")
			case p.accept("timeout"):
				ms.timeout = p.mustSeconds("timeout", 1)
			case p.accept("hostname"):
				p.next()
				p.note(at, p.text(start), "the EHLO name is not translated: the email route says the host's own name")
			default:
				goto next
			}
		}
	next:
		p.cfg.mailservers = append(p.cfg.mailservers, ms)
		p.skipNoise()
		if !p.peek().is(",") {
			break
		}
		p.i++
	}
	// `with timeout` and `using hostname` may follow the list.
	for {
		switch {
		case p.accept("timeout"):
			d := p.mustSeconds("timeout", 1)
			for i := range p.cfg.mailservers {
				p.cfg.mailservers[i].timeout = d
			}
			continue
		case p.accept("hostname"):
			p.next()
			p.note(at, p.text(start), "the EHLO name is not translated: the email route says the host's own name")
			continue
		}
		break
	}
	if len(p.cfg.mailservers) > 1 {
		p.note(at, p.text(start), fmt.Sprintf("contractd's email route sends through one server: %s is used; "+
			"add a second email route (name: …) for a fallback", p.cfg.mailservers[0].host))
	}
}

// mailFormat reads `mail-format { from: … subject: … message: … }` and
// returns the sender it sets; subject and message are notes.
func (p *parser) mailFormat(start int, at token) string {
	toks := p.block()
	if len(toks) == 0 {
		return ""
	}
	raw := toks[0].src.text[toks[0].off:toks[len(toks)-1].end]
	from := ""
	var other []string
	for _, line := range strings.Split(raw, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "from":
			from = strings.TrimSpace(v)
		case "reply-to", "subject", "message":
			other = append(other, strings.ToLower(strings.TrimSpace(k)))
		}
	}
	if len(other) > 0 {
		p.note(at, p.text(start), "its "+strings.Join(other, ", ")+" are not translated: an email's subject is the message's "+
			"own line; word the messages with the contract's messages: templates (docs/contract-format.md, Message templates)")
	}
	return from
}

// parseAlert reads `alert ADDR [[but] not] [on] [{events}] [[with]
// reminder [on] N [cycles]] [with mail-format {…}]` after the alert word.
func (p *parser) parseAlert(start int) (alert, bool) {
	p.skipNoise()
	to := p.next()
	a := alert{to: to.text, at: to}
	if to.text == "" || !strings.Contains(to.text, "@") {
		p.note(to, p.skipStatement(start), "not an email address; translate the alert by hand")
		return a, false
	}
	for {
		switch {
		case p.accept("not"):
			a.not = true
		case p.peek().is("{"):
			for _, t := range p.block() {
				if !t.is(",") {
					a.events = append(a.events, t.lower())
				}
			}
		case p.accept("reminder"):
			a.reminder = p.mustNumber("reminder", 0)
			p.accept("cycle", "cycles")
		case p.accept("mail-format"):
			a.from = p.mailFormat(start, to)
		default:
			return a, true
		}
	}
}

func (p *parser) parseLimits(start int, at token) {
	toks := p.block()
	for i := 0; i < len(toks); i++ {
		key := strings.TrimSuffix(toks[i].lower(), ":")
		if !strings.HasSuffix(key, "timeout") {
			continue
		}
		kw := toks[i]
		if i+1 < len(toks) && toks[i+1].is(":") {
			i++
		}
		var val token
		if i+1 < len(toks) {
			val = toks[i+1]
		}
		n, ok := digits(val)
		if !ok || n < 1 {
			p.cfg.errorf(val, kw, "%s needs a number of 1 or more, not %s", strings.TrimSuffix(kw.text, ":"), written(val))
			continue
		}
		d := time.Duration(n) * time.Second
		if i+2 < len(toks) && toks[i+2].is("ms", "millisecond", "milliseconds") {
			d = time.Duration(n) * time.Millisecond
		}
		switch key {
		case "networktimeout":
			p.cfg.limits.network = d
		case "programtimeout":
			p.cfg.limits.program = d
		case "starttimeout":
			p.cfg.limits.start = d
		case "stoptimeout":
			p.cfg.limits.stop = d
		case "restarttimeout":
			p.cfg.limits.restart = d
		}
	}
	p.cfg.dropped = append(p.cfg.dropped, p.text(start)+" (its timeouts are the defaults of the translated steps and repairs)")
}

// checkKinds maps a check's type word to the service kind.
var checkKinds = map[string]string{"process": "process", "file": "file", "fifo": "fifo", "directory": "directory",
	"filesystem": "filesystem", "device": "filesystem", "host": "host", "system": "system", "program": "program", "network": "network"}

func (p *parser) parseCheck() {
	start := p.i
	at := p.next() // check
	kindTok := p.next()
	if kindTok.is("remote") {
		kindTok = p.next() // check remote host
	}
	kind, ok := checkKinds[kindTok.lower()]
	if !ok || kindTok.quoted {
		p.cur = nil
		p.note(at, p.skipStatement(start), didYouMean(kindTok, slices.Sorted(maps.Keys(checkKinds)))+"an unknown kind of check; translate it by hand")
		return
	}
	name := p.next()
	s := &service{kind: kind, name: name.text, at: at}
	p.cur = s
	p.cfg.services = append(p.cfg.services, s)
	switch kind {
	case "process":
		switch {
		case p.accept("pidfile"):
			s.pidfile = p.next().text
		case p.accept("matching"):
			s.match = p.next().text
		case p.accept("pid"):
			p.next()
			p.note(at, p.text(start), "a fixed pid is not translated: name the process by its pidfile or matching")
		default:
			p.note(at, p.text(start), "a process check names its process by pidfile or matching")
		}
	case "file", "fifo", "directory", "filesystem":
		if p.accept("path") {
			s.path = p.next().text
		}
	case "host":
		if p.accept("address") {
			a := p.next()
			s.address = a.text
			if a.text != "" {
				p.cfg.host(a, a, "address")
			}
		}
	case "network":
		switch {
		case p.accept("interface"):
			s.iface = p.next().text
		case p.accept("address"):
			s.address = p.next().text
		}
	case "program":
		if p.accept("path") {
			s.path = p.next().text
		}
		for {
			switch {
			case p.accept("timeout"):
				s.progTimeout = p.mustSeconds("timeout", 1)
				continue
			case p.accept("uid"):
				s.progUID = p.next().text
				continue
			case p.accept("gid"):
				s.progGID = p.next().text
				continue
			}
			break
		}
	}
}

func (p *parser) parseServiceStatement() {
	s := p.cur
	start := p.i
	t := p.next()
	switch t.lower() {
	case "if":
		p.parseIf(start)
	case "start", "stop", "restart":
		m := p.parseMethod(start)
		switch t.lower() {
		case "start":
			s.start = m
		case "stop":
			s.stop = m
		default:
			s.restart = m
		}
	case "depends", "depend":
		p.accept("on")
		first := len(s.depends)
		defer func() {
			for i := first; i < len(s.depends); i++ {
				s.depends[i].text = p.text(start)
			}
		}()
		for {
			p.skipNoise()
			n := p.peek()
			if p.end() || n.quoted && n.text == "" || !n.quoted && (p.statementStart(n) || n.is(",")) {
				break
			}
			p.i++
			s.depends = append(s.depends, dependency{name: n})
			if !p.peek().is(",") {
				break
			}
			p.i++
		}
	case "group":
		s.groups = append(s.groups, p.next().text)
	case "every":
		if n, ok := p.number(); ok {
			p.accept("cycle", "cycles")
			s.every = n
			return
		}
		p.next()
		p.note(t, p.text(start), "a cron-style schedule is not translated: contractd runs every schedule.every; "+
			"to skip a window, use contractd maintenance (or a recurring window once contractd has them)")
	case "not":
		if p.accept("every") {
			p.next()
		}
		p.note(t, p.text(start), "a do-not-check window is not translated: use contractd maintenance for the window "+
			"(or a recurring window once contractd has them)")
	case "mode":
		m := p.next()
		switch m.lower() {
		case "passive":
			s.passive = true
		case "active":
		default:
			p.note(t, p.text(start), "only mode active and mode passive are translated (passive: report_only_agents)")
		}
	case "onreboot":
		m := p.next()
		if !m.is("start") {
			p.note(t, p.text(start), "contractd has no counterpart: every contract runs whenever contractd does")
		}
	case "alert":
		if a, ok := p.parseAlert(start); ok {
			s.alerts = append(s.alerts, a)
		}
	case "noalert":
		s.noalerts = append(s.noalerts, p.next().text)
	case "ignore":
		p.note(t, p.skipStatement(start), "file content tests are not translated: watch the log with a script step of your own")
	}
}

// parseMethod reads `[program] [=] "command" [[as] uid X] [[and] gid Y]
// [[with] timeout N seconds]` after start, stop or restart.
func (p *parser) parseMethod(start int) *method {
	p.accept("program")
	p.accept("=")
	p.skipNoise()
	cmd := p.next()
	m := &method{raw: cmd.text, argv: splitProgram(cmd.text), at: p.toks[start]}
	p.methodOptions(m)
	return m
}

func (p *parser) methodOptions(m *method) {
	for {
		switch {
		case p.accept("uid"):
			m.uid = p.next().text
		case p.accept("gid"):
			m.gid = p.next().text
		case p.accept("timeout"):
			m.timeout = p.mustSeconds("timeout", 1)
		default:
			return
		}
	}
}

// splitProgram splits a program string as Monit does: words separated by
// white space, '…' and "…" keeping theirs. Monit runs the words with no
// shell between.
func splitProgram(s string) []string {
	var words []string
	var b strings.Builder
	inWord := false
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\'' || c == '"':
			q, inWord = c, true
		case isSpace(c):
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words
}

// actionWords are the actions a test may take.
var actionWords = map[string]bool{"alert": true, "restart": true, "start": true, "stop": true, "exec": true,
	"unmonitor": true, "monitor": true, "timeout": true}

func (p *parser) parseIf(start int) {
	s := p.cur
	at := p.toks[start]
	var words []token
	depth := 0
	for !p.end() {
		t := p.peek()
		if depth == 0 && t.is("then") {
			break
		}
		if depth == 0 && t.is("set", "check") {
			break
		}
		switch {
		case t.is("{", "["):
			depth++
		case t.is("}", "]"):
			depth--
		}
		p.i++
		if !t.quoted && (noise[t.lower()] || t.is("for", "if")) {
			continue
		}
		words = append(words, t)
	}
	if !p.accept("then") {
		p.note(at, p.text(start), "a test without then; translate it by hand")
		return
	}
	act, ok := p.parseAction()
	if !ok {
		p.note(at, p.skipStatement(start), "an unknown action; translate the test by hand")
		return
	}
	var els *action
	if p.accept("else") {
		p.accept("if")
		p.accept("succeeded", "passed", "recovered")
		p.cyclesSpec()
		p.accept("then")
		if e, ok := p.parseAction(); ok {
			els = &e
		}
	}
	text := p.text(start)
	// if N restarts within M cycles then ACTION
	if len(words) >= 3 && words[1].is("restart", "restarts") {
		n, ok1 := digits(words[0])
		m, ok2 := digits(words[2])
		if ok1 && ok2 {
			p.atLeastOne(words[0], fmt.Sprintf("%d restarts", n), n)
			p.atLeastOne(words[2], fmt.Sprintf("within %d cycles", m), m)
			s.limits = append(s.limits, &restartLimit{count: n, cycles: m, act: act, text: text, at: at})
			return
		}
	}
	t := &test{at: at, text: text, act: act, els: els}
	t.words, t.cycles, t.within = p.faultTolerance(words)
	for _, w := range t.words {
		if w.is("exist") {
			s.hasExistence = true
		}
	}
	s.tests = append(s.tests, t)
}

// cyclesSpec skips `[N] cycles` or `N times within M cycles` after
// else if succeeded.
func (p *parser) cyclesSpec() {
	save := p.i
	if _, ok := p.number(); ok {
		if p.accept("times") {
			p.number()
		}
		if p.accept("cycle", "cycles") {
			return
		}
	}
	p.i = save
}

func (p *parser) parseAction() (action, bool) {
	p.skipNoise()
	t := p.peek()
	if !actionWords[t.lower()] || t.quoted {
		return action{}, false
	}
	p.i++
	a := action{kind: t.lower(), at: t}
	if a.kind == "timeout" {
		a.kind = "unmonitor" // Monit's old name for it
	}
	if a.kind == "exec" {
		p.skipNoise()
		cmd := p.next()
		a.exec = &method{raw: cmd.text, argv: splitProgram(cmd.text), at: t}
		p.methodOptions(a.exec)
		if p.accept("repeat") {
			p.accept("every")
			a.repeat = p.mustNumber("repeat every", 1)
			p.accept("cycle", "cycles")
		}
	}
	return a, true
}

// faultTolerance takes `N cycles` or `N times [within] M cycles` off the
// end of a test's words. A count below 1, or more times than cycles, is
// an error (Monit refuses them too): no contract waits 0 runs.
func (p *parser) faultTolerance(words []token) (rest []token, cycles, within int) {
	n := len(words)
	if n >= 2 && words[n-1].is("cycle", "cycles") {
		m, ok := digits(words[n-2])
		if ok {
			if n >= 4 && words[n-3].is("times", "time") {
				k, ok := digits(words[n-4])
				if ok {
					p.atLeastOne(words[n-4], fmt.Sprintf("%d times", k), k)
					p.atLeastOne(words[n-2], fmt.Sprintf("within %d cycles", m), m)
					if k > m && m >= 1 {
						p.cfg.errorf(words[n-4], words[n-4], "%d times within %d cycles: a test cannot fail more times than there are cycles", k, m)
					}
					return words[:n-4], k, m
				}
			}
			p.atLeastOne(words[n-2], fmt.Sprintf("for %d cycles", m), m)
			return words[:n-2], m, 0
		}
	}
	return words, 1, 0
}

// atLeastOne is an error at t when the count n it reads is below 1.
func (p *parser) atLeastOne(t token, what string, n int) {
	if n < 1 {
		p.cfg.errorf(t, t, "%s: the count must be 1 or more", what)
	}
}
