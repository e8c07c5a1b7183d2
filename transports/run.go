package transports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// runner starts one fixed argv on a target with a script on stdin. Every
// transport is a runner; pct and docker prefix the argv and hand it to
// their parent's runner, which is how chains compose.
type runner interface {
	// run runs argv with stdin and copies its output to stdout and stderr
	// until it exits or ctx ends. When ctx ends it stops the process and
	// what it started, and returns once that is done, with exit code -1
	// if no status arrived. It returns an error wrapping ErrUnreachable
	// when the target could not be reached or the argv not started.
	run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
	// reap kills every process on the target whose environment carries
	// the run token tok (TERM, then KILL a second later), containers'
	// processes included; it is for commands that outlived their session.
	reap(ctx context.Context, tok string)
	// logger is where the chain's events go (PoolOptions.Logf).
	logger() logger
	String() string
}

// logger is where a pool's events go: PoolOptions.Log, else
// PoolOptions.Logf as "TARGET: text" lines, else nowhere. The zero logger
// discards.
type logger struct {
	slog *slog.Logger
	logf func(format string, args ...any)
}

// event logs one event about target at level: the text is format and args
// with secrets redacted and made Printable; the target is a field of its
// own ("target") for slog, and the line's prefix for a Logf.
func (l logger) event(level slog.Level, secrets []string, target fmt.Stringer, format string, args ...any) {
	if l.slog == nil && l.logf == nil {
		return
	}
	msg := Printable(Redact(fmt.Sprintf(format, args...), secrets))
	name := Printable(target.String())
	if l.slog != nil {
		l.record(level, msg, "target", name)
		return
	}
	l.logf("%s: %s", name, msg)
}

// record writes one record at level. A pool's events belong to no one
// command (a dial, a keepalive, a resident session's life, a failure the
// pool reports after its caller has its result), so they carry no context:
// slog's leveled methods.
func (l logger) record(level slog.Level, msg string, args ...any) {
	switch {
	case level >= slog.LevelError:
		l.slog.Error(msg, args...)
	case level >= slog.LevelWarn:
		l.slog.Warn(msg, args...)
	case level >= slog.LevelInfo:
		l.slog.Info(msg, args...)
	default:
		l.slog.Debug(msg, args...)
	}
}

// label names a target for logger's methods.
type label string

func (l label) String() string { return string(l) }

// failed logs err, which names its target itself, as a warning about
// target.
func (l logger) failed(secrets []string, target fmt.Stringer, err error) {
	if l.slog == nil && l.logf == nil {
		return
	}
	msg := Printable(Redact(err.Error(), secrets))
	if l.slog != nil {
		l.record(slog.LevelWarn, msg, "target", Printable(target.String()))
		return
	}
	l.logf("%s", msg)
}

func (l logger) debug(secrets []string, target fmt.Stringer, format string, args ...any) {
	l.event(slog.LevelDebug, secrets, target, format, args...)
}

func (l logger) info(secrets []string, target fmt.Stringer, format string, args ...any) {
	l.event(slog.LevelInfo, secrets, target, format, args...)
}

func (l logger) warn(secrets []string, target fmt.Stringer, format string, args ...any) {
	l.event(slog.LevelWarn, secrets, target, format, args...)
}

// ExitTimedOut is the exit status of a step killed by its deadline, as
// timeout(1) reports it, on every transport.
const ExitTimedOut = 124

// execOne is the run loop every transport's Exec shares: it frames the
// script (start marker, exports, the script), runs it under the command's
// deadline, captures and redacts the output and tells an unreachable
// target from a script that ran.
func execOne(ctx context.Context, r runner, cmd Command, logf logger) (Result, error) {
	start := time.Now()
	runCtx := ctx
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	dl, ok := runCtx.Deadline()
	secs := remoteSeconds(dl, ok, start)
	secrets := secretsOf(cmd.Env)
	marker := token()

	var script strings.Builder
	fmt.Fprintf(&script, "printf '%%s\\n' %s; printf '%%s\\n' %s >&2\n", marker, marker)
	script.WriteString(exports(cmd.Env))
	script.WriteString(cmd.Script)
	script.WriteString("\n")

	stdout, stderr := newCapture(cmd.Cap), newCapture(cmd.Cap)
	mo, mw := newMarkerWriter(marker, stdout), newMarkerWriter(marker, stderr)
	code, err := r.run(runCtx, shellArgv(cmd.Shell, secs, newRunToken()), strings.NewReader(script.String()), mo, mw)
	mo.flush()
	mw.flush()
	logNoise(logf, r, secrets, mo, mw)
	res := Result{
		Stdout:      stdout.text(secrets),
		Stderr:      stderr.text(secrets),
		StdoutBytes: stdout.total,
		StderrBytes: stderr.total,
		ExitCode:    code,
		Duration:    time.Since(start),
		TimedOut:    runCtx.Err() != nil,
	}
	if errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		// Killed by its deadline, whichever side noticed first: the
		// remote shell's own timer exits 124, but a client killed at
		// the same moment (docker exec exits 0 on SIGTERM) must not
		// turn that into another status.
		res.ExitCode = ExitTimedOut
	}
	if err != nil {
		logf.failed(secrets, r, err)
		return res, err
	}
	if !mw.seen {
		msg := strings.TrimSpace(res.Stderr + " " + res.Stdout)
		if res.TimedOut {
			err = fmt.Errorf("%s: no shell started within the deadline: %w: %w", r, ErrUnreachable, ErrTimeout)
		} else {
			err = fmt.Errorf("%s: shell did not start (exit %d): %s: %w", r, code, msg, ErrUnreachable)
		}
		logf.failed(secrets, r, err)
		return res, err
	}
	if res.TimedOut {
		logf.info(secrets, r, "command timed out after %s and was killed", res.Duration.Round(time.Millisecond))
	}
	return res, nil
}

// logNoise logs what the login printed before our script started, once per
// command, so a noisy ~/.bashrc is visible without polluting Results.
func logNoise(logf logger, r runner, secrets []string, ms ...*markerWriter) {
	for _, m := range ms {
		if n := strings.TrimSpace(string(m.noise)); n != "" {
			logf.info(secrets, r, "the login printed before the script started (ignored): %q", n)
		}
	}
}
