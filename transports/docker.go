package transports

import (
	"context"
	"io"
)

// Docker runs scripts inside a running container with `docker exec -i
// CONTAINER sh -s` on its parent (the engine's host, or an ssh link). The
// default shell is sh, which every image with a shell has; Command.Shell
// "bash" asks for bash and falls back to sh where it is absent. docker's
// own failures (exit 125: no such container, not running, daemon down;
// 126/127: no shell in the image) happen before our shell starts and are
// reported as ErrUnreachable with docker's message.
type Docker struct {
	parent runner
	spec   *Spec
}

var _ Transport = (*Docker)(nil)

func openDocker(p *Pool, spec *Spec, parent runner) (Transport, error) {
	if parent == nil {
		parent = &Local{logf: p.logf}
	}
	return &Docker{parent: parent, spec: spec}, nil
}

// Exec runs cmd in the container. It returns an error wrapping
// ErrUnreachable when the parent is unreachable or docker could not start
// the shell in the container.
func (d *Docker) Exec(ctx context.Context, cmd Command) (Result, error) {
	return execOne(ctx, d, dockerShell(cmd), d.logger())
}

// ExecBatch runs cmds as one framed script in one `docker exec`. It
// returns an error wrapping ErrUnreachable as Exec does.
func (d *Docker) ExecBatch(ctx context.Context, cmds []Command) ([]Result, error) {
	cs := make([]Command, len(cmds))
	for i, c := range cmds {
		cs[i] = dockerShell(c)
	}
	return execBatch(ctx, d, cs, d.logger())
}

// prepare is what a resident session applies to each command first.
func (d *Docker) prepare(c Command) Command { return dockerShell(c) }

// dockerShell defaults the shell to sh: minimal images have no bash.
func dockerShell(c Command) Command {
	if c.Shell == "" {
		c.Shell = "sh"
	}
	return c
}

// String names the chain, e.g. "docker agent-zero" or "ssh root@h:22 → docker web".
func (d *Docker) String() string { return d.spec.chain() }

func (d *Docker) logger() logger { return d.parent.logger() }

// reap reaps on the parent, whose /proc shows the container's processes.
func (d *Docker) reap(ctx context.Context, tok string) { d.parent.reap(ctx, tok) }

// run hands `docker exec -i CONTAINER argv` to the parent.
func (d *Docker) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	full := []string{"docker", "exec", "-i", d.spec.Container}
	if d.spec.Sudo {
		full = append([]string{"sudo", "-n", "--"}, full...)
	}
	return d.parent.run(ctx, append(full, argv...), stdin, stdout, stderr)
}
