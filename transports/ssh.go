package transports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/contractd/contractd/transports/addr"
)

// SSH runs scripts on a host over a pooled golang.org/x/crypto/ssh
// connection: one session per command (or per batch), the script on the
// session's stdin, the session command a fixed argv.
type SSH struct {
	pool *Pool
	spec *Spec
}

var _ Transport = (*SSH)(nil)

// sshKind is a host over ssh: user@host or user@host:port (user@[::1]:2222
// for IPv6), strict host keys by default, through another ssh host with
// via (a jump host).
var sshKind = Kind{
	Name:    "ssh",
	Doc:     "a host over ssh, as user@host or user@host:port; through another ssh host with via",
	Value:   ValueString,
	Example: "root@192.168.68.15",
	Address: func(v string, s *Spec) error {
		user, host, port, err := addr.SSH(v)
		if ae := (*addr.Error)(nil); errors.As(err, &ae) {
			return fmt.Errorf("expected user@host or user@host:port, got %q: %s", v, ae.Why)
		} else if err != nil {
			return fmt.Errorf("expected user@host or user@host:port, got %q: %w", v, err)
		}
		s.User, s.Host, s.Port = user, host, port
		return nil
	},
	Via:      ViaOptional,
	Parents:  []string{"ssh"},
	Options:  []string{"known_hosts", "host_key", "identity", "connect_timeout"},
	Open:     openSSH,
	Tunnel:   true,
	Resident: true,
}

func openSSH(p *Pool, spec *Spec, _ runner) (Transport, error) {
	return &SSH{pool: p, spec: spec}, nil
}

// Exec runs cmd in one session. It returns an error wrapping ErrUnreachable
// when the host cannot be dialed, its key is unknown or changed,
// authentication fails, or the connection drops mid-command.
func (s *SSH) Exec(ctx context.Context, cmd Command) (Result, error) {
	return execOne(ctx, s, cmd, s.pool.logf)
}

// ExecBatch runs cmds as one framed script in one session. It returns an
// error wrapping ErrUnreachable as Exec does; when the connection drops
// mid-batch the steps already framed are returned beside the error.
func (s *SSH) ExecBatch(ctx context.Context, cmds []Command) ([]Result, error) {
	return execBatch(ctx, s, cmds, s.pool.logf)
}

// String names the chain, e.g. "ssh root@h:22".
func (s *SSH) String() string { return s.spec.Chain() }

// run opens a session (redialing once when the pooled connection turns out
// dead), starts argv and waits. When ctx ends it signals the remote process
// (TERM, then KILL after killAfter) and closes the session.
func (s *SSH) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	sess, release, err := s.session(ctx)
	if err != nil {
		return -1, err
	}
	defer release()
	// The session's streams are copied here rather than by x/crypto/ssh,
	// whose copies take a 32 KiB buffer each (three per session, and one
	// more inside): a daemon holding a resident session to each of 1,000
	// hosts would keep 128 MB of buffers for a few bytes a minute.
	in, err := sess.StdinPipe()
	if err != nil {
		return -1, fmt.Errorf("%s: session stdin: %w: %w", s, err, ErrUnreachable)
	}
	outR, err := sess.StdoutPipe()
	if err != nil {
		return -1, fmt.Errorf("%s: session stdout: %w: %w", s, err, ErrUnreachable)
	}
	errR, err := sess.StderrPipe()
	if err != nil {
		return -1, fmt.Errorf("%s: session stderr: %w: %w", s, err, ErrUnreachable)
	}
	// `exec` so the login shell replaces itself and a signal reaches our
	// process, not a shell waiting on it.
	if err := sess.Start("exec " + joinArgv(argv)); err != nil {
		return -1, fmt.Errorf("%s: start session command: %w: %w", s, err, ErrUnreachable)
	}
	if ss, ok := stdin.(sessionStdin); ok {
		if err := ss.attach(in); err != nil {
			sess.Close()
			return -1, fmt.Errorf("%s: session stdin: %w: %w", s, err, ErrUnreachable)
		}
	} else {
		go func() {
			copySmall(in, stdin)
			in.Close() // EOF to the command
		}()
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { copySmall(stdout, outR, 2<<10); copies.Done() }()
	go func() { copySmall(stderr, errR, 1<<10); copies.Done() }()
	// The command is waited for here, and stopped from a callback when ctx
	// ends: no goroutine per session sits waiting for either (a daemon
	// keeps a resident session to every host).
	done := make(chan struct{})
	stopped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(stopped)
		s.stopCommand(ctx, sess, argv, done)
	})
	err = sess.Wait()
	copies.Wait() // what the command wrote before it exited
	close(done)
	if stop() {
		return s.exitStatus(err)
	}
	<-stopped
	code, _ := s.exitStatus(err)
	return code, nil
}

