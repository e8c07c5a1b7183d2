package transports

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"time"
)

// Resident sessions: with PoolOptions.Resident set, a Pool keeps one
// long-lived session per target chain (more only while one is busy, up to
// MaxPerHost per host) and sends each Exec and ExecBatch through it, so a
// daemon's later runs start no login shell at all. The session runs a small
// shell loop at the chain's innermost hop (in the container for pct and
// docker links), started once through the login shell with the same fixed
// argv as every other script, the loop itself sent over stdin with a
// secret S of the session's own. The loop reads framed requests on stdin:
//
//	R <B> <n> <T>\n              a request of n commands, B a fresh random boundary, T their run token
//	S <secs> <shell> <inline>\n  per command: its timeout, shell, and whether it may be a subshell's body,
//	exports and script lines     its script (with its exports first),
//	<B>\n                        and a line holding only B
//	P <B>\n                      a health check
//
// It reads a whole request before it runs its first command, so while a
// command runs nothing of the protocol is waiting on the loop's stdin for
// it to read (`cat /proc/$$/fd/0` finds nothing), and it answers with each
// command's frame exactly as a batch does (see batch.go; its first line,
// sent as the first command starts, says the request was read), then
// "\n<S><B> done\n" on both streams; a health check gets "\n<S><B> pong\n".
// The answer's boundary holds S, which was sent before any command ran and
// is unset in every command's shell, so a command that saw its request's B
// still cannot forge a frame.
//
// The commands of a request carry T as their run token (CONTRACTD_RUN),
// not the loop's: when a session is discarded, its loop is reaped by the
// loop's token and a request it had not finished by that request's, and
// what earlier requests left running on purpose (a repair's `setsid -f`
// service) is never touched, as with fresh sessions. Each command runs as
// a batch step does: in its own process group, under its own deadline, with
// its exports set in that process only; its script and output files in the
// loop's private directory are emptied once its frame is sent, so no secret
// stays on the target after the command.
//
// A session that does not acknowledge a request within AckTimeout (never
// longer than the first command's timeout), misses a command's deadline
// (its timeout plus the kill grace), ends (EOF, the connection closed) or
// breaks the protocol is killed, and the commands it had not finished run
// in a fresh session as without resident sessions; their Results say so in
// Note. The next use starts a new resident session.

// Defaults for ResidentOptions fields left zero.
const (
	DefaultResidentPerHost = 4
	DefaultResidentTTL     = 30 * time.Minute
	DefaultResidentAck     = 5 * time.Second
	DefaultResidentHealth  = 5 * time.Minute
	DefaultResidentRetry   = 10 * time.Minute
)

// residentSlack is what a command's frame may take beyond its timeout and
// kill grace before the session counts as stalled.
const residentSlack = 2 * time.Second

// residentCloseGrace is how long a closed loop may take to exit on its own
// before it is killed.
const residentCloseGrace = 3 * time.Second

// residentStart bounds a resident session's start (dial, login, loop set-up)
// when the first command has no timeout of its own.
const residentStart = 30 * time.Second

// exitProtocol is the loop's exit status when a request is malformed.
const exitProtocol = 98

// ResidentOptions turn on resident sessions in a Pool.
type ResidentOptions struct {
	// MaxPerHost bounds the resident sessions alive at once per pooled
	// ssh connection (every chain through it counts, the host itself and
	// its pct and docker containers): each holds one of the connection's
	// MaxSessions slots. A command that finds the bound reached runs in a
	// fresh session. The engine's own host (local, and local pct and
	// docker chains) has no such slots and no bound. 0 means
	// DefaultResidentPerHost.
	MaxPerHost int
	// IdleTTL closes a resident session unused for this long, for specs
	// that set no ResidentTTL. 0 means DefaultResidentTTL.
	IdleTTL time.Duration
	// AckTimeout is how long a request waits for the loop to confirm it
	// read it, never longer than the first command's own timeout; past it
	// the session counts as broken. 0 means DefaultResidentAck.
	AckTimeout time.Duration
	// HealthEvery checks an idle resident session this often (a ping that
	// must be answered within AckTimeout) and closes it when the check
	// fails. 0 means DefaultResidentHealth.
	HealthEvery time.Duration
	// RetryAfter is how long a chain whose loop would not start (the shell
	// ran but the loop could not set up) uses fresh sessions before a
	// resident session is tried again. 0 means DefaultResidentRetry.
	RetryAfter time.Duration
}

