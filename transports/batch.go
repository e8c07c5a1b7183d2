package transports

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Batching: consecutive probe commands for one target travel as one script
// over one session (one process for local, pct and docker). The script
// writes each step to a file in a private temporary directory on the
// target and runs it with its stdout and stderr going to files, under its
// own deadline: with bash, as a forked subshell in its own process group
// watched by one watchdog subshell for the whole batch (no process started
// per step beyond the step's own); without bash, under `timeout -k`. Then
// it emits the step framed by a per-run random boundary (128 bits from
// crypto/rand) that no step can predict:
//
//	\n<B> <i> <exit>\n  stdout bytes  \n<B> <i> e <n>\n  stderr bytes  \n<B> <i> end <n>\n
//
// Steps never write to the session's stdout themselves, so nothing a step
// prints lands outside its frame, and a fake boundary in its output does
// not match the real one. The boundary delimits each section; <n> is the
// byte count the target copied for the section just ended, which the
// reader checks against what arrived. bash copies and counts with
// builtins; without bash the copy is `cat` and <n> is "-", since counting
// would cost a `wc` process per step. A step that hangs is killed by its own timeout and the
// steps after it still run; if the session dies mid-way, the steps framed
// so far are returned and the rest are marked not run.

// exitTempDir is the batch script's exit status when it found no writable
// temporary directory; the batch then falls back to one session per step.
const exitTempDir = 97

// notRun is the Stderr of a step whose frame never arrived.
const notRun = "[contractd: not run: the batch ended before this step finished]"

