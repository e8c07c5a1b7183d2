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
	Kind string // "local", "ssh", "pct", "docker"

	User string // ssh
	Host string // ssh
	Port int    // ssh; 0 means 22

	VMID      int    // pct
	Container string // docker

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

// validate checks one link and its parents. It returns an error wrapping
// ErrInvalidSpec naming the first bad field.
func (s *Spec) validate() error {
	if s == nil {
		return fmt.Errorf("nil spec: %w", ErrInvalidSpec)
	}
	switch s.Kind {
	case "local":
		if s.Via != nil {
			return fmt.Errorf("%s: a local link cannot have via: %w", s.label(), ErrInvalidSpec)
		}
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
		if s.Via != nil && s.Via.Kind != "ssh" && s.Via.Kind != "local" {
			return fmt.Errorf("%s: ssh can only hop through another ssh host, not %s: %w", s.label(), s.Via.Kind, ErrInvalidSpec)
		}
	case "pct":
		if s.VMID <= 0 {
			return fmt.Errorf("%s: pct needs a VMID > 0: %w", s.label(), ErrInvalidSpec)
		}
	case "docker":
		if err := addr.Container(s.Container); err != nil {
			return fmt.Errorf("%s: %w: %w", s.label(), err, ErrInvalidSpec)
		}
	default:
		return fmt.Errorf("%s: unknown kind %q: %w", s.label(), s.Kind, ErrInvalidSpec)
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

// label names one link for messages.
func (s *Spec) label() string {
	switch s.Kind {
	case "ssh":
		return "ssh " + s.User + "@" + s.addr()
	case "pct":
		return "pct " + strconv.Itoa(s.VMID)
	case "docker":
		return "docker " + s.Container
	case "local":
		return "local"
	}
	if s.Name != "" {
		return s.Name
	}
	return s.Kind
}

// chain names the whole chain, outermost first: "ssh root@h:22 → pct 112".
func (s *Spec) chain() string {
	if s.Via == nil {
		return s.label()
	}
	return s.Via.chain() + " → " + s.label()
}