func (o ResidentOptions) withDefaults() ResidentOptions {
	if o.MaxPerHost <= 0 {
		o.MaxPerHost = DefaultResidentPerHost
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = DefaultResidentTTL
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultResidentAck
	}
	if o.HealthEvery <= 0 {
		o.HealthEvery = DefaultResidentHealth
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = DefaultResidentRetry
	}
	return o
}

// residentLoop serves requests after the batch prologue has set up the
// watchdog and __run. Each command's script is read into a variable and
// handed to __run as a here-document, so it never touches the disk or a
// command line. Any malformed line ends the loop with exitProtocol; EOF on
// stdin ends it cleanly. The call and the exit share the program's last
// line: bash reads a script from a pipe a byte at a time, so anything after
// the line it is running would be read as a request.
const residentLoop = `__serve() {
	printf '%s ready\n' "$__B"
	while IFS=' ' read -r __k __B __n __T; do
		case $__k in
		P) printf '\n%s%s pong\n' "$__S" "$__B"; continue ;;
		R) ;;
		*) exit 98 ;;
		esac
		case $__n in ''|0|*[!0-9]*) exit 98 ;; esac
		case $__T in contractd-run-*) ;; *) exit 98 ;; esac
		__i=0
		while [ "$__i" -lt "$__n" ]; do
			IFS=' ' read -r __k __q __h __m || exit 98
			[ "$__k" = S ] || exit 98
			__y= __l=
			while IFS= read -r __l; do
				if [ "$__l" = "$__B" ]; then break; fi
				__y="$__y$__l
"
			done
			[ "$__l" = "$__B" ] || exit 98
			eval "__q$__i=\$__q __h$__i=\$__h __m$__i=\$__m __y$__i=\$__y"
			__i=$((__i + 1))
		done
		__y=
		CONTRACTD_RUN=$__T
		__B=$__S$__B
		__i=0
		while [ "$__i" -lt "$__n" ]; do
			eval "__q=\$__q$__i __h=\$__h$__i __m=\$__m$__i __y=\$__y$__i; unset -v __q$__i __h$__i __m$__i __y$__i"
			__i=$((__i + 1))
			__z=; if [ "$__i" = "$__n" ]; then __z="
$__B done
"; fi
			__run "$((__i - 1))" "$__q" "$__h" "$__z" "$__m" 3<<__CONTRACTD_SCRIPT__
$__y
__CONTRACTD_SCRIPT__
			__y=
		done
	done
}
__serve; exit 0
`

// residentProgram is what a resident session's shell reads first: the start
// marker, the ready boundary, the session's secret, the batch prologue and
// the loop.
func residentProgram(readyB, secret, marker string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "printf '%%s\\n' %s >&2\n", marker)
	fmt.Fprintf(&b, "__B=%s __S=%s\n", readyB, secret)
	b.WriteString(prologueSent)
	b.WriteString(residentLoop)
	return b.String()
}

// residentRequest renders cmds as one request framed by boundary, its
// commands to carry the run token run, or a health check when cmds is
// empty. It reports false when a script contains the boundary, which the
// caller then draws again.
func residentRequest(boundary, run string, cmds []Command) (string, bool) {
	var b strings.Builder
	if len(cmds) == 0 {
		fmt.Fprintf(&b, "P %s\n", boundary)
		return b.String(), true
	}
	fmt.Fprintf(&b, "R %s %d %s\n", boundary, len(cmds), run)
	for _, c := range cmds {
		secs, shell := stepArgs(c)
		body := exports(c.Env) + c.Script
		if !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		if strings.Contains(body, boundary) {
			return "", false
		}
		fmt.Fprintf(&b, "S %d %s %s\n", secs, shell, inlineable(body))
		b.WriteString(body)
		b.WriteString(boundary)
		b.WriteString("\n")
	}
	return b.String(), true
}

// resident is one long-lived session running the loop.
type resident struct {
	set  *residentSet
	key  string // residentKey of the chain
	host string // residentHost of the chain
	name string // the chain, for messages

	secret string          // S: the answer's boundary starts with it
	runner runner          // the chain, to reap an unfinished request's commands
	stdin  *loopStdin      // the loop's stdin; closing it ends the loop
	life   context.Context // the session's own; ends when it is killed
	cancel context.CancelFunc
	done   chan struct{} // closed when the session has ended
	kick   chan struct{} // progress of the current request (capacity 1)

	mu        sync.Mutex
	readyLine []byte
	ready     bool
	readyc    chan struct{}
	pre       []byte // stdout before the ready line: the login's noise
	req       *frameParser
	protoErr  error
	started   *markerWriter // stderr: the start marker, then the loop's own messages
	errTail   tail
	inflight  string // the run token of a request not answered in full
	ended     bool
	exitCode  int
	exitErr   error

	// Guarded by set.mu.
	idle    bool
	dropped bool
	gen     int
	expires time.Time
	timer   *time.Timer
}

