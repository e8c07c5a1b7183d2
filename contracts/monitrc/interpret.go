package monitrc

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
)

// ops maps Monit's comparison words to expr's operators.
var ops = map[string]string{
	">": ">", "gt": ">", "greater": ">", "older": ">",
	"<": "<", "lt": "<", "less": "<", "newer": "<",
	"=": "==", "==": "==", "eq": "==", "equal": "==",
	"!=": "!=", "<>": "!=", "ne": "!=", "notequal": "!=",
	">=": ">=", "ge": ">=", "<=": "<=", "le": "<=",
}

var negated = map[string]string{">": "<=", "<": ">=", ">=": "<", "<=": ">", "==": "!=", "!=": "=="}

// value is a comparison read from a test: the operator and the number
// with its unit ("%", "kb", "s", …), or a string.
type value struct {
	op   string
	num  float64
	unit string
	str  string
	isNo bool // a number
}

// readValue reads `[operator] VALUE [unit]` from words.
func readValue(words []token) (value, []token, bool) {
	v := value{op: "=="}
	for len(words) > 0 && words[0].is("than", "to") {
		words = words[1:]
	}
	if len(words) > 0 && !words[0].quoted {
		if op, ok := ops[words[0].lower()]; ok {
			v.op = op
			words = words[1:]
		}
	}
	for len(words) > 0 && words[0].is("than", "to") {
		words = words[1:]
	}
	if len(words) == 0 {
		return v, nil, false
	}
	w := words[0]
	words = words[1:]
	text := w.text
	if w.quoted {
		v.str = text
		return v, words, true
	}
	i := 0
	for i < len(text) && (text[i] >= '0' && text[i] <= '9' || text[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(text[:i], 64)
	if err != nil || i == 0 {
		v.str = text
		return v, words, true
	}
	v.num, v.isNo = n, true
	v.unit = strings.ToLower(text[i:])
	if v.unit == "" && len(words) > 0 && unitWord(words[0].lower()) {
		v.unit = words[0].lower()
		words = words[1:]
	}
	return v, words, true
}

func unitWord(w string) bool {
	switch strings.TrimSuffix(w, "/s") {
	case "%", "percent", "b", "byte", "bytes", "kb", "kilobyte", "kilobytes", "mb", "megabyte", "megabytes", "gb", "gigabyte", "gigabytes",
		"tb", "s", "sec", "second", "seconds", "m", "min", "minute", "minutes", "h", "hour", "hours", "d", "day", "days",
		"ms", "millisecond", "milliseconds":
		return true
	}
	return false
}

func (v value) percent() bool { return v.unit == "%" || v.unit == "percent" }

// bytes is the value in bytes (sizes are 1024-based, as Monit's).
func (v value) bytes() float64 {
	switch v.unit {
	case "kb", "kilobyte", "kilobytes", "k":
		return v.num * 1024
	case "mb", "megabyte", "megabytes", "m":
		return v.num * 1024 * 1024
	case "gb", "gigabyte", "gigabytes", "g":
		return v.num * 1024 * 1024 * 1024
	case "tb":
		return v.num * 1024 * 1024 * 1024 * 1024
	}
	return v.num
}

// seconds is the value in seconds (seconds by default).
func (v value) seconds() float64 {
	switch v.unit {
	case "ms", "millisecond", "milliseconds":
		return v.num / 1000
	case "m", "min", "minute", "minutes":
		return v.num * 60
	case "h", "hour", "hours":
		return v.num * 3600
	case "d", "day", "days":
		return v.num * 86400
	}
	return v.num
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// cmpCheck is a test that fails when FIELD OP LIT holds.
func cmpCheck(stepID, field, op, lit string) check {
	return check{step: stepID, rows: []row{{field: field, healthy: negated[op] + " " + lit, failing: op + " " + lit}},
		cond: stepID + "." + field + " " + op + " " + lit}
}

// mustCheck is a test that fails unless FIELD OP LIT holds (failed
// permission 755, failed uid root).
func mustCheck(stepID, field, op, lit string) check {
	return check{step: stepID, rows: []row{{field: field, healthy: op + " " + lit, failing: negated[op] + " " + lit}},
		cond: stepID + "." + field + " " + negated[op] + " " + lit}
}

// boolCheck fails when FIELD is bad.
func boolCheck(stepID, field string, bad bool) check {
	return check{step: stepID, rows: []row{{field: field, healthy: strconv.FormatBool(!bad), failing: strconv.FormatBool(bad)}},
		cond: fmt.Sprintf("%s.%s == %t", stepID, field, bad)}
}

// interpret turns one test into a check, adding the steps it reads; a
// test it cannot translate is a note, and false.
func (b *builder) interpret(t *test) (check, bool) {
	w := t.words
	if len(w) == 0 {
		b.note(t.at, t.text, "an empty test; translate it by hand")
		return check{}, false
	}
	s := b.s
	first := w[0].lower()
	switch {
	case first == "failed" || first == "succeeded":
		return b.failed(t, first == "succeeded", w[1:])
	case first == "does" || first == "exist" || first == "not":
		return b.existence(t, w)
	case first == "changed":
		return b.changedTest(t, w[1:])
	case first == "link" && s.kind == "network":
		if b.byID["link"] == nil {
			return check{}, false
		}
		if len(w) > 1 && w[1].is("up") {
			return check{step: "link", rows: []row{{field: "stdout", healthy: `!= "up"`, failing: `"up"`}}, cond: `link.stdout == "up"`}, true
		}
		return check{step: "link", rows: []row{{field: "stdout", healthy: `"up"`, failing: `!= "up"`}}, cond: `link.stdout != "up"`}, true
	}
	switch s.kind {
	case "process":
		return b.processResource(t, w)
	case "system":
		return b.systemResource(t, w)
	case "file", "fifo", "directory":
		return b.fileTest(t, w)
	case "filesystem":
		return b.spaceTest(t, w)
	case "program":
		return b.programTest(t, w)
	}
	b.note(t.at, t.text, "a test the import does not translate for a "+s.kind+" check; translate it by hand")
	return check{}, false
}

func (b *builder) existence(t *test, w []token) (check, bool) {
	missing := false
	for _, x := range w {
		if x.is("not") {
			missing = true
		}
	}
	var stepID, field string
	switch b.s.kind {
	case "process":
		stepID, field = "process", "running"
	case "file", "fifo", "directory":
		b.fileStep("")
		stepID, field = "file", "exists"
	case "filesystem":
		b.spaceStep()
		stepID, field = "space", "mounted"
	default:
		b.note(t.at, t.text, "an existence test needs a process, file, fifo, directory or filesystem check")
		return check{}, false
	}
	return boolCheck(stepID, field, !missing), true
}

// processResource translates cpu, memory, threads, children, uptime and
// file descriptor tests of a process.
func (b *builder) processResource(t *test, w []token) (check, bool) {
	total := w[0].is("total")
	if total {
		w = w[1:]
	}
	if len(w) == 0 {
		return b.unknownTest(t)
	}
	what := w[0].lower()
	w = w[1:]
	for len(w) > 0 && w[0].is("usage") {
		w = w[1:]
	}
	v, _, ok := readValue(w)
	if !ok || !v.isNo {
		return b.unknownTest(t)
	}
	b.usageStep()
	prefix := ""
	if total {
		prefix = "total_"
	}
	switch what {
	case "cpu":
		return cmpCheck("usage", prefix+"cpu_pct", v.op, num(v.num)), true
	case "memory", "mem":
		if v.percent() {
			return cmpCheck("usage", prefix+"memory_pct", v.op, num(v.num)), true
		}
		return cmpCheck("usage", prefix+"memory_kb", v.op, num(v.bytes()/1024)), true
	case "threads":
		if !total {
			return cmpCheck("usage", "threads", v.op, num(v.num)), true
		}
	case "children":
		return cmpCheck("usage", "children", v.op, num(v.num)), true
	case "uptime":
		return cmpCheck("usage", "uptime_seconds", v.op, num(v.seconds())), true
	case "filedescriptors":
		if !total && !v.percent() {
			return cmpCheck("usage", "fds", v.op, num(v.num)), true
		}
	}
	return b.unknownTest(t)
}

func (b *builder) unknownTest(t *test) (check, bool) {
	hint := ""
	if len(t.words) > 0 {
		hint = didYouMean(t.words[0], testWords)
	}
	b.note(t.at, t.text, hint+"a test the import does not translate; write a step and a row for it by hand")
	return check{}, false
}

// testWords are the words a Monit test starts with, for a suggestion.
var testWords = []string{"failed", "succeeded", "changed", "exist", "does", "cpu", "total", "memory", "swap", "loadavg",
	"threads", "children", "uptime", "filedescriptors", "timestamp", "size", "content", "space", "inode", "status", "link"}

// systemResource translates loadavg, cpu, memory, swap, uptime and file
// descriptor tests of check system.
func (b *builder) systemResource(t *test, w []token) (check, bool) {
	var kept []token
	for _, x := range w {
		if !x.is("(", ")") {
			kept = append(kept, x)
		}
	}
	w = kept
	if len(w) == 0 {
		return b.unknownTest(t)
	}
	what := w[0].lower()
	w = w[1:]
	field := ""
	switch {
	case strings.HasPrefix(what, "loadavg"):
		period := "1"
		rest := strings.TrimPrefix(what, "loadavg")
		for len(w) > 0 && strings.HasSuffix(w[0].lower(), "min") {
			rest = w[0].lower()
			w = w[1:]
		}
		rest = strings.Trim(rest, "()")
		if p := strings.TrimSuffix(rest, "min"); p == "5" || p == "15" {
			period = p
		}
		field = "load" + period
		if len(w) >= 2 && w[0].is("per") && w[1].is("core") {
			field += "_per_core"
			w = w[2:]
		}
	case what == "cpu":
		field = "cpu_pct"
		for len(w) > 0 && w[0].is("usage") {
			w = w[1:]
		}
		if len(w) > 0 && w[0].is("user", "system", "wait", "nice", "hardirq", "softirq", "steal", "guest", "guestnice") {
			field = "cpu_" + w[0].lower() + "_pct"
			w = w[1:]
		}
	case what == "memory" || what == "mem" || what == "swap":
		field = map[string]string{"memory": "memory", "mem": "memory", "swap": "swap"}[what]
	case what == "uptime":
		field = "uptime_seconds"
	case what == "filedescriptors":
		field = "fds"
	default:
		return b.unknownTest(t)
	}
	for len(w) > 0 && w[0].is("usage") {
		w = w[1:]
	}
	v, _, ok := readValue(w)
	if !ok || !v.isNo {
		return b.unknownTest(t)
	}
	lit := num(v.num)
	switch {
	case field == "memory" || field == "swap":
		if v.percent() {
			field += "_pct"
		} else {
			field += "_kb"
			lit = num(v.bytes() / 1024)
		}
	case field == "fds" && v.percent():
		field = "fds_pct"
	case field == "uptime_seconds":
		lit = num(v.seconds())
	}
	return cmpCheck("system", field, v.op, lit), true
}

// fileTest translates timestamp, size, checksum, permission, uid and gid
// tests of a file, fifo or directory.
func (b *builder) fileTest(t *test, w []token) (check, bool) {
	what := w[0].lower()
	rest := w[1:]
	if field, ok := timestampField(what); ok {
		for len(rest) > 0 && rest[0].is("time", "timestamp") {
			rest = rest[1:]
		}
		v, _, ok := readValue(rest)
		if !ok || !v.isNo {
			return b.unknownTest(t)
		}
		b.fileStep("")
		return cmpCheck("file", field, v.op, num(v.seconds())), true
	}
	switch what {
	case "size":
		v, _, ok := readValue(rest)
		if !ok || !v.isNo {
			return b.unknownTest(t)
		}
		b.fileStep("")
		return cmpCheck("file", "size", v.op, num(v.bytes())), true
	case "content":
		b.note(t.at, t.text, "file content tests are not translated: Monit reads the lines added since its last cycle; "+
			"watch the log with a script step of your own (or journalctl --since)")
		return check{}, false
	}
	return b.unknownTest(t)
}

// timestampField maps Monit's timestamp words to the file step's age
// fields.
func timestampField(what string) (string, bool) {
	switch what {
	case "timestamp", "timestamps", "time":
		return "age_seconds", true
	case "mtime", "modification":
		return "mtime_age_seconds", true
	case "ctime", "change":
		return "ctime_age_seconds", true
	case "atime", "access":
		return "atime_age_seconds", true
	}
	return "", false
}

func (b *builder) spaceTest(t *test, w []token) (check, bool) {
	what := w[0].lower()
	rest := w[1:]
	switch what {
	case "space", "inode", "inodes":
		free := false
		for len(rest) > 0 && rest[0].is("usage", "free") {
			free = free || rest[0].is("free")
			rest = rest[1:]
		}
		v, _, ok := readValue(rest)
		if !ok || !v.isNo {
			return b.unknownTest(t)
		}
		b.spaceStep()
		var field, lit string
		switch {
		case what == "space" && v.percent():
			field, lit = map[bool]string{false: "space_pct", true: "space_free_pct"}[free], num(v.num)
		case what == "space":
			field, lit = map[bool]string{false: "space_used_kb", true: "space_free_kb"}[free], num(v.bytes()/1024)
		case v.percent():
			field, lit = map[bool]string{false: "inode_pct", true: "inode_free_pct"}[free], num(v.num)
		default:
			field, lit = map[bool]string{false: "inodes_used", true: "inodes_free"}[free], num(v.num)
		}
		return cmpCheck("space", field, v.op, lit), true
	case "read", "write", "service":
		b.note(t.at, t.text, "filesystem I/O tests are not translated: read /proc/diskstats in a script step of your own")
		return check{}, false
	}
	return b.unknownTest(t)
}

func (b *builder) programTest(t *test, w []token) (check, bool) {
	if b.byID["program"] == nil {
		return check{}, false
	}
	switch w[0].lower() {
	case "status":
		v, _, ok := readValue(w[1:])
		if !ok || !v.isNo {
			return b.unknownTest(t)
		}
		return cmpCheck("program", "exit_code", v.op, num(v.num)), true
	case "content":
		v, _, ok := readValue(w[1:])
		if !ok || v.str == "" {
			return b.unknownTest(t)
		}
		return contentCheck("program", "stdout", v), true
	}
	return b.unknownTest(t)
}

// contentCheck fails when the field does not match the regex (content =
// "re") or does (content != "re").
func contentCheck(stepID, field string, v value) check {
	re := strconv.Quote(v.str)
	match := "`it matches " + re + "`"
	nomatch := "`!(it matches " + re + ")`"
	cond := stepID + "." + field + " matches " + re
	if v.op == "==" {
		return check{step: stepID, rows: []row{{field: field, healthy: match, failing: nomatch}}, cond: "!(" + cond + ")"}
	}
	return check{step: stepID, rows: []row{{field: field, healthy: nomatch, failing: match}}, cond: cond}
}

// changedTest translates `changed X`: the value differs from the one the
// previous run saw (kept in the contract's snapshot).
func (b *builder) changedTest(t *test, w []token) (check, bool) {
	if len(w) == 0 {
		return b.unknownTest(t)
	}
	what := w[0].lower()
	var stepID, field, example string
	switch {
	case what == "checksum" || what == "md5" || what == "sha1":
		sum := "md5"
		if what == "sha1" {
			sum = "sha1"
		}
		if b.s.kind != "file" {
			return b.unknownTest(t)
		}
		b.fileStep(sum)
		stepID, field, example = "file", sum, `"d41d8cd98f00b204e9800998ecf8427e"`
	case what == "timestamp" || what == "time" || what == "mtime" || what == "ctime" || what == "atime" ||
		what == "modification" || what == "change" || what == "access":
		if b.s.kind != "file" && b.s.kind != "fifo" && b.s.kind != "directory" {
			return b.unknownTest(t)
		}
		b.fileStep("")
		f, _ := timestampField(what)
		stepID, field, example = "file", strings.TrimSuffix(f, "_age_seconds"), "1700000000"
		if field == "age_seconds" {
			field = "timestamp"
		}
	case what == "size":
		if b.s.kind != "file" {
			return b.unknownTest(t)
		}
		b.fileStep("")
		stepID, field, example = "file", "size", "0"
	case what == "permission" || what == "perm" || what == "uid" || what == "gid":
		if b.s.kind == "process" || b.s.kind == "system" || b.s.kind == "program" || b.s.kind == "host" || b.s.kind == "network" {
			return b.unknownTest(t)
		}
		b.fileStep("")
		stepID, example = "file", `"root"`
		field = map[string]string{"permission": "mode", "perm": "mode", "uid": "user", "gid": "group"}[what]
		if field == "mode" {
			example = `"644"`
		}
	case what == "pid" || what == "ppid":
		if b.s.kind != "process" {
			return b.unknownTest(t)
		}
		stepID, field, example = "process", what, "1"
	case what == "status":
		if b.s.kind != "program" || b.byID["program"] == nil {
			return b.unknownTest(t)
		}
		stepID, field, example = "program", "exit_code", "0"
	default:
		if what == "fsflags" {
			b.note(t.at, t.text, "mount flag changes are not translated: compare `findmnt -no OPTIONS PATH` in a script step of your own")
			return check{}, false
		}
		return b.unknownTest(t)
	}
	key := stepID + "_" + field
	b.changed[key] = example
	prev := fmt.Sprintf("state.agents?.[%q]?.%s", b.name, key)
	return check{step: stepID, rows: []row{{field: field,
		healthy: fmt.Sprintf("`it == (%s ?? it)`", prev), failing: fmt.Sprintf("`it != (%s ?? it)`", prev)}},
		cond: fmt.Sprintf("%s.%s != (%s ?? %s.%s)", stepID, field, prev, stepID, field)}, true
}

// failed translates `failed …` and `succeeded …`: connections, ping,
// checksum, permission, uid and gid.
func (b *builder) failed(t *test, succeeded bool, w []token) (check, bool) {
	if len(w) == 0 {
		return b.unknownTest(t)
	}
	what := w[0].lower()
	switch what {
	case "ping", "ping4", "ping6":
		return b.ping(t, succeeded, w)
	case "checksum", "md5", "sha1":
		return b.checksum(t, w)
	case "permission", "perm":
		if len(w) < 2 || !reOctal.MatchString(w[1].text) || b.s.kind == "process" {
			return b.unknownTest(t)
		}
		mode, _ := strconv.ParseInt(w[1].text, 8, 32)
		b.fileStep("")
		return mustCheck("file", "mode", "==", strconv.Quote(strconv.FormatInt(mode, 8))), true
	case "uid", "euid", "gid":
		if len(w) < 2 || b.s.kind == "process" {
			b.note(t.at, t.text, "a process's owner is not translated: check `ps -o user= -p PID` in a script step of your own")
			return check{}, false
		}
		b.fileStep("")
		field := map[string]string{"uid": "user", "euid": "user", "gid": "group"}[what]
		if isNumber(w[1].text) {
			return mustCheck("file", map[string]string{"user": "uid", "group": "gid"}[field], "==", w[1].text), true
		}
		return mustCheck("file", field, "==", strconv.Quote(w[1].text)), true
	case "security":
		b.note(t.at, t.text, "security attribute tests are not translated: compare /proc/PID/attr/current in a script step of your own")
		return check{}, false
	case "link":
		if b.byID["link"] != nil {
			return check{step: "link", rows: []row{{field: "stdout", healthy: `"up"`, failing: `!= "up"`}}, cond: `link.stdout != "up"`}, true
		}
	}
	return b.connection(t, succeeded, w)
}

func (b *builder) checksum(t *test, w []token) (check, bool) {
	if b.s.kind != "file" {
		return b.unknownTest(t)
	}
	sum := "md5"
	if w[0].is("sha1") {
		sum = "sha1"
	}
	expect := ""
	for i := 0; i+1 < len(w); i++ {
		if w[i].is("expect") {
			expect = strings.ToLower(w[i+1].text)
		}
	}
	if len(expect) == 40 {
		sum = "sha1"
	}
	if expect == "" {
		// Monit compares with the checksum it saw first; contractd with
		// the one the previous run saw, so a change is told once.
		tt := *t
		tt.words = append([]token{{text: "changed"}}, w...)
		return b.changedTest(&tt, w)
	}
	b.fileStep(sum)
	return mustCheck("file", sum, "==", strconv.Quote(expect)), true
}

func (b *builder) ping(t *test, succeeded bool, w []token) (check, bool) {
	if b.s.kind != "host" || b.s.address == "" {
		return b.unknownTest(t)
	}
	count, timeout := 3, 5
	args := []string{"ping"}
	if w[0].is("ping4") {
		args = append(args, "-4")
	} else if w[0].is("ping6") {
		args = append(args, "-6")
	}
	for i := 1; i < len(w); i++ {
		switch {
		case w[i].is("count"):
			count = b.number(w, i, "ping count", 1)
		case w[i].is("timeout"):
			timeout = b.number(w, i, "timeout", 1)
		case w[i].is("size", "responsetime", "address"):
			b.note(t.at, t.text, "ping's "+w[i].lower()+" is not translated: add it to the ping command if it matters")
		}
	}
	if count < 1 {
		count = 1
	}
	if timeout < 1 {
		timeout = 5
	}
	args = append(args, "-c", strconv.Itoa(count), "-W", strconv.Itoa(timeout), "-q", contracts.ShellQuote(b.s.address))
	id := "ping"
	b.addStep(&step{id: id, kind: "sh", timeout: time.Duration(count*timeout+5) * time.Second,
		body:  strings.Join(args, " ") + " >/dev/null 2>&1",
		intro: fmt.Sprintf("`%s` answers ping (exit status 1: no answer; 2 or 127: ping could not run, which is unknown).", b.s.address)})
	if succeeded {
		return check{step: id, rows: []row{{field: "exit_code", healthy: "1", failing: "0"}}, cond: id + ".exit_code == 0"}, true
	}
	return check{step: id, rows: []row{{field: "exit_code", healthy: "0", failing: "1"}}, cond: id + ".exit_code == 1"}, true
}

// connection translates a port or unix socket test: an http step for
// HTTP(S), a script speaking send/expect for the greeting protocols, a
// tcp step otherwise.
func (b *builder) connection(t *test, succeeded bool, w []token) (check, bool) {
	host := "localhost"
	if b.s.kind == "host" {
		host = b.s.address
	}
	portNo := 0
	proto, scheme, request, method := "", "http", "/", "GET"
	timeout := b.netTimeout()
	udp, tls := false, false
	var status *value
	var content *value
	var respTime *value
	var headers []string
	var exchange []sendExpect
	var unsupported []string
	for i := 0; i < len(w); i++ {
		x := w[i]
		arg := func() token {
			if i+1 < len(w) {
				i++
				return w[i]
			}
			return token{}
		}
		switch x.lower() {
		case "host":
			host = b.cfg.host(arg(), x, "host")
		case "port":
			pt := arg()
			n, ok := port(pt)
			if !ok {
				b.cfg.errorf(pt, x, "%s", notAPort(pt))
				return check{}, false
			}
			portNo = n
		case "unixsocket", "unix":
			b.note(t.at, t.text, "unix socket tests are not translated: test the socket with a script step of your own (e.g. `socat -u OPEN:/dev/null UNIX-CONNECT:PATH`)")
			return check{}, false
		case "type":
			switch arg().lower() {
			case "udp":
				udp = true
			case "tcpssl":
				tls = true
			}
		case "udp":
			udp = true
		case "tcp", "ipv4", "ipv6":
		case "ssl", "tls":
			tls = true
			if i+1 < len(w) && w[i+1].is("options") {
				i++
				for i+1 < len(w) && !w[i].is("}") {
					i++
				}
			}
		case "protocol", "proto":
			proto = arg().lower()
		case "request":
			rt := arg()
			switch {
			case rt.file == "":
				b.cfg.errorf(rt, x, "request needs a path after it")
				return check{}, false
			case strings.ContainsFunc(rt.text, func(r rune) bool { return r <= ' ' || r == 0x7f }):
				b.cfg.errorf(rt, x, "request %s is not a request path: it holds a space or a control character (write a space as %%20)", written(rt))
				return check{}, false
			}
			request = rt.text
		case "method":
			method = strings.ToUpper(arg().text)
		case "status":
			v, rest, ok := readValue(w[i+1:])
			if !ok || !v.isNo {
				b.cfg.errorf(valueToken(w[i+1:]), x, "status needs a number (an HTTP status such as 200), not %s", written(valueToken(w[i+1:])))
				return check{}, false
			}
			status = &v
			i = len(w) - len(rest) - 1
		case "content":
			v, rest, ok := readValue(w[i+1:])
			if ok {
				content = &v
				i = len(w) - len(rest) - 1
			}
		case "responsetime":
			v, rest, ok := readValue(w[i+1:])
			if !ok || !v.isNo {
				b.cfg.errorf(valueToken(w[i+1:]), x, "responsetime needs a number (of milliseconds, or with its unit), not %s", written(valueToken(w[i+1:])))
				return check{}, false
			}
			respTime = &v
			i = len(w) - len(rest) - 1
		case "timeout":
			timeout = time.Duration(b.number(w, i, "timeout", 1)) * time.Second
			i++
			if i+1 < len(w) && w[i+1].is("second", "seconds") {
				i++
			}
		case "retry":
			b.number(w, i, "retry", 0)
			b.note(w[i], t.text, "retry is not translated: a probe fails on its first failed attempt; guards.after (a row's after=) waits for failing runs in a row instead")
			i++
		case "send":
			exchange = append(exchange, sendExpect{send: arg().text})
		case "expect":
			exchange = append(exchange, sendExpect{expect: arg().text})
		case "http":
			if i+1 < len(w) && w[i+1].is("headers") {
				i += 2
				var cur []string
				for ; i < len(w) && !w[i].is("]"); i++ {
					switch {
					case w[i].is("["):
					case w[i].is(","):
						headers = append(headers, strings.Join(cur, " "))
						cur = nil
					default:
						cur = append(cur, w[i].text)
					}
				}
				if len(cur) > 0 {
					headers = append(headers, strings.Join(cur, " "))
				}
			}
		case "hostheader":
			headers = append(headers, "Host: "+arg().text)
		case "username", "password":
			arg()
			unsupported = appendOnce(unsupported, "basic authentication (put the credentials in a secret and an Authorization header)")
		case "checksum", "certificate", "address":
			unsupported = appendOnce(unsupported, x.lower()+" (check it with a script step of your own)")
			for i+1 < len(w) && !w[i+1].is("port", "protocol", "proto", "request", "status", "content", "timeout", "host") {
				i++
			}
		default:
			unsupported = appendOnce(unsupported, x.text)
		}
	}
	if portNo == 0 {
		// No port written: Monit's default for the protocol.
		if proto == "https" || tls {
			portNo = 443
		} else if proto == "http" {
			portNo = 80
		} else {
			b.note(t.at, t.text, "a connection test without a port; translate it by hand")
			return check{}, false
		}
	}
	if udp {
		b.note(t.at, t.text, "UDP tests are not translated: contractd's tcp step connects over TCP; check the service "+
			"with a script step of your own (dig, ntpq, snmpget …)")
		return check{}, false
	}
	if len(unsupported) > 0 {
		b.note(t.at, t.text, "not translated in this test: "+strings.Join(unsupported, ", "))
	}
	if succeeded {
		st := b.tcpStep(host, portNo, timeout)
		return boolCheck(st.id, "open", true), true
	}
	switch {
	case proto == "http" || proto == "https" || proto == "" && tls && (status != nil || content != nil):
		if proto == "https" || tls {
			scheme = "https"
		}
		return b.httpCheck(scheme, host, portNo, method, request, headers, timeout, status, content, respTime), true
	case len(exchange) > 0:
		return b.exchangeCheck("port", host, portNo, exchange, timeout), true
	case banner(proto) != nil:
		return b.exchangeCheck(proto, host, portNo, banner(proto), timeout), true
	}
	if proto != "" {
		b.note(t.at, t.text, "protocol "+proto+" is checked as a TCP connection only: contractd speaks HTTP natively "+
			"and the greetings of "+strings.Join(bannerNames(), ", ")+"; check the protocol itself with a script step "+
			"(a monitoring-plugins check_* command, say)")
	} else if tls {
		b.note(t.at, t.text, "the TLS handshake is not checked, only the TCP connection")
	}
	st := b.tcpStep(host, portNo, timeout)
	return boolCheck(st.id, "open", false), true
}

// number is the number after the keyword w[i] (ping count, timeout,
// retry), as config.number reads it.
func (b *builder) number(w []token, i int, what string, min int) int {
	var t token
	if i+1 < len(w) {
		t = w[i+1]
	}
	n, _ := b.cfg.number(t, w[i], what, min)
	return n
}

// valueToken is the token readValue reads its value from: the first
// after an operator and its noise words.
func valueToken(w []token) token {
	for _, t := range w {
		if t.quoted || (ops[t.lower()] == "" && !t.is("than", "to")) {
			return t
		}
	}
	return token{}
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// freeID returns base, or base_2, base_3 … when a step has it.
func (b *builder) freeID(base string) string {
	id := base
	for n := 2; b.byID[id] != nil; n++ {
		id = fmt.Sprintf("%s_%d", base, n)
	}
	return id
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func (b *builder) tcpStep(host string, port int, timeout time.Duration) *step {
	for _, st := range b.steps {
		if st.kind == "tcp" && st.body == hostPort(host, port) {
			return st
		}
	}
	return b.addStep(&step{id: b.freeID(fmt.Sprintf("port_%d", port)), kind: "tcp", timeout: timeout, body: hostPort(host, port),
		intro: fmt.Sprintf("Port %d on %s accepts a connection.", port, host)})
}

func (b *builder) httpCheck(scheme, host string, port int, method, request string, headers []string, timeout time.Duration,
	status, content, respTime *value) check {
	if !strings.HasPrefix(request, "/") {
		request = "/" + request
	}
	url := scheme + "://" + hostPort(host, port) + request
	if scheme == "http" && port == 80 || scheme == "https" && port == 443 {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		url = scheme + "://" + host + request
	}
	body := method + " " + url
	for _, h := range headers {
		body += "\n" + h
	}
	id := b.freeID(fmt.Sprintf("http_%d", port))
	st := b.addStep(&step{id: id, kind: "http", timeout: timeout, body: body,
		intro: fmt.Sprintf("`%s` answers over HTTP%s.", url, map[bool]string{true: "S", false: ""}[scheme == "https"])})
	var c check
	c.step = st.id
	var conds []string
	if status == nil {
		c.rows = append(c.rows, row{field: "status_code", healthy: "100–399", failing: "0 or >= 400"})
		conds = append(conds, id+".status_code not in 100..399")
	} else {
		n := num(status.num)
		healthy := status.op + " " + n
		failing := negated[status.op] + " " + n
		switch status.op {
		case "==":
			healthy = n
		case "<", "<=":
			failing += " or 0"
			healthy = "`it > 0 && it " + status.op + " " + n + "`"
		case "!=":
			healthy = "`it != 0 && it != " + n + "`"
			failing = n + " or 0"
		}
		c.rows = append(c.rows, row{field: "status_code", healthy: healthy, failing: failing})
		cond := "!(" + id + ".status_code " + status.op + " " + n + ")"
		if status.op == "<" || status.op == "<=" || status.op == "!=" {
			cond = id + ".status_code == 0 || " + cond
		}
		if status.op == "==" {
			cond = id + ".status_code != " + n
		}
		conds = append(conds, cond)
	}
	if content != nil && content.str != "" {
		cc := contentCheck(id, "body", *content)
		c.rows = append(c.rows, cc.rows...)
		conds = append(conds, cc.cond)
	}
	if respTime != nil {
		secs := num(respTime.seconds())
		c.rows = append(c.rows, row{field: "duration", healthy: negated[respTime.op] + " " + secs, failing: respTime.op + " " + secs})
		conds = append(conds, id+".duration "+respTime.op+" "+secs)
	}
	c.cond = strings.Join(conds, " || ")
	return c
}

func (b *builder) exchangeCheck(proto, host string, port int, exchange []sendExpect, timeout time.Duration) check {
	id := b.freeID(fmt.Sprintf("%s_%d", strings.ReplaceAll(proto, "-", "_"), port))
	secs := int(timeout / time.Second)
	if secs < 1 {
		secs = 1
	}
	what := "answers as Monit's send/expect test says"
	if proto != "port" {
		what = "greets as " + proto + " does"
	}
	b.addStep(&step{id: id, kind: "bash", timeout: timeout + 2*time.Second, body: sendExpectScript(host, port, exchange, secs),
		intro: fmt.Sprintf("Port %d on %s %s (bash's /dev/tcp; it prints ok or what came instead).", port, host, what)})
	return check{step: id, rows: []row{{field: "stdout", healthy: "ok", failing: "!= ok"}}, cond: id + `.stdout != "ok"`}
}
