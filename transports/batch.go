package transports

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Batching: consecutive probe commands for one target travel as one script
// over one session (one process for local, pct and docker). Each step's
// script is a here-document of the batch script, read by the step from
// fd 3, so it never touches the target's disk or a command line. The step
// runs with stdin from /dev/null and its stdout and stderr going straight
// into the session's, under its own deadline: with bash, as a forked
// subshell in its own process group watched by one watchdog coprocess for
// the whole batch (no process started per step beyond the step's own);
// without bash, under `timeout -k`. Between the steps the batch writes
// boundary lines made of a per-run random boundary (128 bits from
// crypto/rand) that no step can predict, on stdout:
//
//	\n<B> 0 o\n  step 0's stdout  \n<B> 0 end <exit>\n  step 1's stdout  \n<B> 1 end <exit>\n …
//
// and on stderr:
//
//	\n<B> 0 e\n  step 0's stderr  \n<B> 0 end\n  step 1's stderr  \n<B> 1 end\n …
//
// One line per stream per step: every write is a packet through sshd.
//
// The step's own shell has B unset, so a fake boundary in its output does
// not match the real one. Once a step has exited, whatever it left running
// in its process group is killed, so nothing it started writes into a later
// step's frame or holds the session open. A step that hangs is killed by its
// own timeout and the steps after it still run; if the session dies mid-way,
// the steps framed so far are returned and the rest are marked not run.

// notRun is the Stderr of a step whose frame never arrived.
const notRun = "[contractd: not run: the batch ended before this step finished]"

