package steps

import (
	"os/exec"
	"strings"
	"testing"
)

// A script is the assignments, then the text as written; the shell it runs
// in reads every value intact and runs none.
func TestScriptPassesValuesAsShellVariables(t *testing.T) {
	vars := map[string]string{
		"v":         "a'b\"c $(touch /nonexistent/x) `id` ; | && \n ${HOME}",
		"item.port": "90'01",
		"port":      "90'01",
		"PATH":      "/nowhere", // reserved: never assigned
		"bad-name":  "x",
	}
	script := Script(`printf '%s|%s|%s' "${v}" "${item.port}" "$port"`, vars)
	if strings.Contains(script, "PATH=") || strings.Contains(script, "bad-name") {
		t.Fatalf("a reserved or invalid name was assigned:\n%s", script)
	}
	if !strings.Contains(script, `"${CONTRACTD_item_port}"`) {
		t.Fatalf("${item.port} not renamed to its variable:\n%s", script)
	}
	for _, shell := range []string{"sh", "bash"} {
		out, err := exec.Command(shell, "-c", script).Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", shell, err, script)
		}
		if want := vars["v"] + "|90'01|90'01"; string(out) != want {
			t.Errorf("%s printed %q, want %q", shell, out, want)
		}
	}
}

func TestShowCommand(t *testing.T) {
	vars := map[string]string{"unit": "worker@9001", "v": "x; rm -rf /", "empty": ""}
	for _, tc := range []struct{ in, want string }{
		{"systemctl restart ${unit}", "systemctl restart worker@9001"},
		{"echo ${v} ${v}", "echo ${v} ${v} (v='x; rm -rf /')"},
		{`x "${empty}"`, `x "${empty}" (empty='')`},
		{"curl -H ${API_TOKEN}", "curl -H ${API_TOKEN}"},
	} {
		if got := ShowCommand(tc.in, vars); got != tc.want {
			t.Errorf("ShowCommand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A value takes the form of the URL part it lands in; one that would change
// the URL's host or shape is refused.
func TestFillURL(t *testing.T) {
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
		{"unset", "${base}/?t=${TOKEN}", "", "${TOKEN} is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FillURL(tc.tmpl, vals)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FillURL(%q) = %q, %v; want an error with %q", tc.tmpl, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FillURL(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
			}
		})
	}
}

func TestFillHeaderAndAddr(t *testing.T) {
	vals := map[string]string{"tok": "abc", "crlf": "abc\r\nX-Evil: 1", "host": "127.0.0.1", "port": "80", "bad": "1 evil"}
	if got, err := FillHeader("Authorization", "Bearer ${tok}", vals); err != nil || got != "Bearer abc" {
		t.Errorf("header: %q %v", got, err)
	}
	if _, err := FillHeader("Authorization", "Bearer ${crlf}", vals); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a CRLF in a header value was accepted: %v", err)
	}
	if got, err := FillAddr("${host}:${port}", vals); err != nil || got != "127.0.0.1:80" {
		t.Errorf("addr: %q %v", got, err)
	}
	for _, tmpl := range []string{"${host}:${bad}", "${bad}:80", "${host}", "${host}:0"} {
		if got, err := FillAddr(tmpl, vals); err == nil {
			t.Errorf("FillAddr(%q) = %q, want an error", tmpl, got)
		}
	}
}
