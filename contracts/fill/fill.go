// Package fill is where a ${name} reference in an http or tcp step meets
// its value. A value is data wherever it goes: a URL takes it escaped for
// the part it lands in, a header refuses control characters, an address
// must still be host:port. Nothing a value contains can change which host
// a URL names beyond what the template leaves to it.
//
// Lint (package contracts) fills a step with the values known at load (the
// contract's vars after overrides, a for_each item's keys) through the same
// functions the run uses (package steps), so a value the run would refuse
// is a lint error.
package fill

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/contractd/contractd/transports/addr"
)

// ref is a ${name} reference: a var, a secret or a for_each key
// (${item.port}).
var ref = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_.]*)\}`)

// Names returns the names s references, in order, with repeats.
func Names(s string) []string {
	var out []string
	for _, m := range ref.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// Replace returns s with every reference replaced by f(name, reference).
func Replace(s string, f func(name, ref string) string) string {
	return ref.ReplaceAllStringFunc(s, func(m string) string { return f(m[2:len(m)-1], m) })
}

// Expand substitutes ${name} references from vars. Unknown names are left as
// written (lint reports them at load time). It is for names the engine
// looks up (a stage's on=, agent=, via=), never for text that runs.
func Expand(s string, vars map[string]string) string {
	return Replace(s, func(name, m string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// ErrUnset is wrapped when a reference has no value at run time: a secret
// whose environment variable is empty, or a name outside the stage.
var ErrUnset = errors.New("not set")

// fill replaces every reference in s by part(value); the first error wins.
func fill(s string, vals map[string]string, part func(name, v string) (string, error)) (string, error) {
	var firstErr error
	out := ref.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vals[name]
		if !ok {
			if firstErr == nil {
				firstErr = fmt.Errorf("${%s} is %w (a secret comes from the engine's environment)", name, ErrUnset)
			}
			return m
		}
		r, err := part(name, v)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return r
	})
	return out, firstErr
}

// URL parts, in the order they appear.
const (
	urlStart = iota // scheme, or a base URL a var gives whole
	urlAuthority
	urlPath
	urlQuery
	urlFragment
)

// urlState moves through the parts of a URL over the literal text s.
func urlState(state int, s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case state == urlStart && strings.HasPrefix(s[i:], "://"):
			state, i = urlAuthority, i+2
		case state == urlAuthority && c == '/':
			state = urlPath
		case (state == urlAuthority || state == urlPath) && c == '?':
			state = urlQuery
		case state < urlFragment && state != urlStart && c == '#':
			state = urlFragment
		}
	}
	return state
}

var hostPortText = regexp.MustCompile(`^[A-Za-z0-9._~:\[\]%-]+$`)

// URL fills an http step's URL. A value takes the form of the part it
// lands in: at the start it is a base URL (http or https, a host, no
// query or fragment); in the host and port only host and port characters;
// in the path it is escaped segment by segment (a / stays a /); in the
// query and fragment it is escaped whole. The result must be an http or
// https URL with a host. It fails naming the reference that does not fit.
func URL(tmpl string, vals map[string]string) (string, error) {
	var b strings.Builder
	state := urlStart
	last := 0
	for _, m := range ref.FindAllStringSubmatchIndex(tmpl, -1) {
		lit := tmpl[last:m[0]]
		b.WriteString(lit)
		state = urlState(state, lit)
		last = m[1]
		name := tmpl[m[2]:m[3]]
		v, ok := vals[name]
		if !ok {
			return "", fmt.Errorf("URL %s: ${%s} is %w (a secret comes from the engine's environment)", tmpl, name, ErrUnset)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) && state <= urlAuthority {
			return "", fmt.Errorf("URL %s: ${%s} holds a space or control character", tmpl, name)
		}
		switch state {
		case urlStart:
			next := urlState(urlStart, v)
			if next >= urlQuery {
				return "", fmt.Errorf("URL %s: ${%s} is a base URL and must not carry a query or fragment", tmpl, name)
			}
			b.WriteString(v)
			state = next
		case urlAuthority:
			if !hostPortText.MatchString(v) {
				return "", fmt.Errorf("URL %s: ${%s} is in the host part and holds %q, which is not a host or port", tmpl, name, v)
			}
			b.WriteString(v)
		case urlPath:
			segs := strings.Split(v, "/")
			for i, s := range segs {
				segs[i] = url.PathEscape(s)
			}
			b.WriteString(strings.Join(segs, "/"))
		default:
			b.WriteString(url.QueryEscape(v))
		}
	}
	b.WriteString(tmpl[last:])
	out := b.String()
	u, err := url.Parse(out)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", fmt.Errorf("URL %s: not an http or https URL with a host once filled", tmpl)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("URL %s: port %q is not a number in 1..65535", tmpl, p)
		}
	}
	return out, nil
}

// Header fills a header value. A value holding a control character
// (a CR or LF would start another header) is refused.
func Header(name, tmpl string, vals map[string]string) (string, error) {
	return fill(tmpl, vals, func(ref, v string) (string, error) {
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return "", fmt.Errorf("header %s: ${%s} holds a control character", name, ref)
		}
		return v, nil
	})
}

// Body fills a request body: values go in as they are (the body is
// data, read by no shell).
func Body(tmpl string, vals map[string]string) (string, error) {
	return fill(tmpl, vals, func(_, v string) (string, error) { return v, nil })
}

// Addr fills a tcp step's address. The result must be one host:port
// (addr.HostPort: a port in 1..65535, a host name or an IP address).
func Addr(tmpl string, vals map[string]string) (string, error) {
	filled, err := fill(strings.TrimSpace(tmpl), vals, func(_, v string) (string, error) { return v, nil })
	if err != nil {
		return "", fmt.Errorf("address %s: %w", tmpl, err)
	}
	if _, _, err := addr.HostPort(filled); err != nil {
		why := err.Error()
		var ae *addr.Error
		if errors.As(err, &ae) {
			why = ae.Why
		}
		if filled != strings.TrimSpace(tmpl) {
			return "", fmt.Errorf("address %s gives %q: %s", tmpl, filled, why)
		}
		return "", fmt.Errorf("address %q: %s", filled, why)
	}
	return filled, nil
}
