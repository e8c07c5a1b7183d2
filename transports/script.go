package transports

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// killAfter is the grace between the polite signal (SIGTERM) and SIGKILL,
// both for local process groups and for `timeout -k` on targets.
const killAfter = 2 * time.Second

// quote returns s as one single-quoted shell word: 'it'\”s'.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// joinArgv renders a fixed argv as a shell command line, each word quoted.
func joinArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// exports renders `export NAME='value'` lines in name order. Names that are
// not shell identifiers are skipped: they could not be exported anyway.
func exports(env map[string]string) string {
	names := make([]string, 0, len(env))
	for k := range env {
		if envName.MatchString(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "export %s=%s\n", k, quote(env[k]))
	}
	return b.String()
}

// secretsOf lists the non-empty values of env: every value a command
// exports is treated as a secret.
func secretsOf(env map[string]string) []string {
	var s []string
	for _, v := range env {
		if v != "" {
			s = append(s, v)
		}
	}
	return s
}

// Redact replaces every occurrence of each non-empty secret in s by "***".
// Longer secrets are replaced first so that a secret containing another is
// hidden whole. It never fails.
func Redact(s string, secrets []string) string {
	if len(secrets) == 0 || s == "" {
		return s
	}
	sorted := append([]string(nil), secrets...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	for _, sec := range sorted {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	return s
}

// redactTail hides a proper prefix of a secret that a cap cut off at the end
// of s, so a truncated capture cannot leak the secret's first half.
func redactTail(s string, secrets []string) string {
	for _, sec := range secrets {
		for n := len(sec) - 1; n >= 4; n-- {
			if strings.HasSuffix(s, sec[:n]) {
				return s[:len(s)-n] + "***"
			}
		}
	}
	return s
}

// token returns 128 random bits as hex, for start markers and batch
// boundaries that no step output can predict.
func token() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; keep going with what we have.
		return fmt.Sprintf("contractd%x", time.Now().UnixNano())
	}
	return "contractd" + hex.EncodeToString(b[:])
}

// capture keeps the first max bytes written and counts them all.
type capture struct {
	max   int
	buf   []byte
	total int64
}

func newCapture(max int) *capture {
	if max <= 0 {
		max = DefaultOutputCap
	}
	return &capture{max: max}
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// text returns the redacted capture, with a "[captured N of M bytes]" note
// when the stream was longer than the cap.
func (c *capture) text(secrets []string) string {
	s := Redact(string(c.buf), secrets)
	if c.total > int64(len(c.buf)) {
		s = redactTail(s, secrets)
		s += fmt.Sprintf(captureNote, len(c.buf), c.total)
	}
	return s
}

// captureNote ends a capture cut at its cap.
const captureNote = "\n[captured %d of %d bytes]"

// Shorten cuts output a transport captured to its first n bytes (whole
// characters) for a report, marked "… [L bytes]" with the length it had.
// The "[captured N of M bytes]" note of a capture cut at its cap stays at
// the end: it says how much the command printed in all.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	body, note := s, ""
	if i := strings.LastIndex(s, "\n[captured "); i >= 0 {
		var kept, total int64
		if _, err := fmt.Sscanf(s[i:], captureNote, &kept, &total); err == nil && fmt.Sprintf(captureNote, kept, total) == s[i:] {
			body, note = s[:i], s[i:]
		}
	}
	if len(body) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return body[:cut] + fmt.Sprintf("… [%d bytes]", len(body)) + note
}

// markerWriter strips the start marker line from a stream and remembers
// that it was seen: the marker proves the shell on the target began reading
// our script, which separates "the target could not run it" (unreachable)
// from "the script ran and failed" (a Result). Bytes before the marker come
// from the login (a noisy ~/.bashrc), not from the script: they are kept
// aside in noise, and passed on only when the marker never came, since they
// then explain why.
type markerWriter struct {
	marker []byte
	pre    []byte
	noise  []byte
	seen   bool
	done   bool
	out    io.Writer
}

const markerSearchLimit = 64 << 10

func newMarkerWriter(marker string, out io.Writer) *markerWriter {
	return &markerWriter{marker: []byte(marker + "\n"), out: out}
}

