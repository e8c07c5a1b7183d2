package monitrc

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
)

// Monit's defaults, where the control file says nothing.
const (
	defaultCycle       = 2 * time.Minute // Debian's monitrc: set daemon 120
	defaultNetTimeout  = 5 * time.Second
	defaultMethodLimit = 30 * time.Second
	defaultProgTimeout = 300 * time.Second
	engineTimeout      = 30 * time.Second // contractd's repair and step timeout
)

// existence are the fields that say whether the object is there at all.
var existence = map[string]bool{"running": true, "exists": true, "mounted": true}

// step is one step of the stage being written.
type step struct {
	id      string
	kind    string // sh, bash, http, tcp
	timeout time.Duration
	fields  string // fields= of a JSON output
	body    string
	intro   string
	rows    []row
	expect  string  // Expected: value
	sources []*test // the Monit tests its rows come from
}

// row is one health-table row: a Monit test's field, its healthy and
// failing cells, and the statement it comes from.
type row struct {
	field, healthy, failing string
}

// actionRow is one row of the stage's action table; its Guards cell is
// written once every test is read (after= depends on all of them).
type actionRow struct {
	cond, act string
	after     int
	timeout   time.Duration
	extra     string
}

// check is what one Monit test became: the step it reads, its rows (a
// failing and a healthy cell on each field), and the condition, over the
// step by id, under which it fails.
type check struct {
	step string
	rows []row
	cond string
}

// builder writes one service's contract.
type builder struct {
	cfg     *config
	s       *service
	opts    Options
	name    string // the contract's name, and the agent's
	stage   string // the stage's id
	every   time.Duration
	steps   []*step
	byID    map[string]*step
	actions []actionRow
	notes   []Note
	// changed are the per-agent snapshot keys `changed` tests compare
	// with the previous run, by key, with the example value's JSON.
	changed   map[string]string
	relayAfts []int // for-N of the tests whose failure is only alerted
	from      []string
	// contractOf names each check's contract by the check's name in
	// lower case; dependsOn are the contracts this one depends on (its
	// depends_on), dependsOnChecks their checks' names as written and
	// dependsAt where the monitrc says so.
	contractOf      map[string]string
	dependsOn       []string
	dependsOnChecks []string
	dependsAt       []string
}

func (b *builder) note(at token, construct, todo string) {
	b.notes = append(b.notes, newNote(at, b.s.name, construct, todo))
}

func (b *builder) addStep(st *step) *step {
	if old, ok := b.byID[st.id]; ok {
		return old
	}
	b.byID[st.id] = st
	b.steps = append(b.steps, st)
	return st
}

// cycle is Monit's poll cycle: set daemon, or Debian's 120 s.
func (b *builder) cycle() time.Duration {
	if b.cfg.daemon > 0 {
		return b.cfg.daemon
	}
	return defaultCycle
}

func (b *builder) netTimeout() time.Duration {
	if b.cfg.limits.network > 0 {
		return b.cfg.limits.network
	}
	return defaultNetTimeout
}

// translate builds the service's stage: the existence step Monit's check
// implies, then one row (and where Monit acted, one action row) per test.
func (b *builder) translate() {
	s := b.s
	b.byID = map[string]*step{}
	b.changed = map[string]string{}
	b.every = b.cycle()
	if s.every > 1 {
		b.every *= time.Duration(s.every)
	}
	switch s.kind {
	case "process":
		b.processStep()
	case "file", "fifo", "directory":
		b.fileStep("")
	case "filesystem":
		b.spaceStep()
	case "program":
		b.programStep()
	case "system":
		b.addStep(&step{id: "system", kind: "sh", timeout: 10 * time.Second, fields: systemFields, body: systemScript(),
			intro: "The machine's load, CPU, memory, swap and file descriptors, read from /proc over one second."})
	case "host":
		if s.address == "" {
			b.note(s.at, "check host "+s.name, "no address: give the host's address in the contract's steps")
		}
	case "network":
		b.networkStep()
	}
	for _, t := range s.tests {
		b.test(t)
	}
	for _, l := range s.limits {
		b.restartLimit(l)
	}
	b.dependencies()
	b.notes = append(b.notes, s.notes...)
}