const batchPrologue = `umask 077
__d=$(mktemp -d 2>/dev/null) || __d=$(mktemp -d -p /dev/shm 2>/dev/null) || { __d="${TMPDIR:-/tmp}/contractd-$$"; mkdir "$__d" 2>/dev/null; } || exit 97
__p= __w=
__stop() {
	if [ -n "$__p" ]; then kill -KILL -- "-$__p" 2>/dev/null; fi
	if [ -n "$__w" ]; then kill -KILL -- "-$__w" 2>/dev/null; fi
}
trap '__stop; rm -rf "$__d"' EXIT
trap '__stop; exit 129' HUP; trap '__stop; exit 130' INT; trap '__stop; exit 141' PIPE; trap '__stop; exit 143' TERM
__cat() { cat "$1"; __len=-; }
__emit() {
	printf '\n%s %s %s\n' "$__B" "$1" "$2"
	__len=0; if [ -s "$__d/$1.o" ]; then __cat "$__d/$1.o"; fi
	printf '\n%s %s e %s\n' "$__B" "$1" "$__len"
	__len=0; if [ -s "$__d/$1.e" ]; then __cat "$__d/$1.e"; fi
	printf '\n%s %s end %s\n' "$__B" "$1" "$__len"
}
if [ -n "${BASH_VERSION:-}" ] && mkfifo "$__d/.a" "$__d/.b" 2>/dev/null; then
	set -m
	exec 7<>"$__d/.a" 8<>"$__d/.b"
	# One watchdog for the whole batch: for each timed step it reads
	# "index pgid seconds" on fd 7 and waits that long for the step's done
	# line on fd 8; if none comes it marks the step timed out, sends TERM to
	# the step's process group, and KILL 2 s later.
	(
		while read -r __n __g __s <&7; do
			if read -r -t "$__s" __x <&8; then continue; fi
			echo t >"$__d/$__n.t"
			kill -TERM -"$__g" 2>/dev/null
			if read -r -t 2 __x <&8; then continue; fi
			kill -KILL -"$__g" 2>/dev/null
			read -r __x <&8
		done
	) </dev/null >/dev/null 2>&1 &
	__w=$!
	# Copies a file byte for byte with builtins only (NULs included) and
	# counts the bytes into __len.
	__cat() {
		local LC_ALL=C __x __n=0
		while IFS= read -r -d '' __x; do printf '%s\0' "$__x"; __n=$((__n + ${#__x} + 1)); done <"$1"
		printf '%s' "$__x"
		__len=$((__n + ${#__x}))
	}
	__run() {
		if [ "$3" = sh ]; then
			sh "$__d/$1" 7<&- 8<&- <"/dev/null" >"$__d/$1.o" 2>"$__d/$1.e" &
		else
			( __f=$__d/$1; unset -v __B __d __p __w __c __len; unset -f __run __emit __stop __cat; . "$__f" ) 7<&- 8<&- <"/dev/null" >"$__d/$1.o" 2>"$__d/$1.e" &
		fi
		__p=$!
		if [ "$2" != 0 ]; then printf '%s %s %s\n' "$1" "$__p" "$2" >&7; fi
		wait "$__p" 2>/dev/null
		__c=$?
		if [ "$2" != 0 ]; then printf '\n' >&8; fi
		__p=
		if [ -s "$__d/$1.t" ]; then __c=124; : >"$__d/$1.t"; fi
		__emit "$1" "$__c"
	}
else
	__t=; if command -v timeout >/dev/null 2>&1; then __t=timeout; fi
	if [ -L /bin/timeout ] || [ -L /usr/bin/timeout ]; then __t=busybox; fi
	__b=sh; if command -v bash >/dev/null 2>&1; then __b="bash --norc"; fi
	# busybox timeout signals only its child: run the step in its own session
	# and pass the signal to that whole group.
	# The wrapper exits 124 like coreutils timeout when it was signalled.
	__g='"$@" & __p=$!; trap "kill -TERM $__p; exit 124" TERM; wait $__p'
	if command -v setsid >/dev/null 2>&1; then __g='setsid "$@" & __p=$!; trap "kill -TERM -$__p; exit 124" TERM; wait $__p'; fi
	__run() {
		__s=sh; if [ "$3" = bash ]; then __s=$__b; fi
		if [ "$__t" = timeout ] && [ "$2" != 0 ]; then
			timeout -k 2 "$2" $__s "$__d/$1" <"/dev/null" >"$__d/$1.o" 2>"$__d/$1.e"
		elif [ "$__t" = busybox ] && [ "$2" != 0 ]; then
			timeout -k 2 "$2" sh -c "$__g" sh $__s "$__d/$1" <"/dev/null" >"$__d/$1.o" 2>"$__d/$1.e"
		else
			$__s "$__d/$1" <"/dev/null" >"$__d/$1.o" 2>"$__d/$1.e"
		fi
		__emit "$1" $?
	}
fi
`

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
	dl, ok := runCtx.Deadline()
	boundary, marker := token(), token()
	script := batchScript(cmds, boundary, marker)

	pr, pw := io.Pipe()
	parser := newFrameParser(boundary, cmds, start)
	parsed := make(chan struct{})
	go func() {
		parser.consume(pr)
		close(parsed)
	}()
	stderr := newCapture(DefaultOutputCap)
	mw := newMarkerWriter(marker, stderr)
	code, err := r.run(runCtx, shellArgv("bash", remoteSeconds(dl, ok, start), newRunToken()), strings.NewReader(script), pw, mw)
	pw.Close()
	<-parsed
	mw.flush()
	logNoise(logf, r, secrets, mw)
	timedOut := runCtx.Err() != nil

	if err == nil && !mw.seen {
		msg := strings.TrimSpace(stderr.text(secrets))
		if timedOut {
			err = fmt.Errorf("%s: no shell started within the deadline: %w: %w", r, ErrUnreachable, ErrTimeout)
		} else {
			err = fmt.Errorf("%s: shell did not start (exit %d): %s: %w", r, code, msg, ErrUnreachable)
		}
		logf.printf(secrets, "%v", err)
		return nil, err
	}
	if err == nil && code == exitTempDir && parser.started == 0 {
		logf.printf(secrets, "%s: no writable temporary directory on the target; running %d steps one session each", r, len(cmds))
		return execEach(ctx, r, cmds, logf)
	}
	if err != nil && parser.started == 0 {
		logf.printf(secrets, "%v", err)
		return nil, err
	}
	results := parser.results(secrets, timedOut)
	if err != nil {
		logf.printf(secrets, "%s: batch ended after %d of %d steps: %v", r, parser.finished, len(cmds), err)
		return results, err
	}
	if parser.finished < len(cmds) {
		logf.printf(secrets, "%s: batch ended after %d of %d steps (exit %d, timed out %v): %s",
			r, parser.finished, len(cmds), code, timedOut, strings.TrimSpace(stderr.text(secrets)))
	}
	return results, nil
}