const batchPrologue = `__p= __w=
__stop() {
	# Each is waited for once killed: one left unreaped would pass to the
	# target's init, and in a container whose PID 1 does not reap it
	# stays a zombie for good.
	if [ -n "$__p" ]; then kill -KILL -- "-$__p" 2>/dev/null; wait "$__p" 2>/dev/null; __p=; fi
	if [ -n "$__w" ]; then kill -KILL -- "-$__w" 2>/dev/null; wait "$__w" 2>/dev/null; __w=; fi
}
trap '__stop' EXIT
trap '__stop; exit 129' HUP; trap '__stop; exit 130' INT; trap '__stop; exit 141' PIPE; trap '__stop; exit 143' TERM
if [ -n "${BASH_VERSION:-}" ] && [ "${BASH_VERSINFO[0]:-0}" -ge 4 ]; then
	set -m
	# One watchdog for the whole batch: for each timed step it reads
	# "pgid seconds" and waits that long for the step's done line; if none
	# comes it writes "t pgid" (before it signals, so the line is there by
	# the time the step has died), sends TERM to the step's process group,
	# and KILL 2 s later. A step in time costs no answer, and nobody waits
	# on the watchdog. Inside eval: a POSIX sh parses this whole branch and
	# knows no coproc.
	eval 'coproc __W {
		trap - EXIT HUP INT PIPE TERM
		while read -r __g __s; do
			if read -r -t "$__s" __x; then continue; fi
			echo "t $__g"
			kill -TERM -"$__g" 2>/dev/null
			if read -r -t 2 __x; then continue; fi
			kill -KILL -"$__g" 2>/dev/null
			read -r __x
		done
	} 2>/dev/null'
	__w=$__W_PID
	__run() {
		if [ "$1" = 0 ]; then printf '\n%s 0 o\n' "$__B"; printf '\n%s 0 e\n' "$__B" >&2; fi
		__p=
		if [ "$3" = sh ]; then
			sh /dev/fd/3 </dev/null {__W[0]}<&- {__W[1]}<&- &
			__p=$!
		elif [ "$5" = 1 ]; then
			# A script without ")" cannot end the subshell early: it becomes
			# the subshell's body, and bash runs its last command in the
			# subshell's own process, one fork per step instead of two.
			IFS= read -r -d '' __s <&3
			if eval "( exec {__W[0]}<&- {__W[1]}<&-; unset -v __B __S __T __W __W_PID __p __w __c __v __k __n __i __j __t __q __h __m __y __l __z __s ${!__y*} ${!__q*} ${!__h*} ${!__m*}; unset -f __run __stop __serve
$__s
) </dev/null &"; then __p=$!; else __c=$?; fi
			__s=
		else
			( exec {__W[0]}<&- {__W[1]}<&-; unset -v __B __S __T __W __W_PID __p __w __c __v __k __n __i __j __t __q __h __m __y __l __z __s ${!__y*} ${!__q*} ${!__h*} ${!__m*}; unset -f __run __stop __serve; . /dev/fd/3 ) </dev/null &
			__p=$!
		fi
		if [ -n "$__p" ]; then
			if [ "$2" != 0 ]; then printf '%s %s\n' "$__p" "$2" >&"${__W[1]}"; fi
			wait "$__p" 2>/dev/null
			__c=$?
			__t=-
			if [ "$2" != 0 ]; then
				printf '\n' >&"${__W[1]}"
				# Verdicts waiting: this step's marks it timed out; one left
				# for an earlier step (it ended just at its deadline) is dropped.
				while read -r -t 0 <&"${__W[0]}" && read -r __v __x <&"${__W[0]}"; do
					if [ "$__x" = "$__p" ]; then __c=124 __t=t; fi
				done
			fi
			# A child that is detaching (setsid -f forks, then leaves the
			# group) gets a moment to leave before the group is killed.
			if kill -0 -- "-$__p" 2>/dev/null; then sleep 0.1; kill -KILL -- "-$__p" 2>/dev/null; fi
		fi
		__p=
		# The fourth field says whether the step's own deadline stopped it.
		printf '\n%s %s end\n%s' "$__B" "$1" "$4" >&2; printf '\n%s %s end %s %s\n%s' "$__B" "$1" "$__c" "${__t:--}" "$4"
	}
else
	__t=; if command -v timeout >/dev/null 2>&1; then __t=timeout; fi
	if [ -L /bin/timeout ] || [ -L /usr/bin/timeout ]; then __t=busybox; fi
	__b=sh; if command -v bash >/dev/null 2>&1; then __b="bash --norc"; fi
	# busybox timeout signals only its child, its -k KILL only that child
	# too, and it leaves its watcher to the container's init (a zombie
	# where PID 1 does not reap). A timed step instead runs in a wrapper
	# whose deadline is a sleep of $2 seconds it waits for, as groupKill's
	# is (the step kills that sleep when it is done, and no signal is sent
	# when all goes well), with the step in its own session: at the
	# deadline the wrapper passes TERM to the step's whole group, then KILL
	# 2 s later to whatever ignored it, and exits 124 like coreutils
	# timeout; the group is also killed once the step has exited. The
	# step's new session gets its own mark (sessionMark, passed as $1), so
	# that a reaper still finds the step and spares only what the step
	# itself detached. Without setsid the step runs in a subshell that
	# passes the wrapper's deadline (ALRM) on to it. Either way the shell
	# that starts the step traps TERM and waits for the step again, so a
	# step that kills its parent (kill $PPID) ends when it ends, not at
	# its deadline; and the grace after TERM ends as soon as that shell
	# has ended (__v: a zombie its busy parent has not reaped yet counts
	# as ended, though kill -0 still finds it).
	__e='` + sessionMark + `'
	__g='__d=$2; shift 2; sleep "$__d" </dev/null >/dev/null 2>&1 & __t=$!; ( ` + liveFunc + `; trap : TERM; trap "kill -TERM \$s 2>/dev/null; __i=0; while [ \$__i -lt 20 ] && __v \$s; do if sleep 0.1 2>/dev/null; then __i=\$((__i + 1)); else sleep 1; __i=\$((__i + 10)); fi; done; kill -KILL \$s 2>/dev/null; wait \$s; exit 124" ALRM; "$@" & s=$!; ` + waitStep + `; kill -PIPE $__t 2>/dev/null; exit $c ) & __p=$!; trap "kill $__t 2>/dev/null; wait $__t 2>/dev/null; kill -ALRM $__p 2>/dev/null; wait $__p; exit 124" TERM; wait $__t 2>/dev/null; if [ $? = 0 ]; then kill -ALRM $__p 2>/dev/null; wait $__p; exit 124; fi; wait $__p'
	if command -v setsid >/dev/null 2>&1; then __g='__e=$1 __d=$2; shift 2; sleep "$__d" </dev/null >/dev/null 2>&1 & __t=$!; setsid sh -c "$__e; trap : TERM; \"\$@\" & s=\$!; ` + waitStepQuoted + `; kill -PIPE $__t 2>/dev/null; exit \$c" sh "$@" & __p=$!; ` + liveFunc + `; __k() { kill -TERM -$__p 2>/dev/null; __i=0; while [ $__i -lt 20 ] && __v $__p; do if sleep 0.1 2>/dev/null; then __i=$((__i + 1)); else sleep 1; __i=$((__i + 10)); fi; done; kill -KILL -$__p 2>/dev/null; wait $__p; exit 124; }; trap "kill $__t 2>/dev/null; wait $__t 2>/dev/null; __k" TERM; wait $__t 2>/dev/null; if [ $? = 0 ]; then __k; fi; wait $__p; __c=$?; if kill -0 -$__p 2>/dev/null; then sleep 0.1 2>/dev/null || sleep 1; kill -KILL -$__p 2>/dev/null; fi; exit $__c'; fi
	__run() {
		if [ "$1" = 0 ]; then printf '\n%s 0 o\n' "$__B"; printf '\n%s 0 e\n' "$__B" >&2; fi
		__s=sh; if [ "$3" = bash ]; then __s=$__b; fi
		if [ "$__t" = timeout ] && [ "$2" != 0 ]; then
			timeout -k 2 "$2" $__s /dev/fd/3 </dev/null
		elif [ "$__t" = busybox ] && [ "$2" != 0 ]; then
			sh -c "$__g" sh "$__e" "$2" $__s /dev/fd/3 </dev/null
		else
			$__s /dev/fd/3 </dev/null
		fi
		__c=$?
		printf '\n%s %s end\n%s' "$__B" "$1" "$4" >&2; printf '\n%s %s end %s\n%s' "$__B" "$1" "$__c" "$4"
	}
fi
`