// stopCommand stops a command whose ctx ended, unless done closes first:
// TERM over the session (sshd ignores signal requests on root logins; the
// target's deadlines cover those), the reaper after reapAfter (a cancelled
// run), then KILL and closing the session, which ends Wait.
func (s *SSH) stopCommand(ctx context.Context, sess *ssh.Session, argv []string, done <-chan struct{}) {
	sess.Signal(ssh.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(reapAfter):
	}
	if tok := runToken(argv); tok != "" {
		s.reap(ctx, tok)
	}
	select {
	case <-done:
		return
	case <-time.After(killAfter):
	}
	sess.Signal(ssh.SIGKILL)
	sess.Close()
}

// copySmall copies src to dst until EOF or an error with a small buffer
// (4 KiB unless size says otherwise), for session streams that mostly
// idle. A source that writes itself out (a strings.Reader holding a
// script) does so without one.
func copySmall(dst io.Writer, src io.Reader, size ...int) {
	if wt, ok := src.(io.WriterTo); ok {
		if _, isFile := src.(*os.File); !isFile {
			wt.WriteTo(dst)
			return
		}
	}
	n := 4 << 10
	if len(size) > 0 {
		n = size[0]
	}
	io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, n))
}

// sessionStdin is a stdin that takes the session's own stdin rather than
// being copied into it: attach hands it over once the command has started.
type sessionStdin interface {
	io.Reader
	attach(w io.WriteCloser) error
}

// reapAfter is how long a stopped command may take to exit on its own
// before the reaper goes after it.
const reapAfter = 500 * time.Millisecond

// reaper kills, on the target, every process whose environment carries the
// run token (TERM, then KILL a second later): the shell, the script's
// children, and processes inside pct and docker containers on that host,
// which the host's /proc shows too. It spares a process that left the
// session its run was marked with (sessionMark): the last NSsid field of
// /proc/PID/status is its session in its own pid namespace, the numbering
// the mark was taken in. One grep over /proc finds the run; kills are
// builtins.
const reaper = `tok=$1
reap() { grep -lzx "CONTRACTD_RUN=$tok" /proc/[0-9]*/environ 2>/dev/null | while IFS= read -r f; do
	d=${f%/environ}
	m=$(grep -zx 'CONTRACTD_SID=[0-9]*' "$f" 2>/dev/null | tr -d '\000'); m=${m#CONTRACTD_SID=}
	s=$(sed -n 's/^NSsid:.*[^0-9]\([0-9][0-9]*\)$/\1/p' "$d/status" 2>/dev/null)
	if [ -n "$m" ] && [ -n "$s" ] && [ "$m" != "$s" ]; then continue; fi
	kill "-$1" "${d#/proc/}" 2>/dev/null
done; }
reap TERM; sleep 1; reap KILL
`

// reap runs the reaper for tok in a new session on the same connection,
// bounded by its own short deadline since ctx is already done.
func (s *SSH) reap(ctx context.Context, tok string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reapTimeout)
	defer cancel()
	sess, release, err := s.session(rctx)
	if err != nil {
		s.reapFailed(rctx, tok, err)
		return
	}
	defer release()
	sess.Stdin = strings.NewReader(reaper)
	done := make(chan error, 1)
	go func() { done <- sess.Run("exec sh -s " + quote(tok)) }()
	select {
	case err = <-done:
	case <-rctx.Done():
		err = rctx.Err()
	}
	if err != nil {
		s.reapFailed(rctx, tok, err)
	}
}