// execEach runs cmds one session each, stopping at the first unreachable.
func execEach(ctx context.Context, r runner, cmds []Command, logf logger) ([]Result, error) {
	out := make([]Result, 0, len(cmds))
	for _, c := range cmds {
		res, err := execOne(ctx, r, c, logf)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
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

// batchScript renders the framed script: start marker, shared exports,
// prologue, then per step its file and its run.
func batchScript(cmds []Command, boundary, marker string) string {
	shared, own := splitEnv(cmds)
	var b strings.Builder
	fmt.Fprintf(&b, "printf '%%s\\n' %s >&2\n", marker)
	b.WriteString(exports(shared))
	fmt.Fprintf(&b, "__B=%s\n", boundary)
	b.WriteString(batchPrologue)
	for i, c := range cmds {
		shell := "bash"
		if c.Shell == "sh" {
			shell = "sh"
		}
		secs := 0
		if c.Timeout > 0 {
			secs = max(1, int(math.Ceil(c.Timeout.Seconds())))
		}
		fmt.Fprintf(&b, "printf '%%s' %s >\"$__d/%d\"\n", quote(exports(own[i])+c.Script+"\n"), i)
		fmt.Fprintf(&b, "__run %d %d %s\n", i, secs, shell)
	}
	return b.String()
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

// frameParser reads the batch's stdout and splits it into steps.
type frameParser struct {
	boundary []byte // "\n" + boundary + " "
	cmds     []Command
	start    time.Time

	steps    []stepFrame
	cur      *capture // section being read; nil outside a frame
	curStep  int      // step of cur
	started  int      // headers seen
	finished int      // end lines seen
	last     time.Time
	acked    bool // a resident loop has read the request
	complete bool // a resident loop has sent every frame of the request
}

type stepFrame struct {
	stdout, stderr *capture
	code           int
	started, done  bool
	duration       time.Duration
	notes          []string // framing problems, appended to stderr
}

func newFrameParser(boundary string, cmds []Command, start time.Time) *frameParser {
	p := &frameParser{boundary: []byte("\n" + boundary + " "), cmds: cmds, start: start, last: start, curStep: -1}
	p.steps = make([]stepFrame, len(cmds))
	for i, c := range cmds {
		p.steps[i] = stepFrame{stdout: newCapture(c.Cap), stderr: newCapture(c.Cap), code: -1}
	}
	return p
}

// consume reads r to EOF, routing section bytes into captures. It keeps
// back a tail shorter than the boundary so a boundary split across reads
// is still found.
func (p *frameParser) consume(r io.Reader) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		pending = p.scan(pending, err != nil)
		if err != nil {
			io.Copy(io.Discard, r)
			return
		}
	}
}

// scan handles every complete boundary line in data and returns what must
// wait for more input.
func (p *frameParser) scan(data []byte, eof bool) []byte {
	for {
		i := bytes.Index(data, p.boundary)
		if i < 0 {
			keep := len(p.boundary) - 1
			if eof {
				keep = 0
			}
			if len(data) > keep {
				p.emit(data[:len(data)-keep])
				data = data[len(data)-keep:]
			}
			return data
		}
		nl := bytes.IndexByte(data[i+len(p.boundary):], '\n')
		if nl < 0 {
			p.emit(data[:i])
			if eof {
				return nil
			}
			return data[i:]
		}
		p.emit(data[:i])
		p.header(string(data[i+len(p.boundary) : i+len(p.boundary)+nl]))
		data = data[i+len(p.boundary)+nl+1:]
	}
}

// checkLength compares the target's count for the section just ended with
// the bytes that arrived, and notes a mismatch in the step's stderr.
func (p *frameParser) checkLength(field string) {
	if field == "-" {
		return
	}
	sent, err := strconv.ParseInt(field, 10, 64)
	if err != nil || sent == p.cur.total {
		return
	}
	s := &p.steps[p.curStep]
	s.notes = append(s.notes, fmt.Sprintf("[contractd: framing: the target sent %d bytes of a section, %d arrived]", sent, p.cur.total))
}

func (p *frameParser) emit(b []byte) {
	if p.cur != nil && len(b) > 0 {
		p.cur.Write(b)
	}
}

// header handles "<i> <exit>", "<i> e <n>" and "<i> end <n>", where n is
// the byte count the target sent for the section just ended ("-" when the
// target could not count it without starting a process).
func (p *frameParser) header(line string) {
	f := strings.Fields(line)
	if len(f) == 1 {
		// The resident loop's request lines: "ack" once it has read a
		// request, "done" after its last frame.
		switch f[0] {
		case "ack":
			p.acked = true
		case "done", "pong":
			p.complete = true
		}
		p.cur = nil
		return
	}
	if len(f) < 2 || len(f) > 3 {
		p.cur = nil
		return
	}
	if len(f) == 3 && p.cur != nil {
		p.checkLength(f[2])
	}
	i, err := strconv.Atoi(f[0])
	if err != nil || i < 0 || i >= len(p.steps) {
		p.cur = nil
		return
	}
	s := &p.steps[i]
	p.curStep = i
	switch f[1] {
	case "e":
		p.cur = s.stderr
	case "end":
		now := time.Now()
		s.done, s.duration, p.last = true, now.Sub(p.last), now
		p.finished++
		p.cur = nil
	default:
		code, err := strconv.Atoi(f[1])
		if err != nil {
			p.cur = nil
			return
		}
		s.started, s.code = true, code
		p.started++
		p.cur = s.stdout
	}
}

// results turns frames into Results; steps without a complete frame get
// exit code -1, a note in Stderr, and TimedOut when the batch ran out of time.
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
		for _, n := range s.notes {
			if r.Stderr != "" && !strings.HasSuffix(r.Stderr, "\n") {
				r.Stderr += "\n"
			}
			r.Stderr += n
		}
		if s.done {
			// timeout(1) exits 124 when it stopped the step, 137 when it had to KILL it.
			r.TimedOut = p.cmds[i].Timeout > 0 && (s.code == 124 || s.code == 137)
		} else {
			r.ExitCode = -1
			r.NotRun = true
			if r.Stderr != "" {
				r.Stderr += "\n"
			}
			r.Stderr += notRun
			r.TimedOut = timedOut
		}
		out[i] = r
	}
	return out
}
