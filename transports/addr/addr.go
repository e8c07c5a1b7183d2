// Package addr is the syntax of what a contract's targets and probes name:
// an ssh login (user@host[:port]), a container, a host:port. Lint (package
// contracts) and the run (transports, steps) read them through these
// functions only, so an address lint accepts is one the run can open, and
// one the run would refuse is a lint error at its position.
//
// It imports nothing of the project: every other package may use it.
package addr

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// ErrSyntax matches every error of this package (errors.Is).
var ErrSyntax = errors.New("bad address")

// Error is a refused address: what kind of address, the text, and why.
type Error struct {
	Kind string // "ssh address", "address", "container name"
	Text string
	Why  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s %q: %s", e.Kind, e.Text, e.Why) }

// Is makes errors.Is(err, ErrSyntax) hold.
func (e *Error) Is(target error) bool { return target == ErrSyntax }

// hostName is a DNS name or an IPv4 address: letters, digits, '.', '-' and
// '_' (some resolvers and /etc/hosts allow it), not starting with '-' or '.'.
var hostName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// SSH splits an ssh address: "user@host", "user@host:port", or an IPv6
// host in brackets ("user@[::1]:2222"). The port is 22 when absent. It
// fails, wrapping ErrSyntax, when the text holds a space or a control
// character, has no '@' or more than one, has an empty user, a host that
// is not a host name or a bracketed IPv6 address (a '/' or '%' is never
// part of one), or a port that is not a number in 1..65535.
func SSH(s string) (user, host string, port int, err error) {
	bad := func(why string) (string, string, int, error) {
		return "", "", 0, &Error{Kind: "ssh address", Text: s, Why: why}
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return bad("holds a space or a control character")
	}
	user, hp, ok := strings.Cut(s, "@")
	switch {
	case !ok:
		return bad("no @ between user and host")
	case user == "":
		return bad("the user is empty")
	case strings.Contains(hp, "@"):
		return bad("more than one @ (one user, one host)")
	}
	host, port, err = hostPort(hp, 22)
	if err != nil {
		return bad(err.Error())
	}
	return user, host, port, nil
}

// HostPort splits "host:port" ("[::1]:80" for IPv6) for a tcp probe. It
// fails, wrapping ErrSyntax, when the port is missing or not a number in
// 1..65535, or the host is not a host name or an IP address.
func HostPort(s string) (host string, port int, err error) {
	if _, _, splitErr := net.SplitHostPort(s); splitErr != nil {
		return "", 0, &Error{Kind: "address", Text: s, Why: "not host:port"}
	}
	host, port, err = hostPort(s, 0)
	if err != nil {
		return "", 0, &Error{Kind: "address", Text: s, Why: err.Error()}
	}
	return host, port, nil
}

// hostPort reads host[:port] or [v6][:port]; def is the port when none is
// written (0: a port is required).
func hostPort(hp string, def int) (string, int, error) {
	host, portText := hp, ""
	switch {
	case strings.HasPrefix(hp, "["):
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", 0, errors.New("an IPv6 host needs its closing ]")
		}
		host = hp[1:end]
		rest := hp[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", 0, fmt.Errorf("unexpected %q after the host", rest)
			}
			portText = p
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", 0, fmt.Errorf("host %q in brackets is not an IPv6 address", host)
		}
	case strings.Count(hp, ":") > 1:
		return "", 0, fmt.Errorf("host %q: write an IPv6 address in brackets ([::1])", hp)
	default:
		if h, p, ok := strings.Cut(hp, ":"); ok {
			host, portText = h, p
		}
		if !hostName.MatchString(host) {
			return "", 0, fmt.Errorf("host %q is not a host name or address", host)
		}
	}
	if portText == "" && (def == 0 || strings.HasSuffix(hp, ":")) {
		return "", 0, errors.New("the port is missing")
	}
	port := def
	if portText != "" {
		n, err := strconv.Atoi(portText)
		if err != nil || n < 1 || n > 65535 || portText[0] == '+' {
			return "", 0, fmt.Errorf("port %q is not a number in 1..65535", portText)
		}
		port = n
	}
	return host, port, nil
}

// containerName is what the Docker engine accepts as a container name.
var containerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Container checks a docker container name (or id). It fails, wrapping
// ErrSyntax, for an empty name or one with a character Docker does not
// allow in a name (letters, digits, '_', '.', '-', starting with a letter
// or digit).
func Container(name string) error {
	if !containerName.MatchString(name) {
		return &Error{Kind: "container name", Text: name, Why: "want letters, digits, _ . - (starting with a letter or digit)"}
	}
	return nil
}
