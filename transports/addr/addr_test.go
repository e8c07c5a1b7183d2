package addr

import (
	"errors"
	"strings"
	"testing"
)

func TestSSH(t *testing.T) {
	for _, tc := range []struct {
		in         string
		user, host string
		port       int
		err        string // part of the error; "" means valid
	}{
		{in: "root@h", user: "root", host: "h", port: 22},
		{in: "root@h:2222", user: "root", host: "h", port: 2222},
		{in: "deploy@10.0.0.5:22", user: "deploy", host: "10.0.0.5", port: 22},
		{in: "root@[::1]:2200", user: "root", host: "::1", port: 2200},
		{in: "root@[fe80::1]", user: "root", host: "fe80::1", port: 22},
		{in: "root@my_host.lan", user: "root", host: "my_host.lan", port: 22},
		{in: "h", err: "no @"},
		{in: "@h", err: "the user is empty"},
		{in: "root@", err: "is not a host name"},
		{in: "root@h:0", err: "not a number in 1..65535"},
		{in: "root@h:99999", err: "not a number in 1..65535"},
		{in: "root@h:ssh", err: "not a number in 1..65535"},
		{in: "root@h:", err: "the port is missing"},
		{in: "root@h/x", err: `host "h/x"`},
		{in: "root@a@b", err: "more than one @"},
		{in: "root@h\nx", err: "control character"},
		{in: "root@h\tx", err: "control character"},
		{in: "ro ot@h", err: "space"},
		{in: "root@::1", err: "in brackets"},
		{in: "root@[::1]:abc", err: "not a number"},
		{in: "root@[::1", err: "closing ]"},
		{in: "root@[1.2.3.4]", err: "not an IPv6 address"},
		{in: "root@[::1]x", err: "after the host"},
		{in: "root@-oProxyCommand=x", err: "not a host name"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			u, h, p, err := SSH(tc.in)
			if tc.err != "" {
				if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("SSH(%q) = %q %q %d %v, want an error with %q", tc.in, u, h, p, err, tc.err)
				}
				return
			}
			if err != nil || u != tc.user || h != tc.host || p != tc.port {
				t.Fatalf("SSH(%q) = %q %q %d %v, want %q %q %d", tc.in, u, h, p, err, tc.user, tc.host, tc.port)
			}
		})
	}
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int
		err  string
	}{
		{in: "127.0.0.1:80", host: "127.0.0.1", port: 80},
		{in: "localhost:65535", host: "localhost", port: 65535},
		{in: "[::1]:9000", host: "::1", port: 9000},
		{in: "127.0.0.1", err: "not host:port"},
		{in: "root@127.0.0.1:22", err: "not a host name"},
		{in: "h/x:80", err: "not a host name"},
		{in: ":80", err: "not a host name"},
		{in: "h:0", err: "1..65535"},
		{in: "h:+80", err: "1..65535"},
		{in: "::1:80", err: "not host:port"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			h, p, err := HostPort(tc.in)
			if tc.err != "" {
				if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("HostPort(%q) = %q %d %v, want an error with %q", tc.in, h, p, err, tc.err)
				}
				return
			}
			if err != nil || h != tc.host || p != tc.port {
				t.Fatalf("HostPort(%q) = %q %d %v, want %q %d", tc.in, h, p, err, tc.host, tc.port)
			}
		})
	}
}

func TestContainer(t *testing.T) {
	for _, ok := range []string{"web", "agent-zero", "a0.b_c", "3f2a"} {
		if err := Container(ok); err != nil {
			t.Errorf("Container(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "my app", "-x", ".x", "a/b", "a;b"} {
		if err := Container(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Container(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}
