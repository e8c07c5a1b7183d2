package contracts

import (
	"strings"

	stepfill "github.com/contractd/contractd/contracts/fill"
)

// HTTPStep is the contract half of the http step kind: the block is a
// request (`METHOD URL`, header lines, a blank line, the body), which the
// engine sends; an `Expected:` line judges its http_status.
var HTTPStep = StepKind{
	Name:  KindHTTP,
	Parse: func(blk *StepBlock, st *Step) { st.HTTP = httpRequest(blk) },
	Filled: func(st *Step) []string {
		if st.HTTP == nil {
			return nil
		}
		u := st.HTTP.URL
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "${") {
			return nil // no request line, or a scheme the parser reported
		}
		texts := []string{u}
		for _, v := range st.HTTP.Headers {
			texts = append(texts, v)
		}
		return texts
	},
	Fill: func(st *Step, vals map[string]string) error {
		if _, err := stepfill.URL(st.HTTP.URL, vals); err != nil {
			return err
		}
		for _, name := range sortedKeys(st.HTTP.Headers) {
			if _, err := stepfill.Header(name, st.HTTP.Headers[name], vals); err != nil {
				return err
			}
		}
		return nil
	},
	Command: func(st *Step) string {
		if st.HTTP == nil {
			return strings.TrimRight(st.Script, "\n")
		}
		return st.HTTP.Method + " " + st.HTTP.URL
	},
	Expected: "http_status",
	JSON:     true,
	Values: []Value{
		{"http_status", TypeString, `the answer's status as three digits ("200"); "000" when nothing answered`},
		{"status_code", TypeInt, "the answer's status as a number; 0 when nothing answered"},
		{"body", TypeString, "the answer's body, trailing newlines trimmed"},
		{"stdout", TypeString, "the body, as for an exec step"},
		{"headers", TypeMap, `the answer's headers by canonical name (headers["Content-Type"]), each its first value`},
		{"stderr", TypeString, "why nothing answered (a refused connection, a timeout), else empty"},
		valueDuration, valueTimedOut, valueUnreachable,
	},
	As:    []AsForm{AsText, AsJSON},
	Dials: true,
}

var httpMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// httpRequest reads `METHOD URL`, header lines, a blank line and the body.
func httpRequest(blk *StepBlock) *HTTPRequest {
	req := &HTTPRequest{Method: "GET", Headers: map[string]string{}}
	lines := strings.SplitAfter(blk.Text, "\n")
	off := 0
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		off += len(lines[i])
		i++
	}
	if i >= len(lines) {
		blk.Errorf("http step: the block must start with METHOD URL")
		return req
	}
	first := strings.TrimRight(lines[i], "\r\n")
	fields := strings.Fields(first)
	urlText := first
	switch {
	case len(fields) == 2 && httpMethods[fields[0]]:
		req.Method = fields[0]
		urlText = fields[1]
	case len(fields) == 1:
		urlText = fields[0]
	default:
		blk.ErrorfAt(off, "http step: first line must be METHOD URL, got %q", first)
		return req
	}
	req.URL = blk.Refs(urlText, off+strings.Index(first, urlText))
	if !strings.HasPrefix(req.URL, "http://") && !strings.HasPrefix(req.URL, "https://") && !strings.HasPrefix(req.URL, "${") {
		blk.ErrorfAt(off+strings.Index(first, urlText), "http step: URL must start with http:// or https://, got %q", urlText)
	}
	off += len(lines[i])
	i++
	for ; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r\n")
		if strings.TrimSpace(l) == "" {
			off += len(lines[i])
			i++
			break
		}
		name, val, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(strings.TrimSpace(name), " \t") {
			blk.ErrorfAt(off, "http step: expected a Header: value line, got %q", l)
		} else {
			v := strings.TrimSpace(val)
			req.Headers[strings.TrimSpace(name)] = blk.Refs(v, off+strings.Index(l, v))
		}
		off += len(lines[i])
	}
	if i <= len(lines) {
		body := strings.Join(lines[min(i, len(lines)):], "")
		req.Body = blk.Refs(body, off)
	}
	return req
}