// dependencies translates `depends on A, B` into depends_on: the
// contracts this import writes for A and B. A check that is not among
// the imported files is a note; a loop is an error of the import
// (dependencyLoops), not written.
func (b *builder) dependencies() {
	for _, d := range b.s.depends {
		name, ok := b.contractOf[strings.ToLower(d.name.text)]
		switch {
		case !ok:
			b.note(d.name, d.text, fmt.Sprintf("no check %s in the files imported, so this dependency is not translated: "+
				"import the file that defines %s with this one (Monit reads them together), or add its contract "+
				"to depends_on by hand", d.name.text, d.name.text))
		case name == b.name:
		default:
			if !slices.Contains(b.dependsOn, name) {
				b.dependsOn = append(b.dependsOn, name)
				b.dependsOnChecks = append(b.dependsOnChecks, d.name.text)
			}
			b.dependsAt = appendOnce(b.dependsAt, d.name.pos())
		}
	}
}

// processStep is Monit's implicit test of a process check: the process
// runs, else its start program (when there is one) starts it.
func (b *builder) processStep() {
	s := b.s
	what := fmt.Sprintf("The process whose pid is in `%s` runs", s.pidfile)
	if s.match != "" {
		what = fmt.Sprintf("A process whose command line matches `%s` runs (the oldest is taken, as Monit takes the top-most)", s.match)
	}
	b.addStep(&step{id: "process", kind: "sh", timeout: 10 * time.Second, fields: "running:bool pid:int ppid:int",
		body: processScript(s), intro: what + "."})
	if s.hasExistence {
		return // an explicit (does not) exist test says what happens
	}
	b.process().rows = append(b.process().rows, row{field: "running", healthy: "true", failing: "false"})
	if cmd, timeout := b.startCommand(); cmd != "" {
		b.actions = append(b.actions, actionRow{cond: "`process.running == false`", act: cmd, after: 1, timeout: timeout})
	} else {
		b.relayAfts = append(b.relayAfts, 1)
	}
}

func (b *builder) process() *step { return b.byID["process"] }

// fileStep checks the path exists as the right kind (Monit's implicit
// test), with what stat and the checksum say.
func (b *builder) fileStep(sum string) *step {
	if st, ok := b.byID["file"]; ok {
		if sum != "" && !strings.Contains(st.fields, sum+":string") {
			st.fields, st.body = fileFields(sum), fileScript(b.s, sum)
		}
		return st
	}
	kind := map[string]string{"file": "regular file", "fifo": "fifo", "directory": "directory", "filesystem": "path"}[b.s.kind]
	st := b.addStep(&step{id: "file", kind: "sh", timeout: 30 * time.Second, fields: fileFields(sum), body: fileScript(b.s, sum),
		intro: fmt.Sprintf("`%s` is a %s; its mode, owner, size and ages as `stat` reads them.", b.s.path, kind)})
	if !b.s.hasExistence && b.s.kind != "filesystem" {
		st.rows = append(st.rows, row{field: "exists", healthy: "true", failing: "false"})
		b.existsAction("`file.exists == false`")
	}
	return st
}

// existsAction is what Monit does when the object is missing and no test
// says otherwise: its start program, else an alert.
func (b *builder) existsAction(cond string) {
	if cmd, timeout := b.startCommand(); cmd != "" {
		b.actions = append(b.actions, actionRow{cond: cond, act: cmd, after: 1, timeout: timeout})
		return
	}
	b.relayAfts = append(b.relayAfts, 1)
}