func (m *markerWriter) Write(p []byte) (int, error) {
	if m.done {
		return m.out.Write(p)
	}
	m.pre = append(m.pre, p...)
	if i := bytes.Index(m.pre, m.marker); i >= 0 {
		m.seen, m.done = true, true
		m.noise = m.pre[:i]
		rest := m.pre[i+len(m.marker):]
		m.pre = nil
		if len(rest) > 0 {
			return len(p), writeAll(m.out, rest)
		}
	} else if len(m.pre) > markerSearchLimit {
		m.flush()
	}
	return len(p), nil
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

// flush gives up looking and passes buffered bytes on.
func (m *markerWriter) flush() {
	if !m.done {
		m.done = true
		m.out.Write(m.pre)
		m.pre = nil
	}
}

// remoteSeconds is the whole-second deadline handed to `timeout` on the
// target: the time left until deadline, rounded up; 0 means none.
func remoteSeconds(deadline time.Time, ok bool, now time.Time) int {
	if !ok {
		return 0
	}
	s := int(math.Ceil(deadline.Sub(now).Seconds()))
	return max(s, 1)
}

// groupKill is the program that times a script on a busybox target (one
// whose `timeout` is a symlink), in place of busybox's `timeout`, which
// signals only the process it started and leaves its watcher to the pid
// namespace's init: in a container whose PID 1 does not reap (an
// application, `sleep`) every timed command would leave a zombie behind
// for good. The deadline is a `sleep` of $1 seconds that the program
// starts and waits for; the script runs, with our stdin, in a subshell
// that kills that `sleep` when the script is done (with PIPE, whose death
// the shell does not announce on stderr as it does TERM's "Terminated").
// So the deadline passed when the `sleep` ends by itself (exit 0), every
// process is reaped by its own parent, and no shell is signalled on the
// usual path (a shell can miss a signal that arrives as it sets up a
// trap). At the deadline, or on TERM from anyone, the program passes TERM
// to its whole process group, so that the script's children die too, and
// KILL to whatever ignored it once the script's subshell has ended or 2 s
// later, having reaped its own children first. The subshell traps TERM and
// waits for the script again (waitStep), so a script that kills its parent
// (`kill $PPID`) still stops the timer when it is done.
const groupKill = `__d=$1; shift; sleep "$__d" </dev/null >/dev/null 2>&1 & __t=$!; ` + liveFunc + `; ` +
	`trap "trap : TERM; kill -TERM 0; i=0; while [ \$i -lt 20 ] && __v \$p; do if sleep 0.1 2>/dev/null; then i=\$((i + 1)); else sleep 1; i=\$((i + 10)); fi; done; if ! __v \$p; then wait \$p; wait \$__t; fi; kill -KILL 0" TERM; ` +
	`exec 3<&0; ( trap : TERM; "$@" <&3 3<&- & s=$!; ` + waitStep + `; kill -PIPE $__t 2>/dev/null; exit $c ) & p=$!; exec 3<&-; wait $__t 2>/dev/null; if [ $? = 0 ]; then kill -TERM $$; fi; wait $p`

// liveFunc defines __v PID, which succeeds while the process PID runs: a
// zombie (dead, its parent busy in a trap and not reaping yet) has ended,
// though `kill -0` still finds it. Without /proc it is `kill -0`.
const liveFunc = `__v() { __y=; read -r __y 2>/dev/null </proc/$1/stat; case $__y in "") kill -0 $1 2>/dev/null ;; *") Z "*) return 1 ;; esac; }`

// waitStep waits for the step $s and leaves its exit status in c. The
// shell that runs it traps TERM (to ":") so that a step that signals its
// parent (`kill $PPID`) does not end the shell that ends the deadline's
// timer when the step is done; a wait the trap interrupts is waited again.
// The step itself starts with TERM at its default and dies of it.
const waitStep = `while wait $s; c=$?; [ $c -gt 128 ] && kill -0 $s 2>/dev/null; do :; done`

// waitStepQuoted is waitStep inside a double-quoted `sh -c` argument.
const waitStepQuoted = `while wait \$s; c=\$?; [ \$c -gt 128 ] && kill -0 \$s 2>/dev/null; do :; done`

// launcher is the constant program of the fixed argv every script runs
// under. It picks the shell (bash with --norc so an ssh login does not
// source ~/.bashrc a second time; sh when bash is absent or not asked for)
// and, when the target has `timeout`, runs it under `timeout -k` so a hung
// script cannot outlive its deadline even where our signal cannot reach it
// (sshd ignores signal requests on root logins).
// It exports the run token so that every process of the run carries it in
// its environment, where a reaper can find them (see SSH.reap), and the
// session it runs in (sessionMark), so that the reaper can tell what left
// that session on purpose (`setsid`) and spare it.
// A batch (shell name "batch") is sourced whole from stdin by bash: with
// -s bash reads a script from a pipe one byte per read(2), to leave the
// rest to the commands, and a batch's steps never read stdin.
// Arguments: $1 seconds (0 = none), $2 shell name, $3 run token.
const launcher = `t=$1 s=$2; CONTRACTD_RUN=$3; export CONTRACTD_RUN; ` + sessionMark + `; ` +
	`if [ "$s" != sh ] && command -v bash >/dev/null 2>&1; then ` +
	`if [ "$s" = batch ]; then set -- bash --norc -c '. /dev/stdin'; else set -- bash --norc -s; fi; else set -- sh -s; fi; ` +
	`if [ "$t" != 0 ] && command -v timeout >/dev/null 2>&1; then ` +
	`if [ -L /bin/timeout ] || [ -L /usr/bin/timeout ]; then exec sh -c '` + groupKill + `' sh "$t" "$@"; fi; ` +
	`exec timeout -k 2 "$t" "$@"; fi; ` +
	`exec "$@"`

// sessionMark exports CONTRACTD_SID, the id of the session the shell runs
// in as its own pid namespace numbers it (field 6 of /proc/$$/stat; the
// shell's name, field 2, holds no space). Every process the run starts
// inherits it. One that has since left that session (`setsid`: a service
// a repair started) carries a mark that is not its session's, and the
// reaper spares it; the run's own processes, plain `&` children included,
// still carry their session's and are reaped. Without /proc nothing is
// exported and the reaper kills by the token alone.
const sessionMark = `unset CONTRACTD_SID; read -r __x __x __x __x __x CONTRACTD_SID __x </proc/$$/stat 2>/dev/null && export CONTRACTD_SID`

// shellArgv is the fixed argv that reads a script from stdin: no script
// text, only the launcher, a number, a shell name and the run token, which
// is always the last element.
func shellArgv(shell string, secs int, run string) []string {
	if shell != "sh" && shell != "batch" {
		shell = "bash"
	}
	return []string{"sh", "-c", launcher, "contractd", strconv.Itoa(secs), shell, run}
}

// runTokenPrefix starts every run token; a run token names one Exec or
// ExecBatch on its target.
const runTokenPrefix = "contractd-run-"

// runToken returns the run token at the end of argv, or "".
func runToken(argv []string) string {
	if n := len(argv); n > 0 && strings.HasPrefix(argv[n-1], runTokenPrefix) {
		return argv[n-1]
	}
	return ""
}

func newRunToken() string { return runTokenPrefix + strings.TrimPrefix(token(), "contractd") }
