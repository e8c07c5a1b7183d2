package monitrc

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/contractd/contractd/transports/addr"
)

// config is what a control file says, as read: the global settings that
// the contracts share and one service per check entry.
type config struct {
	daemon      time.Duration // set daemon N: one cycle
	daemonAt    *token
	startDelay  time.Duration
	log         string // set log FILE (not syslog)
	logAt       *token
	mailservers []mailserver
	mailFrom    string // set mail-format { from: … }
	alerts      []alert
	limits      limits
	services    []*service
	notes       []Note // notes about global settings
	dropped     []string
	errs        Errors // values the import refuses (a port that is none)
}

// errorf records an error of the input at t: the import writes nothing
// when there is one. A token past the end of the input (a statement cut
// short) is placed at the token before it.
func (c *config) errorf(t, before token, format string, args ...any) {
	if t.file == "" {
		t = before
	}
	c.errs = append(c.errs, t.errorf(format, args...))
}

// host is t's text, the host a statement needs after the keyword what,
// when it is a host name or an IP address as a contract's probe takes one
// (transports/addr); anything else is an error at t.
func (c *config) host(t, before token, what string) string {
	if _, _, err := addr.HostPort(net.JoinHostPort(t.text, "1")); err != nil || t.file == "" {
		c.errorf(t, before, "%s %s is not a host name or an IP address", what, written(t))
	}
	return t.text
}

// number is t's value, the number a statement needs after the keyword
// what, when it is one (digits, as Monit writes numbers) of at least min.
// Anything else is an error at t, never a default put in its place; ok
// says t is a number.
func (c *config) number(t, before token, what string, min int) (n int, ok bool) {
	n, ok = digits(t)
	switch {
	case !ok:
		c.errorf(t, before, "%s needs a number, not %s", what, written(t))
	case n < min:
		c.errorf(t, t, "%s %d: it must be %d or more", what, n, min)
	}
	return n, ok
}

// limits are the `set limits` a translation reads: the default timeouts.
type limits struct {
	network, program, start, stop, restart time.Duration
}

type mailserver struct {
	host     string
	port     int
	username string
	password bool   // a password was given (never copied)
	security string // "ssl", "tls" or ""
	timeout  time.Duration
	at       token
}

// alert is one recipient: `set alert` (global) or `alert` (one service).
type alert struct {
	to       string
	events   []string
	not      bool
	reminder int // cycles, 0 for none
	from     string
	at       token
}

// service is one check entry.
type service struct {
	kind     string // process, file, fifo, directory, filesystem, host, system, program, network
	name     string
	contract string // the name of the contract it becomes
	at       token
	pidfile  string
	match    string // check process … matching REGEX
	path     string // file, fifo, directory, filesystem, program (the command line)
	address  string // host
	iface    string // network
	// check program … with timeout N seconds, as uid, as gid
	progTimeout  time.Duration
	progUID      string
	progGID      string
	start        *method
	stop         *method
	restart      *method
	tests        []*test
	limits       []*restartLimit
	depends      []dependency
	groups       []string
	every        int // every N cycles
	passive      bool
	alerts       []alert
	noalerts     []string
	notes        []Note
	hasExistence bool // an explicit (does not) exist test
}

// dependency is one name of a `depends on` statement.
type dependency struct {
	name token
	text string // the statement as written
}

// method is a start, stop or restart program, or an exec action.
type method struct {
	argv    []string
	raw     string
	uid     string
	gid     string
	timeout time.Duration
	at      token
}

// action is what a test does when it fails: alert, restart, start, stop,
// exec, unmonitor.
type action struct {
	kind   string
	exec   *method
	repeat int // exec … repeat every N cycles
	at     token
}

// test is one `if … then …` of a service.
type test struct {
	at     token
	words  []token // the test between if and then, noise words removed
	text   string  // the whole statement as written, on one line
	cycles int     // for N cycles (or N of `N times within M cycles`)
	within int     // M of `N times within M cycles`, 0 otherwise
	act    action
	els    *action
}

// restartLimit is `if N restarts within M cycles then ACTION`.
type restartLimit struct {
	count, cycles int
	act           action
	text          string
	at            token
}

// Note is a construct the import did not translate, or translated only
// in part: where it is, what it says, and what the author must do.
type Note struct {
	// Pos is FILE:LINE of the construct.
	Pos string
	// Service is the check entry it belongs to, or "" for a global
	// setting.
	Service string
	// Construct is the monitrc text, on one line.
	Construct string
	// Todo says what contractd does instead and what the author must do.
	Todo string
}

// String is the note as the command prints it: FILE:LINE: note: …
func (n Note) String() string {
	return fmt.Sprintf("%s: note: %s: %s", n.Pos, n.Construct, n.Todo)
}

func newNote(at token, service, construct, todo string) Note {
	return Note{Pos: at.pos(), Service: service, Construct: oneLine(construct), Todo: todo}
}

// oneLine collapses white space runs to one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
