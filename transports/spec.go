package transports

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/contractd/contractd/transports/addr"
)

// ErrInvalidSpec is wrapped by Open and Dialer when a chain link is malformed.
var ErrInvalidSpec = errors.New("invalid transport spec")

// Host-key policies for ssh links.
const (
	HostKeyStrict    = "strict"     // unknown and changed host keys are refused
	HostKeyAcceptNew = "accept-new" // unknown keys are recorded and trusted; changed keys are refused
)

// DefaultConnectTimeout bounds an ssh dial and handshake when Spec.ConnectTimeout is 0.
const DefaultConnectTimeout = 10 * time.Second

// Spec is one link of a transport chain. The engine maps contracts.Target to
// Spec; transports does not import contracts.
type Spec struct {
	Name string
	Kind string // a Kind's name: "local", "ssh", "pct", "docker"

	User string // ssh
	Host string // ssh
	Port int    // ssh; 0 means 22

	// Addr is a wrapped kind's address as written: a pct VMID, a docker
	// container (Kind.Address checks it and sets it).
	Addr string

	Via *Spec // parent link; nil means the engine's host

	KnownHosts     string   // ssh: known_hosts file; "" means ~/.ssh/known_hosts
	HostKeyPolicy  string   // ssh: HostKeyStrict (default) or HostKeyAcceptNew
	Identity       []string // ssh: private key files; SSH_AUTH_SOCK is used too when set
	ConnectTimeout time.Duration

	// Sudo runs pct or docker through `sudo -n --` on the parent, for a
	// parent login that is not root (see docs/transports.md for the
	// sudoers rule, which `contractd sudoers` prints). Local and ssh links
	// ignore it: their repairs go through sudo in the engine.
	Sudo bool

	// ResidentTTL closes this chain's resident session (PoolOptions.Resident)
	// once unused for this long; 0 means ResidentOptions.IdleTTL. Only the
	// chain's own spec is read, not its Via links'.
	ResidentTTL time.Duration
}

// ParseSSHAddr splits "user@host" or "user@host:port" ("user@[::1]:2222"
// for IPv6) by the one rule lint uses too (addr.SSH). The port is 22 when
// absent. It returns an error wrapping ErrInvalidSpec (and addr.ErrSyntax)
// for an address addr.SSH refuses.
func ParseSSHAddr(s string) (user, host string, port int, err error) {
	user, host, port, err = addr.SSH(s)
	if err != nil {
		return "", "", 0, fmt.Errorf("%w: %w", err, ErrInvalidSpec)
	}
	return user, host, port, nil
}

// validate checks one link and its parents by their kinds: a known kind,
// a valid address, and what it runs through. It returns an error wrapping
// ErrInvalidSpec naming the first bad field.
func (s *Spec) validate() error {
	if s == nil {
		return fmt.Errorf("nil spec: %w", ErrInvalidSpec)
	}
	k, ok := KindOf(s.Kind)
	if !ok {
		return fmt.Errorf("%s: unknown kind %q (want %s): %w", s.label(), s.Kind, KindNames("or"), ErrInvalidSpec)
	}
	switch s.Kind {
	case "ssh":
		if s.User == "" || s.Host == "" {
			return fmt.Errorf("%s: ssh needs user and host: %w", s.label(), ErrInvalidSpec)
		}
		if s.Port < 0 || s.Port > 65535 {
			return fmt.Errorf("%s: bad port %d: %w", s.label(), s.Port, ErrInvalidSpec)
		}
		switch s.HostKeyPolicy {
		case "", HostKeyStrict, HostKeyAcceptNew:
		default:
			return fmt.Errorf("%s: host key policy %q: want strict or accept-new: %w", s.label(), s.HostKeyPolicy, ErrInvalidSpec)
		}
	default:
		// The address as the kind reads it, so a Spec built by hand is
		// held to what a contract's target is.
		if err := k.Address(s.Addr, &Spec{}); err != nil {
			return fmt.Errorf("%s: %w: %w", s.label(), err, ErrInvalidSpec)
		}
	}
	if err := s.validLink(k); err != nil {
		return err
	}
	if s.Via != nil {
		return s.Via.validate()
	}
	return nil
}

func (s *Spec) port() int {
	if s.Port == 0 {
		return 22
	}
	return s.Port
}

func (s *Spec) connectTimeout() time.Duration {
	if s.ConnectTimeout <= 0 {
		return DefaultConnectTimeout
	}
	return s.ConnectTimeout
}

func (s *Spec) addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.port())) }

// label names one link for messages: "ssh root@h:22", "pct 112",
// "docker web", "local".
func (s *Spec) label() string {
	switch s.Kind {
	case "ssh":
		return "ssh " + s.User + "@" + s.addr()
	case "":
		return s.Name
	}
	return Link(s.Kind, s.Addr)
}

// Chain names the whole chain, outermost first: "ssh root@h:22 → pct 112",
// "local" for the engine's host. Two specs that reach a place the same way
// have the same Chain, whatever the contracts call their targets.
func (s *Spec) Chain() string {
	if s.Via == nil {
		return s.label()
	}
	return s.Via.Chain() + " → " + s.label()
}
