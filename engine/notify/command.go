package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/contractd/contractd/contracts"
)

// Command runs a configured command with `sh -c` on the engine's host and
// feeds it the message on stdin: the message line (format text, the
// default) or the message as JSON (format json), each ending in a newline.
// The message fields are also in the environment as CONTRACTD_CONTRACT,
// CONTRACTD_AGENT, CONTRACTD_CONDITION, CONTRACTD_KIND and
// CONTRACTD_SEVERITY; nothing from the message is spliced into the command
// line. On timeout (default 10s) the whole process group is killed and
// reaped.
type Command struct {
	name    string
	command string
	format  string
	timeout time.Duration
}

var _ Notifier = (*Command)(nil)

func newCommand(r contracts.NotifyRoute, _ Deps) (Notifier, error) {
	o := r.Options.(*contracts.CommandOptions)
	return &Command{name: r.Name, command: o.Run, format: o.Format, timeout: o.Timeout}, nil
}

// Name returns the notifier's name.
func (c *Command) Name() string { return c.name }

// Notify runs the command. It returns an error when the command could not
// start, exited non-zero (with the start of its stderr), or timed out.
func (c *Command) Notify(ctx context.Context, m Message) error {
	input := []byte(m.Line() + "\n")
	if c.format == "json" {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode message: %w", err)
		}
		input = append(b, '\n')
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, "sh", "-c", c.command)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &capped{buf: &stderr, max: 512}
	cmd.Env = append(os.Environ(),
		"CONTRACTD_CONTRACT="+m.Contract,
		"CONTRACTD_AGENT="+m.Agent,
		"CONTRACTD_CONDITION="+m.Condition,
		"CONTRACTD_KIND="+m.Kind,
		"CONTRACTD_SEVERITY="+m.Severity,
	)
	// Own process group, so a timeout kills the command's children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second

	err := cmd.Run()
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timed out after %s: %w", c.timeout, ctx.Err())
	case ctx.Err() != nil:
		return ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("exit %d: %s", exit.ExitCode(), strings.TrimSpace(stderr.String()))
	}
	return err
}

// capped keeps the first max bytes written and discards the rest.
type capped struct {
	buf *bytes.Buffer
	max int
}

func (w *capped) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