// loopStdin is a resident loop's stdin. A runner that reads it (a local
// process) gets the pipe's read end; the ssh runner instead attaches the
// session's own stdin, into which the program already written to the pipe
// is moved and every later request is written directly, so a session that
// idles for hours holds no goroutine and no buffer copying into it.
type loopStdin struct {
	r, w *os.File
	head int // bytes written to the pipe before anything could attach: the program

	mu     sync.Mutex
	direct io.WriteCloser
	closed bool
}

var _ sessionStdin = (*loopStdin)(nil)

// Read reads the pipe, for runners that copy stdin themselves.
func (in *loopStdin) Read(p []byte) (int, error) { return in.r.Read(p) }

// File is the pipe's read end, which a local process can read directly.
func (in *loopStdin) File() *os.File { return in.r }

// attach moves the program into w and sends every later write there. The
// program goes in small writes: an ssh channel keeps a buffer the size of
// its largest write for as long as it lives, and requests are small.
func (in *loopStdin) attach(w io.WriteCloser) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	buf := make([]byte, 512)
	if _, err := io.CopyBuffer(struct{ io.Writer }{w}, io.LimitReader(in.r, int64(in.head)), buf); err != nil {
		return err
	}
	in.direct = w
	if in.closed {
		w.Close()
	}
	return nil
}

// Write sends a request to the loop.
func (in *loopStdin) Write(p []byte) (int, error) {
	in.mu.Lock()
	w := io.Writer(in.w)
	if in.direct != nil {
		w = in.direct
	}
	in.mu.Unlock()
	return w.Write(p)
}

// Close sends EOF to the loop. It is idempotent.
func (in *loopStdin) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	in.closed = true
	in.w.Close()
	if in.direct != nil {
		return in.direct.Close()
	}
	return nil
}

// ended releases the pipe once the session is over.
func (in *loopStdin) ended() {
	in.Close()
	in.r.Close()
}

// tail keeps the last bytes written, for messages about a loop that died.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = append([]byte(nil), t.b[len(t.b)-2048:]...)
	}
	return len(p), nil
}

// stderrWriter passes the loop's stderr to the marker writer under r.mu;
// after the marker, errRouter takes it.
type stderrWriter struct{ r *resident }

func (w stderrWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.started.Write(p)
}

// errRouter sends the loop's stderr to the current request's frames, and
// keeps what comes between requests (the loop's own messages) in errTail.
// Callers hold r.mu.
type errRouter struct{ r *resident }

func (e errRouter) Write(p []byte) (int, error) {
	r := e.r
	if r.req != nil && !r.req.errDone {
		r.req.err.Write(p)
		r.settle()
		return len(p), nil
	}
	return r.errTail.Write(p)
}

// settle lets go of a request once both its streams are complete. Callers
// hold r.mu.
func (r *resident) settle() {
	if r.req == nil {
		return
	}
	r.req.mu.Lock()
	done := r.req.complete && r.req.errDone
	r.req.mu.Unlock()
	if done {
		r.req = nil
	}
	r.poke()
}

// residentError says why a resident session could not serve a request, and
// whether the loop had acknowledged it (its commands may then have run).
type residentError struct {
	why   string
	acked bool
}

func (e *residentError) Error() string { return e.why }