// prologueSent is batchPrologue without its comment lines and indentation:
// they are for people reading this file, and every byte is sent and parsed
// on every batch.
var prologueSent = func() string {
	var b strings.Builder
	for _, line := range strings.Split(batchPrologue, "\n") {
		t := strings.TrimLeft(line, "\t")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(t)
		b.WriteString("\n")
	}
	return b.String()
}()

// execBatch is the run loop every transport's ExecBatch shares.
func execBatch(ctx context.Context, r runner, cmds []Command, logf logger) ([]Result, error) {
	switch len(cmds) {
	case 0:
		return nil, nil
	case 1:
		res, err := execOne(ctx, r, cmds[0], logf)
		if err != nil {
			return nil, err
		}
		return []Result{res}, nil
	}
	start := time.Now()
	var secrets []string
	for _, c := range cmds {
		secrets = append(secrets, secretsOf(c.Env)...)
	}
	runCtx, cancel := batchDeadline(ctx, cmds)
	defer cancel()
	marker := token()
	var boundary, script string
	for ok := false; !ok; {
		boundary = token()
		script, ok = batchScript(cmds, boundary, marker)
	}

	parser := newFrameParser(boundary, cmds, start)
	mw := newMarkerWriter(marker, &parser.err)
	// No `timeout` around the whole batch: every step has its own deadline
	// on the target, and when the batch's deadline passes here the
	// session is stopped and the reaper kills what the run token marks.
	// That saves a program or two per batch, on small targets the most.
	code, err := r.run(runCtx, shellArgv("batch", 0, newRunToken()), strings.NewReader(script), &parser.out, mw)
	mw.flush()
	parser.out.Close()
	parser.err.Close()
	logNoise(logf, r, secrets, mw)
	timedOut := runCtx.Err() != nil
	outside := func() string {
		parser.mu.Lock()
		defer parser.mu.Unlock()
		return strings.TrimSpace(Redact(string(parser.err.outside.b), secrets))
	}

	if err == nil && !mw.seen {
		if timedOut {
			err = fmt.Errorf("%s: no shell started within the deadline: %w: %w", r, ErrUnreachable, ErrTimeout)
		} else {
			err = fmt.Errorf("%s: shell did not start (exit %d): %s: %w", r, code, outside(), ErrUnreachable)
		}
		logf.failed(secrets, r, err)
		return nil, err
	}
	parser.mu.Lock()
	started, finished := parser.started, parser.finished
	results := parser.results(secrets, timedOut)
	parser.mu.Unlock()
	if err != nil && started == 0 {
		logf.failed(secrets, r, err)
		return nil, err
	}
	if err != nil {
		logf.warn(secrets, r, "batch ended after %d of %d steps: %v", finished, len(cmds), err)
		return results, err
	}
	if finished < len(cmds) {
		logf.warn(secrets, r, "batch ended after %d of %d steps (exit %d, timed out %v): %s",
			finished, len(cmds), code, timedOut, outside())
	}
	return results, nil
}

// batchDeadline bounds the whole batch: the caller's deadline, and when
// every step has a timeout, their sum plus each step's kill grace.
func batchDeadline(ctx context.Context, cmds []Command) (context.Context, context.CancelFunc) {
	var total time.Duration
	for _, c := range cmds {
		if c.Timeout <= 0 {
			return context.WithCancel(ctx)
		}
		total += c.Timeout.Truncate(time.Second) + time.Second + killAfter + time.Second
	}
	return context.WithTimeout(ctx, total+5*time.Second)
}

