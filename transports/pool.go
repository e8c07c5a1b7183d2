package transports

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrPoolClosed is returned by Open, and wrapped by ssh Exec, ExecBatch
// and Dialer dials, once Pool.Close has been called.
var ErrPoolClosed = errors.New("transport pool closed")

// opener builds the transport of one link of a kind that is not a wrapper
// (Kind.Open); parent is the runner of Via (nil when the link runs on the
// engine's host).
type opener func(p *Pool, spec *Spec, parent runner) (Transport, error)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// KeepAlive sends keepalive@openssh.com on each ssh connection at this
	// interval and drops a connection that does not answer within it; 0
	// disables keepalives.
	KeepAlive time.Duration
	// MaxSessions bounds the sessions open at once on one pooled
	// connection; a step waits for a free one (within its deadline) rather
	// than being refused by the server. 0 means DefaultMaxSessions.
	MaxSessions int
	// Resident, when set, keeps a resident session per target chain and
	// sends every Exec and ExecBatch through it (see resident.go and
	// docs/transports.md). A daemon sets it; one-shot runs leave it nil.
	Resident *ResidentOptions
	// Log receives one record per connection event (dial, reconnect,
	// host key accepted, keepalive failure), per resident session event
	// and per failed command, at its level (a broken session or a lost
	// connection is a warning), with the target chain as the field
	// "target" and command secrets redacted.
	Log *slog.Logger
	// Logf, when Log is nil, receives the same events as "TARGET: text"
	// lines. Both nil discards them.
	Logf func(format string, args ...any)
	// HostKeys, when set, receives instead of Log and Logf the warning for each host
	// key that accept-new records (host, key type, SHA256 fingerprint,
	// known_hosts file), so that a one-shot run, which keeps the
	// connection chatter out of its output, still says which key it
	// trusted.
	HostKeys *slog.Logger
}

// Pool opens transports and owns the ssh connections they share: one per
// (user, host, port, via chain), dialed on first use and redialed after it
// died. It is safe for concurrent use.
type Pool struct {
	opts  PoolOptions
	logf  logger
	probe ssh.PublicKey // a key no host has, to ask known_hosts which key types it holds

	mu     sync.Mutex
	conns  map[string]*sshConn
	closed bool

	khMu    sync.Mutex
	khCache map[string]knownHostsEntry // parsed known_hosts files by path

	res *residentSet // nil without PoolOptions.Resident

	said map[string]bool // what firstTime has seen; under mu
}

// firstTime reports whether what has not been asked about before in this
// pool: for what is logged once.
func (p *Pool) firstTime(what string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.said[what] {
		return false
	}
	if p.said == nil {
		p.said = map[string]bool{}
	}
	p.said[what] = true
	return true
}

// DefaultMaxSessions stays below OpenSSH's default MaxSessions of 10, with
// room for a reaper session.
const DefaultMaxSessions = 8

// sshConn is one pooled connection slot; mu serialises dials to it.
type sshConn struct {
	mu     sync.Mutex
	client *ssh.Client
	stop   chan struct{} // closed when client is dropped, ends its keepalive
	slots  chan struct{} // one token per open session
}

// NewPool returns an empty pool. It never fails.
func NewPool(opts PoolOptions) *Pool {
	p := &Pool{opts: opts, conns: map[string]*sshConn{}}
	p.logf = logger{slog: opts.Log, logf: opts.Logf}
	if pub, _, err := ed25519.GenerateKey(rand.Reader); err == nil {
		p.probe, _ = ssh.NewPublicKey(pub)
	}
	if opts.Resident != nil {
		p.res = newResidentSet(*opts.Resident, p.logf)
	}
	return p
}

// Open returns the transport for spec and its via chain. It is cheap:
// nothing is dialed until the first Exec. It returns an error wrapping
// ErrInvalidSpec for a malformed chain, or ErrPoolClosed.
func (p *Pool) Open(spec *Spec) (Transport, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrPoolClosed
	}
	t, err := p.open(spec)
	if err != nil || p.res == nil {
		return t, err
	}
	return &residentTransport{Transport: t, runner: t.(runner), spec: spec, set: p.res}, nil
}

// ResidentSessions returns how many resident sessions are open per host
// (an ssh connection, or "local"); empty without PoolOptions.Resident.
func (p *Pool) ResidentSessions() map[string]int {
	if p.res == nil {
		return map[string]int{}
	}
	return p.res.count()
}

func (p *Pool) open(spec *Spec) (Transport, error) {
	var parent runner
	if spec.Via != nil {
		t, err := p.open(spec.Via)
		if err != nil {
			return nil, err
		}
		parent = t.(runner)
	}
	k, ok := KindOf(spec.Kind)
	if !ok {
		return nil, fmt.Errorf("kind %q: %w", spec.Kind, ErrInvalidSpec)
	}
	if k.Wrap != nil {
		return openWrapped(p, k, spec, parent), nil
	}
	return k.Open(p, spec, parent)
}

// Dialer is how an http or tcp step reaches "the loopback of that host".
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Dialer returns a dialer that opens TCP connections from the host of
// spec: through the pooled ssh connection (direct-tcpip) for an ssh spec,
// or directly for local. It returns an error wrapping ErrInvalidSpec for
// a link of a kind with no tunnel (Kind.Tunnel: pct, docker).
func (p *Pool) Dialer(spec *Spec) (Dialer, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	switch k, _ := KindOf(spec.Kind); {
	case spec.Kind == "local":
		return &net.Dialer{}, nil
	case k.Tunnel:
		return sshDialer{p: p, spec: spec}, nil
	}
	return nil, fmt.Errorf("%s: no tcp tunnel through %s links: %w", spec.Chain(), spec.Kind, ErrInvalidSpec)
}