// startResident starts the loop through r and waits until it is ready,
// within limit. On failure, fallback says whether a fresh session may still
// succeed (the shell ran but the loop did not come up); otherwise the error
// is what a fresh session would have reported, wrapping ErrUnreachable.
func startResident(ctx context.Context, s *residentSet, key, host string, r runner, limit time.Duration) (*resident, bool, error) {
	unplace := func() {
		s.mu.Lock()
		s.hosts[host]--
		s.mu.Unlock()
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		unplace()
		return nil, true, fmt.Errorf("%s: resident session: %w", r, err)
	}
	readyB, secret, marker := token(), token(), token()
	program := residentProgram(readyB, secret, marker)
	in := &loopStdin{r: rd, w: wr, head: len(program)}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// res is this function's own variable, never a named result: the
	// goroutine below ends it whatever this function returns.
	res := &resident{
		set: s, key: key, host: host, life: sctx,
		name: r.String(), stdin: in, cancel: cancel, secret: secret, runner: r,
		done: make(chan struct{}), kick: make(chan struct{}, 1),
		readyLine: []byte(readyB + " ready\n"), readyc: make(chan struct{}),
	}
	res.started = newMarkerWriter(marker, errRouter{res})
	// The program fits in the pipe's buffer: nothing waits on this write.
	if _, err := io.WriteString(wr, program); err != nil {
		rd.Close()
		wr.Close()
		cancel()
		unplace()
		return nil, true, fmt.Errorf("%s: resident session: %w", r, err)
	}
	go func() {
		code, err := r.run(sctx, shellArgv("bash", 0, newRunToken()), in, res, stderrWriter{res})
		in.ended()
		res.end(code, err)
	}()

	timer := time.NewTimer(limit)
	defer timer.Stop()
	var why string
	select {
	case <-res.readyc:
		res.mu.Lock()
		noise := strings.TrimSpace(string(res.pre) + " " + string(res.started.noise))
		res.pre = nil
		res.mu.Unlock()
		if noise != "" {
			r.logger().info(nil, r, "the login printed before the resident loop started (ignored): %q", noise)
		}
		return res, false, nil
	case <-res.done:
	case <-timer.C:
		why = fmt.Sprintf("no answer within %s", limit.Round(time.Millisecond))
	case <-ctx.Done():
		why = ctx.Err().Error()
	}
	res.close(true)
	res.mu.Lock()
	defer res.mu.Unlock()
	seen := res.started.seen
	msg := strings.TrimSpace(string(res.errTail.b) + " " + string(res.started.pre) + " " + string(res.pre))
	switch {
	case why != "" && !seen:
		return nil, false, fmt.Errorf("%s: no shell started within the deadline: %w: %w", r, ErrUnreachable, ErrTimeout)
	case why != "":
		return nil, true, fmt.Errorf("%s: resident loop not ready: %s", r, why)
	case res.exitErr != nil:
		return nil, false, res.exitErr
	case !seen:
		return nil, false, fmt.Errorf("%s: shell did not start (exit %d): %s: %w", r, res.exitCode, msg, ErrUnreachable)
	}
	return nil, true, fmt.Errorf("%s: resident loop exited %d before it was ready: %s", r, res.exitCode, msg)
}

// Write takes the session's stdout: the ready line, then the frames of the
// current request. Output outside a request is a protocol error.
func (r *resident) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if !r.ready {
		r.pre = append(r.pre, p...)
		i := bytes.Index(r.pre, r.readyLine)
		if i < 0 {
			if len(r.pre) > markerSearchLimit {
				r.pre = r.pre[len(r.pre)-len(r.readyLine):]
			}
			return n, nil
		}
		p = r.pre[i+len(r.readyLine):]
		r.pre = r.pre[:i]
		r.ready = true
		close(r.readyc)
	}
	if len(p) == 0 {
		return n, nil
	}
	if r.req == nil || r.outDone() {
		if len(bytes.TrimSpace(p)) > 0 && r.protoErr == nil {
			r.protoErr = fmt.Errorf("output outside a request: %q", Printable(string(p[:min(len(p), 80)])))
			r.poke()
		}
		return n, nil
	}
	r.req.out.Write(p)
	r.settle()
	return n, nil
}

// outDone reports whether the current request's stdout is complete.
// Callers hold r.mu.
func (r *resident) outDone() bool {
	r.req.mu.Lock()
	defer r.req.mu.Unlock()
	return r.req.complete
}

func (r *resident) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// end records how the session ended.
func (r *resident) end(code int, err error) {
	r.mu.Lock()
	r.ended, r.exitCode, r.exitErr = true, code, err
	r.mu.Unlock()
	close(r.done)
	r.set.gone(r)
}

// endReason describes how the session ended. Callers hold r.mu.
func (r *resident) endReason() string {
	switch {
	case r.protoErr != nil:
		return "protocol error: " + r.protoErr.Error()
	case !r.ended:
		return "still running"
	case r.exitErr != nil:
		return "the session ended: " + r.exitErr.Error()
	case r.exitCode == exitProtocol:
		return "the loop rejected a request"
	}
	msg := strings.TrimSpace(string(r.errTail.b))
	if msg != "" {
		msg = ": " + Printable(msg)
	}
	return fmt.Sprintf("the loop ended (exit %d)%s", r.exitCode, msg)
}