// stepArgs are a command's arguments to __run: its deadline in whole
// seconds (0 for none) and its shell.
func stepArgs(c Command) (int, string) {
	shell := "bash"
	if c.Shell == "sh" {
		shell = "sh"
	}
	secs := 0
	if c.Timeout > 0 {
		secs = max(1, int(math.Ceil(c.Timeout.Seconds())))
	}
	return secs, shell
}

// inlineable reports whether a step's body (its exports and script) may be
// the body of a subshell in the batch's own text: it must not be able to
// close that subshell (no ")"), swallow its end (no here-document, no line
// continuation at the end). Others are sourced from fd 3, which costs bash
// a second fork per step.
func inlineable(body string) string {
	t := strings.TrimRight(body, " \t\n")
	if strings.Contains(body, ")") || strings.Contains(body, "<<") || strings.HasSuffix(t, "\\") {
		return "0"
	}
	return "1"
}

// batchScript renders the framed script: start marker, shared exports,
// prologue, then per step its run with its script as a here-document
// delimited by the boundary. It reports false when a script contains the
// boundary, which the caller then draws again.
func batchScript(cmds []Command, boundary, marker string) (string, bool) {
	shared, own := splitEnv(cmds)
	var b strings.Builder
	fmt.Fprintf(&b, "printf '%%s\\n' %s >&2\n", marker)
	b.WriteString(exports(shared))
	fmt.Fprintf(&b, "__B=%s\n", boundary)
	b.WriteString(prologueSent)
	for i, c := range cmds {
		secs, shell := stepArgs(c)
		body := exports(own[i]) + c.Script
		if !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		if strings.Contains(body, boundary) {
			return "", false
		}
		fmt.Fprintf(&b, "__run %d %d %s '' %s 3<<'%s'\n%s%s\n", i, secs, shell, inlineable(body), boundary, body, boundary)
	}
	return b.String(), true
}

// splitEnv exports a variable once at the top when every step that sets it
// agrees on the value, and per step otherwise.
func splitEnv(cmds []Command) (map[string]string, []map[string]string) {
	shared := map[string]string{}
	conflict := map[string]bool{}
	for _, c := range cmds {
		for k, v := range c.Env {
			if old, ok := shared[k]; ok && old != v {
				conflict[k] = true
			}
			shared[k] = v
		}
	}
	own := make([]map[string]string, len(cmds))
	for i, c := range cmds {
		for k, v := range c.Env {
			if conflict[k] {
				if own[i] == nil {
					own[i] = map[string]string{}
				}
				own[i][k] = v
			}
		}
	}
	for k := range conflict {
		delete(shared, k)
	}
	return shared, own
}

// frameParser splits a batch's two streams into steps. Its streams are
// written concurrently (a session copies stdout and stderr on their own);
// mu guards everything.
type frameParser struct {
	mu       sync.Mutex
	boundary []byte // "\n" + boundary + " "
	cmds     []Command
	start    time.Time

	steps    []stepFrame
	started  int // stdout headers seen
	finished int // stdout end lines seen
	last     time.Time
	acked    bool // a resident loop has read the request
	complete bool // a resident loop has sent every stdout frame of the request
	errDone  bool // ... and every stderr frame

	out, err frameStream
}

type stepFrame struct {
	stdout, stderr *capture
	code           int
	started, done  bool
	duration       time.Duration
	// timedOut is the target's word that the step's own deadline stopped
	// it; known says the target said (a shell without bash does not).
	timedOut, known bool
}

// frameStream is one of the two streams: its section being read and what
// it kept back in case a boundary is split across writes.
type frameStream struct {
	p       *frameParser
	stderr  bool
	cur     *capture // section being read; nil outside a frame
	pending []byte
	outside tail // bytes outside any frame: the shell's own messages
}

func newFrameParser(boundary string, cmds []Command, start time.Time) *frameParser {
	p := &frameParser{boundary: []byte("\n" + boundary + " "), cmds: cmds, start: start, last: start}
	p.steps = make([]stepFrame, len(cmds))
	for i, c := range cmds {
		p.steps[i] = stepFrame{stdout: newCapture(c.Cap), stderr: newCapture(c.Cap), code: -1}
	}
	p.out = frameStream{p: p}
	p.err = frameStream{p: p, stderr: true}
	return p
}

// Write takes the next bytes of the stream. It never fails.
func (s *frameStream) Write(b []byte) (int, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.pending = s.scan(append(s.pending, b...), false)
	return len(b), nil
}

// Close passes on what was kept back: the stream has ended.
func (s *frameStream) Close() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.pending = s.scan(s.pending, true)
	return nil
}