type sshDialer struct {
	p    *Pool
	spec *Spec
}

// DialContext opens network/addr from the ssh host. It returns an error
// wrapping ErrUnreachable when the ssh host cannot be reached or the
// connection to it broke. When the host answers but the address does not
// (the ssh server reports the forward failed: connection refused, no route),
// the error does not wrap ErrUnreachable: from that vantage point nothing
// answered, as when a local probe finds a closed port.
func (d sshDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.p.client(ctx, d.spec)
	if err != nil {
		return nil, err
	}
	conn, err := c.DialContext(ctx, network, addr)
	var refused *ssh.OpenChannelError
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("%s: forward to %s: %w", d.spec.Chain(), addr, err)
	case err != nil:
		return nil, fmt.Errorf("%s: forward to %s: %w: %w", d.spec.Chain(), addr, err, ErrUnreachable)
	}
	return conn, nil
}

// Close closes every pooled connection; later Opens fail with
// ErrPoolClosed. It returns the first close error.
func (p *Pool) Close() error {
	if p.res != nil {
		// Before the connections: each loop is told to end over its own.
		p.res.close()
	}
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[string]*sshConn{}
	p.mu.Unlock()
	var first error
	for _, c := range conns {
		c.mu.Lock()
		if c.client != nil {
			if err := c.client.Close(); err != nil && first == nil && !errors.Is(err, net.ErrClosed) {
				first = err
			}
			c.drop(c.client)
		}
		c.mu.Unlock()
	}
	return first
}

// Release closes the pooled ssh connection that spec reaches its target
// through, when no session is open on it and no other pooled connection is
// reached through it; the next use dials again. A one-shot run over a
// fleet releases each host after its last stage, so it never holds a
// thousand idle connections (and a thousand sshd sessions). A connection
// still in use is left alone.
func (p *Pool) Release(spec *Spec) {
	for spec != nil && spec.Kind != "ssh" {
		spec = spec.Via
	}
	if spec == nil {
		return
	}
	key := chainKey(spec)
	p.mu.Lock()
	c := p.conns[key]
	if c == nil || len(c.slots) > 0 {
		p.mu.Unlock()
		return
	}
	for k := range p.conns {
		if strings.Contains(k, " via "+key) {
			p.mu.Unlock()
			return
		}
	}
	delete(p.conns, key)
	p.mu.Unlock()
	c.mu.Lock()
	if cl := c.client; cl != nil {
		c.drop(cl)
		cl.Close()
	}
	c.mu.Unlock()
}

// drop forgets cl if it is still the slot's client. Callers hold c.mu.
func (c *sshConn) drop(cl *ssh.Client) {
	if c.client == cl && cl != nil {
		c.client = nil
		close(c.stop)
	}
}

// chainKey identifies a pooled connection: user, host, port and the chain
// it is reached through.
func chainKey(s *Spec) string {
	k := s.User + "@" + s.addr()
	if s.Via != nil && s.Via.Kind == "ssh" {
		k += " via " + chainKey(s.Via)
	}
	return k
}

// client returns the pooled connection for spec, dialing it when absent.
func (p *Pool) client(ctx context.Context, spec *Spec) (*ssh.Client, error) {
	key := chainKey(spec)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", spec.Chain(), ErrPoolClosed)
	}
	c := p.conn(key)
	p.mu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return c.client, nil
	}
	cl, err := p.dial(ctx, spec)
	if err != nil {
		return nil, err // the caller logs it, with its command's secrets redacted
	}
	c.client, c.stop = cl, make(chan struct{})
	p.logf.info(nil, label(spec.Chain()), "connected")
	go func(stop chan struct{}) {
		err := cl.Wait()
		c.mu.Lock()
		if c.client == cl {
			p.logf.warn(nil, label(spec.Chain()), "connection closed: %v", err)
		}
		c.drop(cl)
		c.mu.Unlock()
	}(c.stop)
	if p.opts.KeepAlive > 0 {
		go p.keepalive(spec, cl, c.stop)
	}
	return cl, nil
}

// conn returns the slot for key, creating it. Callers hold p.mu.
func (p *Pool) conn(key string) *sshConn {
	c := p.conns[key]
	if c == nil {
		n := p.opts.MaxSessions
		if n <= 0 {
			n = DefaultMaxSessions
		}
		c = &sshConn{slots: make(chan struct{}, n)}
		p.conns[key] = c
	}
	return c
}

// slots returns the session tokens of spec's connection.
func (p *Pool) slots(spec *Spec) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn(chainKey(spec)).slots
}

// forget closes cl and drops it from its slot, after a failure that showed
// it is dead, so that the next call redials.
func (p *Pool) forget(spec *Spec, cl *ssh.Client) {
	p.mu.Lock()
	c := p.conns[chainKey(spec)]
	p.mu.Unlock()
	cl.Close()
	if c != nil {
		c.mu.Lock()
		c.drop(cl)
		c.mu.Unlock()
	}
}

// keepalive pings the server every KeepAlive and closes the connection when
// a ping fails or goes unanswered for a whole interval.
func (p *Pool) keepalive(spec *Spec, cl *ssh.Client, stop chan struct{}) {
	t := time.NewTicker(p.opts.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := cl.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err == nil {
				continue
			}
			p.logf.warn(nil, label(spec.Chain()), "keepalive failed: %v", err)
		case <-time.After(p.opts.KeepAlive):
			p.logf.warn(nil, label(spec.Chain()), "keepalive unanswered for %s", p.opts.KeepAlive)
		case <-stop:
			return
		}
		cl.Close() // the Wait watcher drops it from the pool
		return
	}
}