// reapFailed logs a reap that did not finish. One cut off by its own
// deadline is what every reap on a host whose login takes longer does, and
// the target's own timeout still stops the command: it is said once per
// host, at INFO. Anything else is a warning.
func (s *SSH) reapFailed(rctx context.Context, tok string, err error) {
	if rctx.Err() == nil {
		s.pool.logf.warn(nil, s, "reap %s: %v", tok, err)
		return
	}
	if s.pool.firstTime("slow reap " + chainKey(s.spec)) {
		s.pool.logf.info(nil, s, "reap %s: not done within %s (a login on this host takes longer?); the command's own timeout on the target still stops it; said once", tok, reapTimeout)
		return
	}
	s.pool.logf.debug(nil, s, "reap %s: %v", tok, err)
}

// reapTimeout bounds a reap: a session, the login and the reaper.
const reapTimeout = 5 * time.Second

// exitStatus maps Session.Wait's outcome to an exit code; a session that
// ended without a status means the connection died.
func (s *SSH) exitStatus(err error) (int, error) {
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if sig := ee.Signal(); sig != "" {
			if n, ok := signalNumbers[sig]; ok {
				return 128 + n, nil
			}
		}
		return ee.ExitStatus(), nil
	}
	return -1, fmt.Errorf("%s: connection lost during the command: %w: %w", s, err, ErrUnreachable)
}

var signalNumbers = map[string]int{"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "PIPE": 13, "ALRM": 14, "TERM": 15}

// session opens a session on the pooled connection, waiting for one of the
// connection's MaxSessions slots. A connection that died since its last use
// (sshd restarted, network flap) fails here; it is dropped and dialed once
// more. The returned func closes the session and frees its slot.
func (s *SSH) session(ctx context.Context) (*ssh.Session, func(), error) {
	slots := s.pool.slots(s.spec)
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%s: waiting for a free session (PoolOptions.MaxSessions %d in use): %w: %w",
			s, cap(slots), ErrUnreachable, ErrTimeout)
	}
	free := func() { <-slots }
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		cl, err := s.pool.client(ctx, s.spec)
		if err != nil {
			free()
			return nil, nil, err
		}
		sess, err := cl.NewSession()
		if err == nil {
			var once sync.Once
			return sess, func() { once.Do(func() { sess.Close(); free() }) }, nil
		}
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) {
			// The server refused the channel: its MaxSessions is below
			// ours, or a session we just closed is not freed yet. The
			// connection is alive and other sessions use it: retry.
			if sess, err = s.retryOpen(ctx, cl); err == nil {
				var once sync.Once
				return sess, func() { once.Do(func() { sess.Close(); free() }) }, nil
			}
			free()
			return nil, nil, fmt.Errorf("%s: open session: %w: %w", s, err, ErrUnreachable)
		}
		last = err
		s.pool.logf.warn(nil, s, "pooled connection dead (%v), reconnecting", err)
		s.pool.forget(s.spec, cl)
	}
	free()
	return nil, nil, fmt.Errorf("%s: open session: %w: %w", s, last, ErrUnreachable)
}

// retryOpen retries a refused session with a growing pause, for up to
// about 3 s or until ctx ends.
func (s *SSH) retryOpen(ctx context.Context, cl *ssh.Client) (*ssh.Session, error) {
	var err error
	for pause := 20 * time.Millisecond; pause < 2*time.Second; pause *= 2 {
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		}
		var sess *ssh.Session
		if sess, err = cl.NewSession(); err == nil {
			return sess, nil
		}
		var oce *ssh.OpenChannelError
		if !errors.As(err, &oce) {
			return nil, err
		}
	}
	return nil, err
}

// HostKeyError reports a host key that known_hosts does not vouch for:
// unknown under the strict policy, or different from the recorded one.
type HostKeyError struct {
	Host        string // host:port as dialed
	Fingerprint string // SHA256:... of the key the server presented
	KeyType     string
	KnownHosts  string
	Want        []string // "file:line SHA256:..." of recorded keys; empty for an unknown host
}