func (b *builder) spaceStep() *step {
	if st, ok := b.byID["space"]; ok {
		return st
	}
	st := b.addStep(&step{id: "space", kind: "sh", timeout: 30 * time.Second, fields: spaceFields, body: spaceScript(b.s),
		intro: fmt.Sprintf("The filesystem of `%s`: space and inodes as `df` counts them.", b.s.path)})
	if !b.s.hasExistence {
		st.rows = append(st.rows, row{field: "mounted", healthy: "true", failing: "false"})
		b.existsAction("`space.mounted == false`")
	}
	return st
}

func (b *builder) usageStep() *step {
	if st, ok := b.byID["usage"]; ok {
		return st
	}
	return b.addStep(&step{id: "usage", kind: "sh", timeout: 15 * time.Second, fields: usageFields, body: usageScript(b.s),
		intro: "Its resources, sampled over one second from /proc: CPU (as a share of the cores its threads can use, as Monit counts it), " +
			"resident memory, threads, children, uptime and open files; `total_*` count its children too."})
}

func (b *builder) programStep() {
	s := b.s
	timeout := s.progTimeout
	if timeout == 0 {
		timeout = b.cfg.limits.program
	}
	if timeout == 0 {
		timeout = defaultProgTimeout
	}
	cmd := b.command(&method{argv: splitProgram(s.path), raw: s.path, uid: s.progUID, gid: s.progGID, at: s.at})
	if cmd == "" {
		return
	}
	b.addStep(&step{id: "program", kind: "sh", timeout: timeout, body: cmd + " 2>&1",
		intro: fmt.Sprintf("Runs `%s`; its exit status and what it prints are judged below.", s.path)})
}

func (b *builder) networkStep() {
	s := b.s
	if s.iface == "" {
		b.note(s.at, "check network "+s.name+" address "+s.address, "only an interface name is translated: write `check network NAME interface IF`")
		return
	}
	b.addStep(&step{id: "link", kind: "sh", timeout: 10 * time.Second,
		body:  "cat " + contracts.ShellQuote("/sys/class/net/"+s.iface+"/operstate") + " 2>/dev/null || echo missing",
		intro: fmt.Sprintf("The link state of `%s`, as the kernel reports it.", s.iface)})
}

// startCommand is the command that starts the service (start program),
// with its timeout.
func (b *builder) startCommand() (string, time.Duration) {
	if b.s.start == nil {
		return "", 0
	}
	return b.command(b.s.start), b.methodTimeout(b.s.start, b.cfg.limits.start)
}

// restartCommand is Monit's restart: the restart program, or the stop
// program then the start program.
func (b *builder) restartCommand() (string, time.Duration) {
	s := b.s
	if s.restart != nil {
		return b.command(s.restart), b.methodTimeout(s.restart, b.cfg.limits.restart)
	}
	if s.start == nil {
		return "", 0
	}
	start, st := b.startCommand()
	if s.stop == nil || start == "" {
		return start, st
	}
	stop := b.command(s.stop)
	if stop == "" {
		return "", 0
	}
	return stop + "; " + start, b.methodTimeout(s.stop, b.cfg.limits.stop) + st
}

func (b *builder) methodTimeout(m *method, limit time.Duration) time.Duration {
	switch {
	case m.timeout > 0:
		return m.timeout
	case limit > 0:
		return limit
	}
	return defaultMethodLimit
}