// close ends the session: gracefully (EOF on the loop's stdin, then a kill
// after residentCloseGrace) or at once, killing the loop and its children.
// It returns without waiting for a kill to finish.
func (r *resident) close(force bool) {
	if !force {
		r.stdin.Close()
		select {
		case <-r.done:
			return
		case <-time.After(residentCloseGrace):
		}
	}
	r.cancel()
	r.stdin.Close()
	// The commands of a request the loop had not answered in full carry
	// their request's token, not the loop's: reap them too.
	r.mu.Lock()
	run := r.inflight
	r.inflight = ""
	r.mu.Unlock()
	if run != "" {
		go r.runner.reap(r.life, run)
	}
}

// do sends one request (a health check when cmds is empty) and waits for
// its frames. The session must not be busy. It returns the results, or
// partial results (unfinished commands marked NotRun) and a *residentError
// when the session broke, or partial results marked TimedOut and ctx's error
// when ctx ended first; the session is unusable after either error.
func (r *resident) do(ctx context.Context, cmds []Command, ack time.Duration) ([]Result, error) {
	start := time.Now()
	var secrets []string
	for _, c := range cmds {
		secrets = append(secrets, secretsOf(c.Env)...)
	}
	var boundary, req string
	run := newRunToken()
	for ok := false; !ok; {
		boundary = token()
		req, ok = residentRequest(boundary, run, cmds)
	}
	p := newFrameParser(r.secret+boundary, cmds, start)
	p.errDone = len(cmds) == 0 // a health check is answered on stdout only
	r.mu.Lock()
	if r.ended || r.protoErr != nil {
		why := r.endReason()
		r.mu.Unlock()
		return nil, &residentError{why: why}
	}
	r.req = p
	if len(cmds) > 0 {
		r.inflight = run
	}
	r.mu.Unlock()
	select {
	case <-r.kick:
	default:
	}

	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(r.stdin, req)
		wrote <- err
	}()
	timer := time.NewTimer(ack)
	defer timer.Stop()
	acked, finished := false, 0
	broken := func(why string) ([]Result, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.req = nil
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.results(secrets, false), &residentError{why: why, acked: acked}
	}
	for {
		select {
		case err := <-wrote:
			wrote = nil
			if err != nil {
				// The loop's stdin is gone because the session ended:
				// say how it ended rather than "broken pipe".
				select {
				case <-r.done:
					r.mu.Lock()
					why := r.endReason()
					r.mu.Unlock()
					return broken(why)
				case <-time.After(time.Second):
				}
				return broken("writing the request: " + err.Error())
			}
		case <-r.kick:
		case <-r.done:
		case <-timer.C:
			step := ""
			if acked && len(cmds) > 0 {
				step = fmt.Sprintf(" (command %d of %d)", min(finished+1, len(cmds)), len(cmds))
			}
			return broken(fmt.Sprintf("no answer within %s%s", time.Since(start).Round(time.Millisecond), step))
		case <-ctx.Done():
			r.mu.Lock()
			r.req = nil
			p.mu.Lock()
			res := p.results(secrets, true)
			p.mu.Unlock()
			r.mu.Unlock()
			return res, ctx.Err()
		}
		r.mu.Lock()
		p.mu.Lock()
		a, f, perr, ended := p.acked || p.started > 0, p.finished, r.protoErr, r.ended
		complete := p.complete && (p.errDone || len(cmds) == 0)
		p.mu.Unlock()
		var why string
		if perr != nil || (ended && !complete) {
			why = r.endReason()
		}
		r.mu.Unlock()
		if len(cmds) == 0 {
			a = complete
		}
		if complete && perr == nil {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.inflight = ""
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.results(secrets, false), nil
		}
		if why != "" {
			acked = acked || a
			return broken(why)
		}
		if a == acked && f == finished {
			continue
		}
		acked, finished = a, f
		timer.Stop()
		switch {
		case finished >= len(cmds):
			timer.Reset(residentSlack)
		case cmds[finished].Timeout > 0:
			timer.Reset(stepBudget(cmds[finished].Timeout))
		}
	}
}

// stepBudget is how long a command's frame may take once the one before it
// arrived: its timeout as the target rounds it, the kill grace, and slack.
func stepBudget(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(d.Seconds()))*time.Second + killAfter + residentSlack
}