// scan handles every complete boundary line in data and returns what must
// wait for more input. It keeps back a tail shorter than the boundary so a
// boundary split across writes is still found. Callers hold p.mu.
func (s *frameStream) scan(data []byte, eof bool) []byte {
	bnd := s.p.boundary
	for {
		i := bytes.Index(data, bnd)
		if i < 0 {
			keep := len(bnd) - 1
			if eof {
				keep = 0
			}
			if len(data) > keep {
				s.emit(data[:len(data)-keep])
				data = data[len(data)-keep:]
			}
			return data
		}
		nl := bytes.IndexByte(data[i+len(bnd):], '\n')
		if nl < 0 {
			s.emit(data[:i])
			if eof {
				return nil
			}
			return data[i:]
		}
		s.emit(data[:i])
		s.header(string(data[i+len(bnd) : i+len(bnd)+nl]))
		data = data[i+len(bnd)+nl+1:]
	}
}

func (s *frameStream) emit(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.cur != nil {
		s.cur.Write(b)
	} else {
		s.outside.Write(b)
	}
}

// header handles a boundary line: on stdout "<i> o" (step i's output
// follows) and "<i> end <exit>"; on stderr "<i> e" and "<i> end"; and a
// resident loop's "ack", "done" and "pong". Callers hold p.mu.
func (s *frameStream) header(line string) {
	p := s.p
	s.cur = nil
	f := strings.Fields(line)
	if len(f) == 1 {
		switch {
		case f[0] == "ack" && !s.stderr:
			p.acked = true
		case f[0] == "done" && s.stderr:
			p.errDone = true
		case (f[0] == "done" || f[0] == "pong") && !s.stderr:
			p.complete = true
		}
		return
	}
	if len(f) < 2 {
		return
	}
	i, err := strconv.Atoi(f[0])
	if err != nil || i < 0 || i >= len(p.steps) {
		return
	}
	st := &p.steps[i]
	switch {
	case s.stderr && f[1] == "e" && len(f) == 2:
		s.cur = st.stderr
	case s.stderr && f[1] == "end" && len(f) == 2:
		// Step i's stderr ends and the next step's begins.
		if i+1 < len(p.steps) {
			s.cur = p.steps[i+1].stderr
		}
	case !s.stderr && f[1] == "o" && len(f) == 2:
		p.open(i)
		s.cur = st.stdout
	case !s.stderr && f[1] == "end" && (len(f) == 3 || len(f) == 4):
		code, err := strconv.Atoi(f[2])
		if err != nil {
			return
		}
		if len(f) == 4 {
			st.known, st.timedOut = true, f[3] == "t"
		}
		now := time.Now()
		st.code, st.done, st.duration, p.last = code, true, now.Sub(p.last), now
		p.finished++
		// Step i's stdout ends and the next step's begins.
		if i+1 < len(p.steps) {
			p.open(i + 1)
			s.cur = p.steps[i+1].stdout
		}
	}
}

// open marks step i started. Callers hold p.mu.
func (p *frameParser) open(i int) {
	if !p.steps[i].started {
		p.steps[i].started = true
		p.started++
	}
}

// results turns frames into Results; steps without a complete frame get
// exit code -1, a note in Stderr, and TimedOut when the batch ran out of
// time. Callers hold p.mu.
func (p *frameParser) results(secrets []string, timedOut bool) []Result {
	out := make([]Result, len(p.steps))
	for i, s := range p.steps {
		r := Result{
			Stdout:      s.stdout.text(secrets),
			Stderr:      s.stderr.text(secrets),
			StdoutBytes: s.stdout.total,
			StderrBytes: s.stderr.total,
			ExitCode:    s.code,
			Duration:    s.duration,
		}
		switch {
		case s.done && s.known:
			r.TimedOut = s.timedOut
		case s.done:
			// Without bash the step ran under timeout(1), which exits 124
			// when it stopped the step and 137 when it had to KILL it; a
			// step that exits so by itself, or is killed by someone else,
			// before its deadline did not time out.
			t := p.cmds[i].Timeout
			r.TimedOut = t > 0 && (s.code == 124 || s.code == 137) && s.duration >= t.Truncate(time.Second)-time.Second/2
		default:
			r.ExitCode = -1
			r.NotRun = true
			if r.Stderr != "" {
				r.Stderr += "\n"
			}
			r.Stderr += notRun
			// Only the step that was running when the batch's time ran
			// out timed out; those after it never started.
			r.TimedOut = timedOut && s.started
		}
		out[i] = r
	}
	return out
}
