package engine

import (
	"fmt"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// PoolOpener reaches targets through a transports.Pool, so every step and
// repair of a run (and of a daemon's runs) shares one connection per host.
type PoolOpener struct {
	Pool *transports.Pool
}

var _ Opener = PoolOpener{}

// Open returns the transport for target; "local" (or "") is the engine's host.
// Where the pool keeps resident sessions, the target's is closed once unused
// for two of the contract's intervals.
func (o PoolOpener) Open(c *contracts.Contract, target string) (transports.Transport, error) {
	spec, err := Spec(c, target)
	if err != nil {
		return nil, err
	}
	spec.ResidentTTL = 2 * c.Schedule.Every
	return o.Pool.Open(spec)
}

// Dialer returns a dialer from target's vantage point (an ssh target), or
// nil for the engine's host.
func (o PoolOpener) Dialer(c *contracts.Contract, target string) (steps.Dialer, error) {
	spec, err := Spec(c, target)
	if err != nil {
		return nil, err
	}
	if spec.Kind == "local" {
		return nil, nil
	}
	return o.Pool.Dialer(spec)
}

// Release closes target's pooled connection when nothing uses it: a
// one-shot run calls it after a target's last stage.
func (o PoolOpener) Release(c *contracts.Contract, target string) {
	if spec, err := Spec(c, target); err == nil && spec.Kind != "local" {
		o.Pool.Release(spec)
	}
}

// Spec maps a contract target and its via chain to a transports.Spec. It
// fails on an unknown target or a via cycle (lint reports both at load).
func Spec(c *contracts.Contract, name string) (*transports.Spec, error) {
	return spec(c, name, map[string]bool{})
}

func spec(c *contracts.Contract, name string, seen map[string]bool) (*transports.Spec, error) {
	if name == "" || name == "local" {
		if t, ok := c.Targets["local"]; !ok || t.Kind == "local" {
			return &transports.Spec{Name: "local", Kind: "local"}, nil
		}
	}
	if seen[name] {
		return nil, fmt.Errorf("target %s: via cycle", name)
	}
	seen[name] = true
	t, ok := c.Targets[name]
	if !ok {
		return nil, fmt.Errorf("target %s is not defined", name)
	}
	s := &transports.Spec{
		Name:           name,
		Kind:           t.Kind,
		KnownHosts:     t.KnownHosts,
		HostKeyPolicy:  t.HostKey,
		Identity:       t.Identity,
		ConnectTimeout: t.ConnectTimeout,
		// A container's link runs pct or docker through sudo on its
		// parent; a local or ssh target's sudo is its repairs' (the
		// engine's, see repair.go), not its transport's.
		Sudo: t.SudoHop(),
	}
	k, ok := transports.KindOf(t.Kind)
	if !ok {
		return nil, fmt.Errorf("target %s: unknown transport kind %q: %w", name, t.Kind, transports.ErrInvalidSpec)
	}
	// The address as the kind reads it: the one function lint checked it
	// with.
	if err := k.Address(t.Address, s); err != nil {
		return nil, fmt.Errorf("target %s: %w: %w", name, err, transports.ErrInvalidSpec)
	}
	if t.Via != "" {
		parent, err := spec(c, t.Via, seen)
		if err != nil {
			return nil, err
		}
		if parent.Kind != "local" {
			s.Via = parent
		}
	}
	return s, nil
}
