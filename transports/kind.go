package transports

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Kind is one transport kind whole, listed once in kinds: how a target of
// it is written in a contract, how lint checks and explain shows it, which
// links it may run through, and how its commands run. Package contracts
// reads the table (lint, explain, the schema), the engine maps a contract's
// targets to Specs by it, and the pool opens links by it: a new kind is
// one file holding its Kind and one row in kinds.
type Kind struct {
	// Name is the target's key in a contract (`docker: web`) and
	// Spec.Kind.
	Name string
	// Doc says in a line what a target of the kind reaches: explain, the
	// docs and the schema show it.
	Doc string
	// Value is how the key's value is written: ValueString, ValueInt or
	// ValueTrue (`local: true`).
	Value string
	// Example is a value for the docs and the schema: "root@192.168.68.15".
	Example string
	// Address checks the key's value as written and sets the link's
	// address fields on s (User, Host, Port for ssh; Addr for the rest).
	// Its error says what is wrong with the value; lint reports it there.
	Address func(value string, s *Spec) error
	// Via says whether a link of the kind runs on another: ViaNone (the
	// engine's own host), ViaOptional, or ViaRequired (pct: on the
	// Proxmox host via names).
	Via string
	// Parents are the kinds a via link may be; nil means any kind.
	Parents []string
	// Options are the target keys only this kind takes (ssh: known_hosts,
	// host_key, identity, connect_timeout).
	Options []string
	// Wrap, for a kind whose commands run on its parent link (or the
	// engine's host) behind a fixed prefix, returns that prefix: `pct exec
	// 112 --`, `docker exec -i web`. A kind with a transport of its own
	// sets Open instead.
	Wrap func(s *Spec) []string
	// Shell is the shell a wrapped kind runs a script with when the step
	// does not say: sh for containers, where bash may be absent.
	Shell string
	// Open opens a link of a kind that is not a wrapper; parent is the
	// runner of its via link (nil: the engine's host).
	Open opener
	// Tunnel marks a kind http and tcp steps may dial through (via=).
	Tunnel bool
	// Resident marks a kind a daemon keeps a resident session on by
	// itself (local, ssh); a wrapped kind's resident session runs on the
	// session of its parent chain.
	Resident bool
	// SudoHop says where `sudo: true` applies: true runs the wrapper
	// itself through `sudo -n --` on the parent (pct, docker); false
	// runs the link's repairs (and sudo=true steps) through sudo (local,
	// ssh).
	SudoHop bool
}

// How a kind's value is written in a contract.
const (
	ValueString = "string"
	ValueInt    = "int"
	ValueTrue   = "true" // the only meaningful value is true (local: true)
)

// Whether a kind runs on another link.
const (
	ViaNone     = "none"
	ViaOptional = "optional"
	ViaRequired = "required"
)

// kinds is the one explicit list of transport kinds, in the order the
// docs and error messages give them.
var kinds = registry(sshKind, pctKind, dockerKind, localKind)

// registry checks the kinds at init: a duplicate name panics, as does a
// kind that is neither a wrapper nor has an opener, or is both.
func registry(ks ...Kind) []Kind {
	seen := map[string]bool{}
	for _, k := range ks {
		if seen[k.Name] {
			panic("transports: duplicate kind " + k.Name)
		}
		seen[k.Name] = true
		if (k.Wrap == nil) == (k.Open == nil) {
			panic("transports: kind " + k.Name + " needs either Wrap or Open")
		}
		if k.Address == nil {
			panic("transports: kind " + k.Name + " has no Address")
		}
	}
	return ks
}

// Kinds returns every transport kind, in the order of kinds.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// KindOf returns the kind named name, and false when there is none.
func KindOf(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// KindNames lists the kinds' names as prose: "local, ssh, pct or docker".
func KindNames(conj string) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// Link renders one link of a chain for people, from its kind and its
// address as written: "ssh root@h", "pct 112", "docker web", "local".
func Link(kind, address string) string {
	if address == "" {
		return kind
	}
	return kind + " " + address
}

// wrapped is the transport of a wrapped kind: it hands each command to its
// parent (the engine's host when it has none) behind the kind's prefix,
// with sudo in front when the link says so. The script travels on stdin,
// as for every transport.
type wrapped struct {
	kind   Kind
	parent runner
	spec   *Spec
}

var _ Transport = (*wrapped)(nil)

func openWrapped(p *Pool, k Kind, spec *Spec, parent runner) Transport {
	if parent == nil {
		parent = &Local{logf: p.logf}
	}
	return &wrapped{kind: k, parent: parent, spec: spec}
}

// Exec runs cmd behind the prefix. It returns an error wrapping
// ErrUnreachable when the parent is unreachable or the wrapper could not
// start the shell (an unknown VMID or container, one not running, the
// wrapper's program missing): the wrapper fails before our shell starts,
// and its message is the error's.
func (w *wrapped) Exec(ctx context.Context, cmd Command) (Result, error) {
	return execOne(ctx, w, w.prepare(cmd), w.logger())
}

// ExecBatch runs cmds as one framed script behind one prefix. It returns
// an error wrapping ErrUnreachable as Exec does.
func (w *wrapped) ExecBatch(ctx context.Context, cmds []Command) ([]Result, error) {
	cs := make([]Command, len(cmds))
	for i, c := range cmds {
		cs[i] = w.prepare(c)
	}
	return execBatch(ctx, w, cs, w.logger())
}

// prepare is what a resident session applies to each command first: the
// kind's default shell.
func (w *wrapped) prepare(c Command) Command {
	if c.Shell == "" && w.kind.Shell != "" {
		c.Shell = w.kind.Shell
	}
	return c
}

// String names the chain, e.g. "ssh root@pve:22 → pct 112".
func (w *wrapped) String() string { return w.spec.Chain() }

func (w *wrapped) logger() logger { return w.parent.logger() }

// reap reaps on the parent, whose /proc shows the container's processes.
func (w *wrapped) reap(ctx context.Context, tok string) { w.parent.reap(ctx, tok) }

// run hands the prefix and argv to the parent.
func (w *wrapped) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	full := w.kind.Wrap(w.spec)
	if w.spec.Sudo {
		full = append([]string{"sudo", "-n", "--"}, full...)
	}
	return w.parent.run(ctx, append(full, argv...), stdin, stdout, stderr)
}

// validLink checks one link against its kind: its address, and what it
// runs through. It returns an error wrapping ErrInvalidSpec naming the
// link.
func (s *Spec) validLink(k Kind) error {
	if k.Via == ViaNone && s.Via != nil {
		return fmt.Errorf("%s: a %s link cannot have via: %w", s.label(), k.Name, ErrInvalidSpec)
	}
	if s.Via != nil && len(k.Parents) > 0 && !contains(k.Parents, s.Via.Kind) {
		return fmt.Errorf("%s: %s can only hop through another %s host, not %s: %w", s.label(), k.Name, strings.Join(k.Parents, " or "), s.Via.Kind, ErrInvalidSpec)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
