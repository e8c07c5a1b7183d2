//go:build linux

package transports

import (
	"net"
	"syscall"
)

// quickAck puts a TCP connection to an ssh server in quick-ACK mode and
// keeps it there after every read.
//
// OpenSSH's sshd leaves Nagle's algorithm on for sessions without a
// terminal. Right after authentication it sends a small message the client
// does not answer (hostkeys-00@openssh.com); its reply to the first channel
// open is then held back until that message is acknowledged, and Linux
// delays the acknowledgement by up to 40 ms because the client has nothing
// to send. Every fresh connection paid that stall before its first command
// ran. Linux drops quick-ACK mode on its own once a connection looks
// interactive, so the option is set again after each read (one setsockopt
// per read of the buffered transport, which is cheap next to the crypto).
func quickAck(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &quickAckConn{TCPConn: tc, raw: raw}
	c.set()
	return c
}

type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	if n > 0 {
		c.set()
	}
	return n, err
}

func (c *quickAckConn) set() {
	_ = c.raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