// residentSet is a Pool's resident sessions.
type residentSet struct {
	opts ResidentOptions
	logf logger

	mu     sync.Mutex
	chains map[string]*residentChain
	hosts  map[string]int
	all    map[*resident]bool
	closed bool
}

// residentChain is the idle sessions of one chain, newest last.
type residentChain struct {
	idle       []*resident
	retryAfter time.Time
	// lost says why a session of the chain was lost since the last run
	// and nothing has said so yet: the session that replaces it notes it
	// on the results it serves and logs it, once, at lostLevel (INFO for
	// a loop that ended while idle, as a container's redeploy ends it;
	// WARN for one that stopped answering).
	lostWhy   string
	lostLevel slog.Level
	// bounded says the chain's last run found its host's bound reached.
	bounded bool
}

func newResidentSet(opts ResidentOptions, logf logger) *residentSet {
	return &residentSet{
		opts: opts.withDefaults(), logf: logf,
		chains: map[string]*residentChain{}, hosts: map[string]int{}, all: map[*resident]bool{},
	}
}

// lost records why a session of the chain was lost, for the session that
// replaces it to say at level; a loss already waiting to be said keeps
// its words, since it came first. Callers hold the set's mu.
func (c *residentChain) lost(why string, level slog.Level) {
	if c.lostWhy == "" {
		c.lostWhy, c.lostLevel = why, level
	}
}

func (s *residentSet) chain(key string) *residentChain {
	c := s.chains[key]
	if c == nil {
		c = &residentChain{}
		s.chains[key] = c
	}
	return c
}

// acquire returns an idle resident session of t's chain, or starts one. It
// returns nil when the chain should use a fresh session this time, with a
// note when that is worth reporting, or an error when the target cannot be
// reached at all (what a fresh session would report too).
func (s *residentSet) acquire(ctx context.Context, t *residentTransport, limit time.Duration) (*resident, string, slog.Level, error) {
	key, host := residentKey(t.spec), residentHost(t.spec)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, "", 0, nil
	}
	c := s.chain(key)
	for len(c.idle) > 0 {
		r := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		r.idle = false
		r.gen++
		if r.timer != nil {
			r.timer.Stop()
		}
		r.mu.Lock()
		ok := !r.ended && r.protoErr == nil
		why := r.endReason()
		level := slog.LevelInfo // a loop that ended: a redeploy, a restart
		if r.protoErr != nil {
			level = slog.LevelWarn
		}
		r.mu.Unlock()
		if ok {
			s.mu.Unlock()
			return r, "", 0, nil
		}
		// Broken while idle (a protocol error, a loop that ended): kill
		// what is left of it on the target, not only forget it.
		s.dropLocked(r)
		c.lost(why, level)
		go r.close(true)
	}
	if time.Now().Before(c.retryAfter) {
		s.mu.Unlock()
		return nil, "", 0, nil
	}
	if host != "local" && s.hosts[host] >= s.opts.MaxPerHost {
		// Said once while the chain stays over the bound, not every run.
		say := !c.bounded
		c.bounded = true
		s.mu.Unlock()
		if say {
			s.logf.info(nil, t, "%d resident sessions already open on this host (the bound); using fresh sessions until one closes", s.opts.MaxPerHost)
		}
		return nil, "", 0, nil
	}
	c.bounded = false
	// The place is the session's from here until its loop has ended
	// (residentSet.gone), however it ends: a loop being killed still
	// holds its sshd session.
	s.hosts[host]++
	s.mu.Unlock()

	r, fallback, err := startResident(ctx, s, key, host, t.runner, limit)
	if err != nil {
		s.mu.Lock()
		if fallback {
			c.retryAfter = time.Now().Add(s.opts.RetryAfter)
		}
		s.mu.Unlock()
		if !fallback {
			return nil, "", 0, err
		}
		note := fmt.Sprintf("resident session could not start (%v); ran in a fresh session", err)
		s.logf.warn(nil, t, "%s; fresh sessions for %s", note, s.opts.RetryAfter)
		return nil, note, 0, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go r.close(false)
		return nil, "", 0, nil
	}
	s.all[r] = true
	note, level := "", slog.LevelDebug
	if c.lostWhy != "" {
		note, level = "resident session restarted: the last one "+c.lostWhy, c.lostLevel
		c.lostWhy = ""
	}
	s.mu.Unlock()
	s.logf.debug(nil, t, "resident session started")
	return r, note, level, nil
}

