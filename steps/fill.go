package steps

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// This file is the one place where a ${name} reference meets its value.
// A value is data wherever it goes: a shell reads it from a variable (it
// is never spliced into command text), a URL takes it escaped for the part
// it lands in, a header refuses control characters, an address must still
// be host:port. Nothing a value contains can change which command runs or
// which host a URL names beyond what the template leaves to it.

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_.]*)\}`)

// Expand substitutes ${name} references from vars. Unknown names are left as
// written (lint reports them at load time). It is for names the engine
// looks up (a stage's on=, agent=, via=), never for text that runs.
func Expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// ShellQuote quotes s for POSIX sh as one word. It is the only function
// that writes a value into shell text, and it only ever writes the right
// side of an assignment (see Script).
func ShellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !plainRune(r) }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plainRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r)
}

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// shellVar is the shell variable a reference reads: the name itself when
// it is a shell identifier, else a name made for it (${item.port} reads
// CONTRACTD_item_port; CONTRACTD_ is reserved, so no var can take it).
func shellVar(name string) string {
	if shellName.MatchString(name) {
		return name
	}
	return "CONTRACTD_" + strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// Script returns what a shell reads for a probe script or a repair
// command: every var assigned to a shell variable of its own name (values
// single-quoted by ShellQuote; reserved names are never assigned), then
// text as written, except that a reference whose name is not a shell
// identifier (${item.port}) is renamed to the variable made for it. The
// shell expands ${name} itself and never parses a value as syntax, in
// double quotes or not. Variables are not exported: no program the script
// starts sees them, so no value can reach one through its environment
// (LD_PRELOAD, PAGER, …).
func Script(text string, vars map[string]string) string {
	var b strings.Builder
	names := make([]string, 0, len(vars))
	for k := range vars {
		if shellName.MatchString(k) && !contracts.ReservedVarName(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s=%s\n", k, ShellQuote(vars[k]))
	}
	made := map[string]bool{}
	body := varRef.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vars[name]
		if !ok || shellName.MatchString(name) {
			return m
		}
		sv := shellVar(name)
		if !made[sv] {
			made[sv] = true
			fmt.Fprintf(&b, "%s=%s\n", sv, ShellQuote(v))
		}
		return "${" + sv + "}"
	})
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
	return b.String()
}

// ShowCommand renders a repair command for people (reports, `why`, logs):
// a reference whose value is plain (letters, digits, -_./:=@,+%) shows the
// value in place; any other reference stays as written and its value
// follows, quoted, so the line shows what runs: `echo ${v} (v='a; b')`.
func ShowCommand(text string, vars map[string]string) string {
	var bound []string
	seen := map[string]bool{}
	out := varRef.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			return m
		}
		if v != "" && ShellQuote(v) == v {
			return v
		}
		if !seen[name] {
			seen[name] = true
			bound = append(bound, name+"="+ShellQuote(v))
		}
		return m
	})
	if len(bound) > 0 {
		out += " (" + strings.Join(bound, " ") + ")"
	}
	return out
}

// WithSecrets returns vars plus the named secrets' values, for the native
// probes, which fill ${SECRET} in a request at run time.
func WithSecrets(vars, secrets map[string]string) map[string]string {
	if len(secrets) == 0 {
		return vars
	}
	m := make(map[string]string, len(vars)+len(secrets))
	for k, v := range vars {
		m[k] = v
	}
	for k, v := range secrets {
		m[k] = v
	}
	return m
}

// errUnset is wrapped when a reference has no value at run time: a secret
// whose environment variable is empty, or a name outside the stage.
var errUnset = errors.New("not set")

// fill replaces every reference in s by part(value); the first error wins.
func fill(s string, vals map[string]string, part func(name, v string) (string, error)) (string, error) {
	var firstErr error
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vals[name]
		if !ok {
			if firstErr == nil {
				firstErr = fmt.Errorf("${%s} is %w (a secret comes from the engine's environment)", name, errUnset)
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

// FillURL fills an http step's URL. A value takes the form of the part it
// lands in: at the start it is a base URL (http or https, a host, no
// query or fragment); in the host and port only host and port characters;
// in the path it is escaped segment by segment (a / stays a /); in the
// query and fragment it is escaped whole. The result must be an http or
// https URL with a host. It fails naming the reference that does not fit.
func FillURL(tmpl string, vals map[string]string) (string, error) {
	var b strings.Builder
	state := urlStart
	last := 0
	for _, m := range varRef.FindAllStringSubmatchIndex(tmpl, -1) {
		lit := tmpl[last:m[0]]
		b.WriteString(lit)
		state = urlState(state, lit)
		last = m[1]
		name := tmpl[m[2]:m[3]]
		v, ok := vals[name]
		if !ok {
			return "", fmt.Errorf("URL %s: ${%s} is %w (a secret comes from the engine's environment)", tmpl, name, errUnset)
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
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("URL %s: not an http or https URL with a host once filled", tmpl)
	}
	return out, nil
}

// FillHeader fills a header value. A value holding a control character
// (a CR or LF would start another header) is refused.
func FillHeader(name, tmpl string, vals map[string]string) (string, error) {
	return fill(tmpl, vals, func(ref, v string) (string, error) {
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return "", fmt.Errorf("header %s: ${%s} holds a control character", name, ref)
		}
		return v, nil
	})
}

// FillBody fills a request body: values go in as they are (the body is
// data, read by no shell).
func FillBody(tmpl string, vals map[string]string) (string, error) {
	return fill(tmpl, vals, func(_, v string) (string, error) { return v, nil })
}

// FillAddr fills a tcp step's address. The result must be one host:port
// with a port in 1..65535 and a host of host characters only.
func FillAddr(tmpl string, vals map[string]string) (string, error) {
	addr, err := fill(strings.TrimSpace(tmpl), vals, func(_, v string) (string, error) { return v, nil })
	if err != nil {
		return "", fmt.Errorf("address %s: %w", tmpl, err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %s: %q is not host:port", tmpl, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("address %s: port %q is not a number in 1..65535", tmpl, port)
	}
	if host == "" || !hostPortText.MatchString(host) {
		return "", fmt.Errorf("address %s: host %q is not a host name or address", tmpl, host)
	}
	return addr, nil
}