// command renders a Monit program as the sh command a repair runs: each
// word as Monit passes it (no shell between in Monit, so each is quoted
// where sh would read it otherwise), behind runuser for `as uid`. It is
// empty, with a note, when the command cannot be written in a contract.
func (b *builder) command(m *method) string {
	if len(m.argv) == 0 {
		b.note(m.at, m.raw, "an empty program; write the command by hand")
		return ""
	}
	if strings.Contains(m.raw, "${") {
		b.note(m.at, m.raw, "a program with ${…} is not translated, since a contract reads ${name} as one of its vars; "+
			"write it into a script and name the script here")
		return ""
	}
	words := make([]string, 0, len(m.argv)+6)
	switch {
	case m.uid != "" && isNumber(m.uid):
		gid := m.gid
		if gid == "" {
			gid = m.uid
		}
		words = append(words, "setpriv", "--reuid="+m.uid, "--regid="+gid, "--clear-groups", "--")
	case m.uid != "":
		words = append(words, "runuser", "-u", contracts.ShellQuote(m.uid))
		if m.gid != "" {
			words = append(words, "-g", contracts.ShellQuote(m.gid))
		}
		words = append(words, "--")
	case m.gid != "":
		words = append(words, "setpriv", "--regid="+contracts.ShellQuote(m.gid), "--clear-groups", "--")
	}
	for _, w := range m.argv {
		words = append(words, contracts.ShellQuote(w))
	}
	return strings.Join(words, " ")
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// guards writes an action row's Guards cell: after=N when the test waits
// N cycles (and the contract's after is another), the repair timeout when
// it is not contractd's 30s, and the row's extra guards.
func (b *builder) guards(a actionRow) string {
	var g []string
	if a.after != b.contractAfter() && !strings.HasPrefix(a.act, "Alert") && !strings.HasPrefix(a.act, "Escalate") {
		g = append(g, fmt.Sprintf("after=%d", a.after))
	}
	if a.timeout > 0 && a.timeout != engineTimeout {
		g = append(g, "timeout="+contracts.FormatDuration(a.timeout))
	}
	if a.extra != "" {
		g = append(g, a.extra)
	}
	return strings.Join(g, " ")
}

// contractAfter is guards.after: the fewest cycles among the tests whose
// failure is only alerted (relayed), since contractd waits that many runs
// before a unit counts as failing.
func (b *builder) contractAfter() int {
	n := 0
	for _, a := range b.relayAfts {
		if n == 0 || a < n {
			n = a
		}
	}
	if n == 0 {
		return 1
	}
	return n
}

// test translates one `if … then …`.
func (b *builder) test(t *test) {
	c, ok := b.interpret(t)
	if !ok {
		return
	}
	st := b.byID[c.step]
	for _, r := range c.rows {
		if st.fields != "" && !strings.HasPrefix(r.healthy, "`") && !existence[r.field] {
			// A value a missing process or file leaves null is not a
			// second finding: the existence row says what is wrong.
			r.healthy += " or null"
			if strings.HasPrefix(r.failing, "!= ") {
				r.failing = "`it != nil && it " + r.failing + "`"
			}
		}
		st.rows = append(st.rows, r)
	}
	st.sources = append(st.sources, t)
	if t.within > 0 {
		b.note(t.at, t.text, fmt.Sprintf("%d failures within %d cycles is translated as %d failing runs in a row (after=%d): "+
			"contractd counts consecutive runs", t.cycles, t.within, t.cycles, t.cycles))
	}
	if t.els != nil && t.els.kind != "alert" {
		b.note(t.els.at, t.text, "an else action other than alert is not translated: contractd sends a resolved message when the test passes again")
	}
	cond := c.cond
	if g := b.guardCond(c.step); g != "" {
		if strings.Contains(cond, "||") {
			cond = "(" + cond + ")"
		}
		cond = g + " && " + cond
	}
	cond = "`" + cond + "`"
	switch t.act.kind {
	case "alert", "unmonitor", "monitor":
		b.relayAfts = append(b.relayAfts, t.cycles)
	case "restart", "start":
		cmd, timeout := b.restartCommand()
		if t.act.kind == "start" {
			cmd, timeout = b.startCommand()
		}
		if cmd == "" {
			b.note(t.act.at, t.text, "no "+t.act.kind+" program is defined, so this only alerts, as Monit would")
			b.relayAfts = append(b.relayAfts, t.cycles)
			return
		}
		b.actions = append(b.actions, actionRow{cond: cond, act: cmd, after: t.cycles, timeout: timeout})
	case "exec":
		cmd := b.command(t.act.exec)
		if cmd == "" {
			b.relayAfts = append(b.relayAfts, t.cycles)
			return
		}
		extra := "escalate_after=1" // Monit runs it once per failure
		if t.act.repeat > 0 {
			extra = fmt.Sprintf("budget=\"1 per %s\"", contracts.FormatDuration(time.Duration(t.act.repeat)*b.every))
		}
		timeout := t.act.exec.timeout
		if timeout == 0 {
			timeout = b.cfg.limits.program
		}
		b.actions = append(b.actions, actionRow{cond: cond, act: cmd, after: t.cycles, timeout: timeout, extra: extra})
	case "stop":
		stop := ""
		if b.s.stop != nil {
			stop = " (`" + b.command(b.s.stop) + "`)"
		}
		b.actions = append(b.actions, actionRow{cond: cond, act: "Escalate — Monit stopped " + b.s.name + " here" + strings.ReplaceAll(stop, "|", `\|`) +
			" and stopped watching it", after: t.cycles})
		b.note(t.act.at, t.text, "stop is translated as an escalation: a contract that stopped the service would start it again on its next run; "+
			"stop it by hand, or write the stop command into the row if that is what you want")
	}
}

// guardCond is what must hold for a test to be judged at all, as Monit
// skips the other tests of a process that does not run or a file that
// does not exist.
func (b *builder) guardCond(stepID string) string {
	if stepID != "process" && b.byID["process"] != nil {
		return "process.running"
	}
	return ""
}

// restartLimit translates `if N restarts within M cycles then ACTION`.
func (b *builder) restartLimit(l *restartLimit) {
	switch l.act.kind {
	case "unmonitor", "stop":
		if l != b.s.limits[0] {
			b.note(l.at, l.text, "only the first restart limit becomes the crash-loop guard")
			return
		}
		if l.act.kind == "stop" {
			b.note(l.at, l.text, "translated as the crash-loop guard: no more restarts and a person is paged, where Monit also stopped the service")
		}
	case "alert":
		window := contracts.FormatDuration(time.Duration(l.cycles) * b.every)
		b.actions = append(b.actions, actionRow{cond: fmt.Sprintf("`restarts(%q, %q) >= %d`", b.name, window, l.count),
			act: fmt.Sprintf("Alert — %d restarts within %d cycles (%s)", l.count, l.cycles, window), after: 1})
	default:
		b.note(l.at, l.text, "only unmonitor (or timeout) and alert are translated for a restart limit: add an action row with "+
			"restarts(\""+b.name+"\", WINDOW) >= N for what Monit did")
	}
}

// crashLoop is the front matter's crash_loop from the first restart
// limit when it unmonitors (or stops), or "".
func (b *builder) crashLoop() string {
	if len(b.s.limits) == 0 {
		return ""
	}
	if l := b.s.limits[0]; l.act.kind == "unmonitor" || l.act.kind == "stop" {
		return fmt.Sprintf("{max_restarts: %d, per: %s, then: escalate}", l.count, contracts.FormatDuration(time.Duration(l.cycles)*b.every))
	}
	return ""
}

// relayNotes says which alerted tests wait fewer cycles than Monit did.
func (b *builder) relayNotes() {
	after := b.contractAfter()
	for _, t := range b.s.tests {
		if (t.act.kind == "alert" || t.act.kind == "unmonitor") && t.cycles > after {
			b.note(t.at, t.text, fmt.Sprintf("alerted after %d failing %s, not %d: guards.after is the fewest cycles among the alerted tests",
				after, map[bool]string{true: "run", false: "runs"}[after == 1], t.cycles))
		}
	}
}

var reOctal = regexp.MustCompile(`^[0-7]{1,4}$`)