// release returns r to its chain's idle sessions, to be closed once unused
// for ttl and checked every HealthEvery meanwhile.
func (s *residentSet) release(r *resident, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || r.dropped {
		go r.close(false)
		return
	}
	if ttl <= 0 {
		ttl = s.opts.IdleTTL
	}
	if exp := time.Now().Add(ttl); exp.After(r.expires) {
		r.expires = exp
	}
	c := s.chain(r.key)
	c.idle = append(c.idle, r)
	r.idle = true
	r.gen++
	s.schedule(r)
}

// schedule arms r's timer for its next health check or its expiry, whichever
// comes first. Callers hold s.mu.
func (s *residentSet) schedule(r *resident) {
	wait := min(time.Until(r.expires), s.opts.HealthEvery)
	gen := r.gen
	r.timer = time.AfterFunc(max(wait, 0), func() { s.tick(r, gen) })
}

// tick closes an idle session whose time is up, or checks it.
func (s *residentSet) tick(r *resident, gen int) {
	s.mu.Lock()
	if !r.idle || r.gen != gen || r.dropped {
		s.mu.Unlock()
		return
	}
	s.unidleLocked(r)
	if !time.Now().Before(r.expires) {
		s.dropLocked(r)
		s.mu.Unlock()
		s.logf.debug(nil, label(r.name), "resident session idle for its time to live; closed")
		r.close(false)
		return
	}
	s.mu.Unlock()
	if _, err := r.do(r.life, nil, s.opts.AckTimeout); err != nil {
		why := fmt.Sprintf("failed its health check (%v)", err)
		s.discard(r, why)
		s.mu.Lock()
		s.chain(r.key).lost(why, slog.LevelWarn)
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || r.dropped {
		go r.close(false)
		return
	}
	c := s.chain(r.key)
	c.idle = append(c.idle, r)
	r.idle = true
	r.gen++
	s.schedule(r)
}

// unidleLocked takes r out of its chain's idle list. Callers hold s.mu.
func (s *residentSet) unidleLocked(r *resident) {
	if !r.idle {
		return
	}
	r.idle = false
	r.gen++
	if r.timer != nil {
		r.timer.Stop()
	}
	c := s.chain(r.key)
	for i, x := range c.idle {
		if x == r {
			c.idle = append(c.idle[:i], c.idle[i+1:]...)
			break
		}
	}
}

// dropLocked forgets r; its place on its host is freed once its loop has
// ended (gone). It is idempotent.
// Callers hold s.mu.
func (s *residentSet) dropLocked(r *resident) {
	if r.dropped {
		return
	}
	s.unidleLocked(r)
	r.dropped = true
	delete(s.all, r)
}

// discard kills a broken session and forgets it. What replaces it says
// why, once, so this is logged for debugging only.
func (s *residentSet) discard(r *resident, why string) {
	s.mu.Lock()
	s.dropLocked(r)
	s.mu.Unlock()
	s.logf.debug(nil, label(r.name), "resident session closed: %s", why)
	r.close(true)
}

// gone frees the host place of a session whose loop has ended, and
// forgets one that ended on its own while idle; one in use is discarded by
// its user.
func (s *residentSet) gone(r *resident) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts[r.host]--
	if r.idle {
		s.dropLocked(r)
		r.mu.Lock()
		why := r.endReason()
		r.mu.Unlock()
		s.chain(r.key).lost("ended while idle ("+why+")", slog.LevelInfo)
		s.logf.debug(nil, label(r.name), "idle resident session ended: %s", why)
	}
}

// close ends every resident session, each given residentCloseGrace to exit
// on its own, and waits for them.
func (s *residentSet) close() {
	s.mu.Lock()
	s.closed = true
	rs := make([]*resident, 0, len(s.all))
	for r := range s.all {
		rs = append(rs, r)
		s.dropLocked(r)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.close(false)
			select {
			case <-r.done:
			case <-time.After(killAfter + reapAfter + 3*time.Second):
			}
		}()
	}
	wg.Wait()
}

// count returns the resident sessions alive per host, for tests and metrics.
func (s *residentSet) count() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for h, n := range s.hosts {
		if n > 0 {
			out[h] = n
		}
	}
	return out
}

// residentKey identifies a chain: every link, its kind and how it is reached.
func residentKey(s *Spec) string {
	switch s.Kind {
	case "ssh":
		return "ssh " + chainKey(s)
	case "local":
		return "local"
	}
	k := s.label()
	if s.Sudo {
		k = "sudo " + k
	}
	if s.Via != nil {
		k += " via " + residentKey(s.Via)
	}
	return k
}