// Error names the host, the presented fingerprint and what was expected.
func (e *HostKeyError) Error() string {
	if len(e.Want) == 0 {
		return fmt.Sprintf("unknown host key for %s: %s %s is not in %s (host-key policy strict; add it or use accept-new)",
			e.Host, e.KeyType, e.Fingerprint, e.KnownHosts)
	}
	return fmt.Sprintf("HOST KEY MISMATCH for %s: presented %s %s, known_hosts has %s; refusing to run anything",
		e.Host, e.KeyType, e.Fingerprint, strings.Join(e.Want, ", "))
}

// dial connects and authenticates to spec's host, directly or through the
// pooled connection of spec.Via, within the connect timeout.
func (p *Pool) dial(ctx context.Context, spec *Spec) (*ssh.Client, error) {
	name := spec.Chain()
	ctx, cancel := context.WithTimeout(ctx, spec.connectTimeout())
	defer cancel()
	addr := spec.addr()

	hostKeys, algos, err := p.hostKeyCallback(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, err, ErrUnreachable)
	}
	auth, closeAgent, err := authMethods(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, err, ErrUnreachable)
	}
	defer closeAgent()

	var nc net.Conn
	if spec.Via != nil && spec.Via.Kind == "ssh" {
		parent, err := p.client(ctx, spec.Via)
		if err != nil {
			return nil, err
		}
		nc, err = parent.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%s: dial %s through %s: %w: %w", name, addr, spec.Via.Chain(), err, ErrUnreachable)
		}
	} else {
		nc, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%s: dial %s: %w: %w", name, addr, err, ErrUnreachable)
		}
		nc = quickAck(nc)
	}
	cfg := &ssh.ClientConfig{
		User:              spec.User,
		Auth:              auth,
		HostKeyCallback:   hostKeys,
		HostKeyAlgorithms: algos,
		Timeout:           spec.connectTimeout(),
	}
	// The handshake has no context of its own: close the socket when the
	// deadline passes, which fails the handshake.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	if !stop() {
		if err == nil {
			sc.Close()
		}
		return nil, fmt.Errorf("%s: handshake: %w: %w", name, ctx.Err(), ErrUnreachable)
	}
	if err != nil {
		nc.Close()
		var hk *HostKeyError
		switch {
		case errors.As(err, &hk):
			return nil, fmt.Errorf("%s: %w: %w", name, hk, ErrUnreachable)
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("%s: authentication failed for user %s (keys: %s): %w: %w",
				name, spec.User, identityNames(spec), err, ErrUnreachable)
		}
		return nil, fmt.Errorf("%s: handshake: %w: %w", name, err, ErrUnreachable)
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// knownHostsFile is spec.KnownHosts or ~/.ssh/known_hosts.
func knownHostsFile(spec *Spec) string {
	if spec.KnownHosts != "" {
		return spec.KnownHosts
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".ssh/known_hosts"
	}
	return filepath.Join(home, ".ssh", "known_hosts")
}

// hostKeyCallback checks the presented key against known_hosts under the
// spec's policy, and returns the key algorithms known for the host so that
// the server is asked for the key type on record.
func (p *Pool) hostKeyCallback(spec *Spec) (ssh.HostKeyCallback, []string, error) {
	file := knownHostsFile(spec)
	acceptNew := spec.HostKeyPolicy == HostKeyAcceptNew
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if !acceptNew {
			return strictUnknown(file), nil, nil
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, nil, fmt.Errorf("create known_hosts dir: %w", err)
		}
		if err := os.WriteFile(file, nil, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, nil, fmt.Errorf("create known_hosts: %w", err)
		}
	}
	check, err := p.knownHosts(file)
	if err != nil {
		return nil, nil, err
	}
	algos := p.knownAlgorithms(check, spec.addr())
	cb := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		hk := &HostKeyError{Host: hostname, Fingerprint: ssh.FingerprintSHA256(key), KeyType: key.Type(), KnownHosts: file}
		for _, w := range ke.Want {
			hk.Want = append(hk.Want, fmt.Sprintf("%s:%d %s", w.Filename, w.Line, ssh.FingerprintSHA256(w.Key)))
		}
		if len(ke.Want) > 0 || !acceptNew {
			return hk
		}
		if err := appendKnownHost(file, hostname, key); err != nil {
			return fmt.Errorf("accept-new %s: %w", hostname, err)
		}
		log := p.logf
		if p.opts.HostKeys != nil {
			log = logger{slog: p.opts.HostKeys}
		}
		log.warn(nil, label(spec.Chain()), "accepted new host key for %s: %s %s, recorded in %s", hostname, key.Type(), hk.Fingerprint, file)
		return nil
	}
	return cb, algos, nil
}

