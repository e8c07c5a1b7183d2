package fill

import (
	"strings"
	"testing"
)

// A value takes the form of the URL part it lands in; one that would change
// the URL's host or shape is refused.
func TestURL(t *testing.T) {
	vals := map[string]string{
		"base":  "http://127.0.0.1:8080",
		"port":  "9001",
		"host":  "[::1]",
		"sneak": "80@evil.example",
		"path":  "api/v 1?x#y",
		"q":     "a b&c=d#e",
		"query": "http://h/?x=1",
		"space": "http://h /",
		"ftp":   "ftp://h",
		"big":   "99999",
	}
	for _, tc := range []struct{ name, tmpl, want, err string }{
		{"base URL", "${base}/check", "http://127.0.0.1:8080/check", ""},
		{"port", "http://127.0.0.1:${port}/", "http://127.0.0.1:9001/", ""},
		{"ipv6 host", "http://${host}:${port}/", "http://[::1]:9001/", ""},
		{"path is escaped by segment", "${base}/${path}", "http://127.0.0.1:8080/api/v%201%3Fx%23y", ""},
		{"query is escaped", "${base}/s?q=${q}&n=1", "http://127.0.0.1:8080/s?q=a+b%26c%3Dd%23e&n=1", ""},
		{"userinfo in the port is refused", "http://127.0.0.1:${sneak}/", "", "not a host or port"},
		{"a base URL with a query is refused", "${query}/x", "", "must not carry a query"},
		{"a space in a base URL is refused", "${space}", "", "space or control"},
		{"not http", "${ftp}/x", "", "not an http or https URL"},
		{"a port out of range", "http://127.0.0.1:${big}/", "", `port "99999" is not a number in 1..65535`},
		{"unset", "${base}/?t=${TOKEN}", "", "${TOKEN} is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := URL(tc.tmpl, vals)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("URL(%q) = %q, %v; want an error with %q", tc.tmpl, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("URL(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
			}
		})
	}
}

func TestFillHeaderAndAddr(t *testing.T) {
	vals := map[string]string{"tok": "abc", "crlf": "abc\r\nX-Evil: 1", "host": "127.0.0.1", "port": "80", "bad": "1 evil"}
	if got, err := Header("Authorization", "Bearer ${tok}", vals); err != nil || got != "Bearer abc" {
		t.Errorf("header: %q %v", got, err)
	}
	if _, err := Header("Authorization", "Bearer ${crlf}", vals); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a CRLF in a header value was accepted: %v", err)
	}
	if got, err := Addr("${host}:${port}", vals); err != nil || got != "127.0.0.1:80" {
		t.Errorf("addr: %q %v", got, err)
	}
	for _, tmpl := range []string{"${host}:${bad}", "${bad}:80", "${host}", "${host}:0"} {
		if got, err := Addr(tmpl, vals); err == nil {
			t.Errorf("Addr(%q) = %q, want an error", tmpl, got)
		}
	}
}
