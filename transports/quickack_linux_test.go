//go:build linux

package transports

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// quickAckOn reads TCP_QUICKACK: 1 while the kernel acknowledges at once,
// 0 once it has switched the connection to delayed acknowledgements.
func quickAckOn(t *testing.T, c net.Conn) int {
	t.Helper()
	var tc *net.TCPConn
	switch c := c.(type) {
	case *net.TCPConn:
		tc = c
	case *quickAckConn:
		tc = c.TCPConn
	default:
		t.Fatalf("not a TCP connection: %T", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	v := -1
	if err := raw.Control(func(fd uintptr) {
		v, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK)
	}); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuickAckSurvivesAnInteractiveExchange: after a few request/reply
// rounds (what an ssh handshake is) Linux delays ACKs on a plain
// connection, which is what stalled the first session behind sshd's Nagle;
// the wrapped connection still acknowledges at once, and passes the bytes
// through unchanged.
func TestQuickAckSurvivesAnInteractiveExchange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer s.Close()
				b := make([]byte, 64)
				for {
					n, err := s.Read(b)
					if err != nil {
						return
					}
					time.Sleep(time.Millisecond) // a reply that is not immediate, like a server's
					if _, err := s.Write(b[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	exchange := func(c net.Conn) {
		t.Helper()
		b := make([]byte, 64)
		for i := 0; i < 5; i++ {
			msg := []byte{'a' + byte(i)}
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			n, err := c.Read(b)
			if err != nil || n != 1 || b[0] != msg[0] {
				t.Fatalf("round %d: read %q, %v; want %q", i, b[:n], err, msg)
			}
		}
	}
	plain, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	exchange(plain)
	if got := quickAckOn(t, plain); got != 0 {
		t.Logf("the kernel kept a plain connection in quick-ACK mode (%d); the comparison below still holds", got)
	}

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	wrapped := quickAck(nc)
	defer wrapped.Close()
	if _, ok := wrapped.(*quickAckConn); !ok {
		t.Fatalf("quickAck(%T) = %T, want the quick-ACK wrapper", nc, wrapped)
	}
	exchange(wrapped)
	if got := quickAckOn(t, wrapped); got != 1 {
		t.Fatalf("after an interactive exchange TCP_QUICKACK = %d, want 1", got)
	}
}
