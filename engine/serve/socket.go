package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SocketName is the daemon's Unix socket in its state dir. A leading dot:
// no contract name can make this file name.
const SocketName = ".contractd-serve.sock"

// SocketPath is where a daemon serving stateDir listens for the CLI on this
// host: the place `contractd NAME` looks first.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketName) }

// listenSocket listens on path, replacing a socket a dead daemon left there
// (the state dir's flock guarantees no live one uses it), with mode 0600.
// It returns an error when path exists and is not a socket, or the listen
// fails (a path longer than the 107 bytes Linux allows, for instance).
func listenSocket(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("socket %s: a file that is not a socket is in the way", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("socket %s: remove the stale one: %w", path, err)
		}
	}
	// Until the chmod the socket has the umask's mode; a peer of another
	// user connecting meanwhile is still not admitted (peerContext).
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return ln, nil
}

// peerKey marks a request that came over the socket from an admitted peer.
type peerKey struct{}

// peerContext admits a socket connection whose peer runs as the daemon's
// user or as root: they could run the contract themselves with the same
// state dir, so the socket asks them for no token.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uid, err := peerUID(c)
	if err != nil || (uid != 0 && uid != uint32(os.Geteuid())) {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, uid)
}

// localPeer reports whether ctx belongs to an admitted socket peer.
func localPeer(ctx context.Context) bool {
	_, ok := ctx.Value(peerKey{}).(uint32)
	return ok
}

// peerUID returns the user id of the process at the other end of a Unix
// socket connection, from the kernel (SO_PEERCRED).
func peerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}
