package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// received is what the test's HTTP server saw.
type received struct {
	method, query, auth, body string
}

// recorder is a real HTTP server on loopback that records every request
// and answers 503 with the Authorization header echoed in its body, the
// way a careless API's error page would.
func recorder(t *testing.T) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Method, r.URL.Query().Get("token"), r.Header.Get("Authorization"), string(b)})
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "denied: %s", r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

const secretContract = `---
name: h6
runtime_contract: 2
secrets: [H6_TOKEN]
vars:
  base: %s
  refused: %s
---

# Secrets

## Execution

### API {#api agent=api}

` + "```http {id=call}\nPOST ${base}/hook?token=${H6_TOKEN}\nAuthorization: Bearer ${H6_TOKEN}\nContent-Type: application/json\n\n{\"token\": \"${H6_TOKEN}\"}\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`http_status`" + ` | ` + "`\"200\"`" + ` | ` + "`it != \"200\"`" + ` |
| ` + "`stdout`" + ` | ` + "`ok`" + ` | ` + "`it != \"ok\"`" + ` |

` + "```http {id=down}\nGET http://${refused}/?token=${H6_TOKEN}\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stderr`" + ` | ` + "`\"\"`" + ` | ` + "`it != \"\"`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`call.http_status == \"503\"`" + ` | ` + "`echo \"token $H6_TOKEN\" >&2; exit 3`" + ` |
`

// An http step's ${SECRET} is filled from the environment at run time in
// the URL, the headers and the body, and the secret stays out of every
// output: the report (text and JSON), the log, why, history and the state
// files. On 02630f2 the server got the literal text ${H6_TOKEN}.
func TestSecretsFillHTTPStepsAndStayRedacted(t *testing.T) {
	const token = "s3cr3t/+&=Tok en"
	t.Setenv("H6_TOKEN", token)
	srv, got := recorder(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	path := filepath.Join(dir, "h6.md")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(secretContract, srv.URL, freeLoopback(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	var outputs []string
	code, out, errs := runMain(t, "contractd", "run", "--verify-grace", "1ms", "--state-dir", state, path)
	if code != 0 {
		t.Fatalf("run exit %d:\n%s\n%s", code, out, errs)
	}
	outputs = append(outputs, "run:\n"+out, "run log:\n"+errs)

	reqs := got()
	if len(reqs) < 1 {
		t.Fatal("the server got no request")
	}
	r := reqs[0]
	if r.method != "POST" || r.auth != "Bearer "+token || r.query != token || r.body != `{"token": "`+token+`"}`+"\n" {
		t.Fatalf("the server got %+v; want the secret in the header, the query and the body", r)
	}

	_, jsonOut, _ := runMain(t, "contractd", "run", "--json", "--quiet", "--verify-grace", "1ms", "--state-dir", state, path)
	outputs = append(outputs, "run --json:\n"+jsonOut)
	for _, args := range [][]string{{"why"}, {"history"}, {"history", "--json"}, {"status"}, {"status", "--json"}} {
		_, o, e := runMain(t, append(append([]string{"contractd"}, args...), "--state-dir", state, "h6")...)
		outputs = append(outputs, strings.Join(args, " ")+":\n"+o+e)
	}
	filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			outputs = append(outputs, p+":\n"+string(b))
		}
		return nil
	})
	forms := []string{token, url.QueryEscape(token), url.PathEscape(token), "s3cr3t"}
	for _, o := range outputs {
		for _, f := range forms {
			if strings.Contains(o, f) {
				t.Errorf("the secret (as %q) leaks in %s", f, o)
			}
		}
	}
	all := strings.Join(outputs, "\n")
	for _, want := range []string{"denied: Bearer ***", "${refused}/?token=${H6_TOKEN}", "exit code 3: token ***"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in the outputs (redacted, not dropped):\n%s", want, all)
		}
	}
}

// A secret that is not set fails the step that needs it, by name: the
// server never gets the literal ${H6_TOKEN}.
func TestUnsetSecretFailsTheHTTPStepByName(t *testing.T) {
	t.Setenv("H6_TOKEN", "")
	srv, got := recorder(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "h6.md")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(secretContract, srv.URL, freeLoopback(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMain(t, "contractd", "run", "--dry-run", "--state-dir", filepath.Join(dir, "state"), path)
	if code != 0 {
		t.Fatalf("run exit %d:\n%s\n%s", code, out, errs)
	}
	if n := len(got()); n != 0 {
		t.Fatalf("the server got %d requests without the secret: %+v", n, got())
	}
	if !strings.Contains(out, "${H6_TOKEN} is not set") {
		t.Fatalf("the report does not name the missing secret:\n%s", out)
	}
}

// freeLoopback is a loopback host:port nothing listens on.
func freeLoopback(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	return addr
}