// knownHosts returns the parsed known_hosts file, parsing it once per
// version of the file (path, size, modification time): a fleet of N hosts
// in one file would otherwise be parsed N times, and each connection keeps
// its callback for re-keying, so memory would grow with N². An accept-new
// append or an operator's edit changes the version and is read again.
func (p *Pool) knownHosts(file string) (ssh.HostKeyCallback, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts %s: %w", file, err)
	}
	version := fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	p.khMu.Lock()
	defer p.khMu.Unlock()
	if c, ok := p.khCache[file]; ok && c.version == version {
		return c.check, nil
	}
	check, err := knownhosts.New(file)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts %s: %w", file, err)
	}
	if p.khCache == nil {
		p.khCache = map[string]knownHostsEntry{}
	}
	p.khCache[file] = knownHostsEntry{version: version, check: check}
	return check, nil
}

// knownHostsEntry is one parsed known_hosts file and the version it was
// parsed from.
type knownHostsEntry struct {
	version string
	check   ssh.HostKeyCallback
}

func strictUnknown(file string) ssh.HostKeyCallback {
	return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
		return &HostKeyError{Host: hostname, Fingerprint: ssh.FingerprintSHA256(key), KeyType: key.Type(), KnownHosts: file + " (missing)"}
	}
}

// knownAlgorithms asks known_hosts which key types it holds for addr (by
// checking a key no host has) and returns the matching algorithms.
func (p *Pool) knownAlgorithms(check ssh.HostKeyCallback, addr string) []string {
	if p.probe == nil {
		return nil
	}
	err := check(addr, &net.TCPAddr{IP: net.IPv4zero}, p.probe)
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, w := range ke.Want {
		t := w.Key.Type()
		as := []string{t}
		if t == ssh.KeyAlgoRSA {
			as = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		for _, a := range as {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	return algos
}

// appendKnownHost records key for hostname, holding an exclusive lock on
// the file so concurrent engines do not interleave lines.
func appendKnownHost(file, hostname string, key ssh.PublicKey) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", file, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_, err = f.WriteString(knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key) + "\n")
	return err
}

// authMethods offers the identity files' keys and, when SSH_AUTH_SOCK is
// set, the agent's, as one publickey method (the client tries each method
// name once). The returned func closes the agent connection.
func authMethods(spec *Spec) ([]ssh.AuthMethod, func(), error) {
	var signers []ssh.Signer
	files, explicit := spec.Identity, true
	if len(files) == 0 {
		explicit = false
		if home, err := os.UserHomeDir(); err == nil {
			for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
				files = append(files, filepath.Join(home, ".ssh", n))
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if explicit {
				return nil, func() {}, fmt.Errorf("identity %s: %w", f, err)
			}
			continue
		}
		sg, err := ssh.ParsePrivateKey(b)
		if err != nil {
			if explicit {
				return nil, func() {}, fmt.Errorf("identity %s: %w (encrypted keys must be loaded into ssh-agent)", f, err)
			}
			continue
		}
		signers = append(signers, sg)
	}
	closeAgent := func() {}
	var ag agent.ExtendedAgent
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			ag = agent.NewClient(c)
			closeAgent = func() { c.Close() }
		}
	}
	cb := func() ([]ssh.Signer, error) {
		all := append([]ssh.Signer(nil), signers...)
		if ag != nil {
			if more, err := ag.Signers(); err == nil {
				all = append(all, more...)
			}
		}
		return all, nil
	}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(cb)}, closeAgent, nil
}

func identityNames(spec *Spec) string {
	var names []string
	names = append(names, spec.Identity...)
	if len(names) == 0 {
		names = append(names, "~/.ssh/id_*")
	}
	if os.Getenv("SSH_AUTH_SOCK") != "" {
		names = append(names, "agent")
	}
	return strings.Join(names, ", ")
}

func (s *SSH) logger() logger { return s.pool.logf }