// residentHost is the host a chain's resident session occupies: its
// innermost ssh connection, or this host.
func residentHost(s *Spec) string {
	for l := s; l != nil; l = l.Via {
		if l.Kind == "ssh" {
			return chainKey(l)
		}
	}
	return "local"
}

// residentTransport sends a chain's commands through its resident session,
// and through a fresh session when there is none to use.
type residentTransport struct {
	Transport
	runner runner
	spec   *Spec
	set    *residentSet
}

var _ Transport = (*residentTransport)(nil)

// Exec runs cmd through the chain's resident session. When the session is
// broken before it acknowledged cmd, cmd runs in a fresh session and
// Result.Note says why; once acknowledged, a command is never run twice,
// so a session lost mid-command is an error wrapping ErrUnreachable, as a
// fresh session lost mid-command is.
func (t *residentTransport) Exec(ctx context.Context, cmd Command) (Result, error) {
	out, err := t.run(ctx, []Command{cmd}, true)
	if len(out) == 0 {
		return Result{}, err
	}
	return out[0], err
}

// ExecBatch runs cmds through the chain's resident session. Commands that a
// broken session had not finished run again in a fresh session, with
// Result.Note saying why. Errors are those of the transport's own
// ExecBatch.
func (t *residentTransport) ExecBatch(ctx context.Context, cmds []Command) ([]Result, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	return t.run(ctx, cmds, false)
}

func (t *residentTransport) run(ctx context.Context, cmds []Command, single bool) ([]Result, error) {
	if p, ok := t.Transport.(interface{ prepare(Command) Command }); ok {
		cs := make([]Command, len(cmds))
		for i, c := range cmds {
			cs[i] = p.prepare(c)
		}
		cmds = cs
	}
	limit, ack := residentStart, t.set.opts.AckTimeout
	if d := cmds[0].Timeout; d > 0 {
		limit, ack = d, min(ack, d)
	}
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl))
	}
	r, note, level, err := t.set.acquire(ctx, t, limit)
	if err != nil {
		t.runner.logger().failed(nil, t, err)
		if single {
			return []Result{{ExitCode: -1}}, err
		}
		return nil, err
	}
	if r == nil {
		return t.fresh(ctx, cmds, single, note)
	}
	out, err := r.do(ctx, cmds, ack)
	if err == nil {
		t.set.release(r, t.spec.ResidentTTL)
		if note != "" {
			t.runner.logger().event(level, nil, t, "%s", note)
			for i := range out {
				out[i].Note = note
			}
		}
		return out, nil
	}
	var broken *residentError
	if !errors.As(err, &broken) {
		// The caller's deadline ended mid-request: the loop is busy with a
		// command nobody waits for any more.
		why := "was cancelled mid-request: " + err.Error()
		t.set.discard(r, why)
		t.set.mu.Lock()
		t.set.chain(r.key).lost(why, slog.LevelInfo)
		t.set.mu.Unlock()
		if single {
			out[0].TimedOut = true
		}
		return out, nil
	}
	t.set.discard(r, broken.why)
	note = fmt.Sprintf("resident session broken (%s); ran in a fresh session", broken.why)
	switch {
	case !broken.acked:
		t.runner.logger().warn(nil, t, "%s", note)
		return t.fresh(ctx, cmds, single, note)
	case single:
		err := fmt.Errorf("%s: resident session lost during the command (%s): %w", t, broken.why, ErrUnreachable)
		t.runner.logger().failed(nil, t, err)
		return out, err
	}
	t.runner.logger().warn(nil, t, "%s", note)
	var again []int
	for i, res := range out {
		if res.NotRun {
			again = append(again, i)
		}
	}
	rest := make([]Command, len(again))
	for k, i := range again {
		rest[k] = cmds[i]
	}
	redo, err := t.fresh(ctx, rest, len(rest) == 1, note)
	for k, res := range redo {
		out[again[k]] = res
	}
	return out, err
}

// fresh runs cmds without resident sessions, as the transport always did,
// and puts note on every result; the caller has logged it.
func (t *residentTransport) fresh(ctx context.Context, cmds []Command, single bool, note string) ([]Result, error) {
	logf := t.runner.logger()
	var out []Result
	var err error
	if single {
		var res Result
		res, err = execOne(ctx, t.runner, cmds[0], logf)
		out = []Result{res}
	} else {
		out, err = execBatch(ctx, t.runner, cmds, logf)
	}
	for i := range out {
		out[i].Note = note
	}
	return out, err
}
