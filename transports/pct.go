package transports

import (
	"context"
	"io"
	"strconv"
)

// PCT runs scripts inside a Proxmox container with `pct exec VMID -- ...`
// on its parent (the Proxmox host, usually an ssh link). The script passes
// through pct's stdin; an unknown VMID or a stopped container makes pct
// fail before our shell starts, which Exec reports as ErrUnreachable with
// pct's message ("Configuration file 'nodes/NODE/lxc/VMID.conf' does not
// exist").
type PCT struct {
	parent runner
	spec   *Spec
}

var _ Transport = (*PCT)(nil)

func openPCT(p *Pool, spec *Spec, parent runner) (Transport, error) {
	if parent == nil {
		parent = &Local{logf: p.logf}
	}
	return &PCT{parent: parent, spec: spec}, nil
}

// Exec runs cmd in the container. It returns an error wrapping
// ErrUnreachable when the parent is unreachable or pct could not start the
// shell (unknown VMID, container not running, pct missing).
func (c *PCT) Exec(ctx context.Context, cmd Command) (Result, error) {
	return execOne(ctx, c, cmd, c.logger())
}

// ExecBatch runs cmds as one framed script in one `pct exec`. It returns
// an error wrapping ErrUnreachable as Exec does.
func (c *PCT) ExecBatch(ctx context.Context, cmds []Command) ([]Result, error) {
	return execBatch(ctx, c, cmds, c.logger())
}

// String names the chain, e.g. "ssh root@pve:22 → pct 112".
func (c *PCT) String() string { return c.spec.chain() }

func (c *PCT) logger() logger { return c.parent.logger() }

// reap reaps on the parent, whose /proc shows the container's processes.
func (c *PCT) reap(ctx context.Context, tok string) { c.parent.reap(ctx, tok) }

// run hands `pct exec VMID -- argv` to the parent.
func (c *PCT) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	full := []string{"pct", "exec", strconv.Itoa(c.spec.VMID), "--"}
	if c.spec.Sudo {
		full = append([]string{"sudo", "-n", "--"}, full...)
	}
	return c.parent.run(ctx, append(full, argv...), stdin, stdout, stderr)
}
