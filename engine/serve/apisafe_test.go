package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// recordingOpener is the real pool's opener that also records every
// script any transport was asked to run.
type recordingOpener struct {
	engine.PoolOpener
	mu      sync.Mutex
	scripts []string
}

func (o *recordingOpener) Open(c *contracts.Contract, target string) (transports.Transport, error) {
	tr, err := o.PoolOpener.Open(c, target)
	if err != nil {
		return nil, err
	}
	return &recordingTransport{Transport: tr, o: o}, nil
}

func (o *recordingOpener) ran() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.scripts)
}

type recordingTransport struct {
	transports.Transport
	o *recordingOpener
}

func (t *recordingTransport) Exec(ctx context.Context, cmd transports.Command) (transports.Result, error) {
	t.o.mu.Lock()
	t.o.scripts = append(t.o.scripts, cmd.Script)
	t.o.mu.Unlock()
	return t.Transport.Exec(ctx, cmd)
}

func (t *recordingTransport) ExecBatch(ctx context.Context, cmds []transports.Command) ([]transports.Result, error) {
	t.o.mu.Lock()
	for _, c := range cmds {
		t.o.scripts = append(t.o.scripts, c.Script)
	}
	t.o.mu.Unlock()
	return t.Transport.ExecBatch(ctx, cmds)
}

const apiContract = `---
kind: responsibility
name: %s
runtime_contract: 2
agent: %s
%s
schedule: {every: 1h, on_start: false}
commands: [%s-status]
guards: {debounce: 1h}
vars:
  flag: %s
  marks: %s
---

## Execution

### Flag {#flag agent=%s}

` + "```sh {id=probe timeout=10s}\ntail -n 1 \"${flag}\"\n```" + `

Expected: ` + "`up`" + `

| Condition | Action |
|---|---|
| ` + "`probe.stdout != \"up\"`" + ` | ` + "`echo repaired >> \"${marks}\"`" + ` |
`

// TestAPIRunsOnlyDeclaredRepairsInsideTheirGuards sends every request of
// the API (read from its route table, so a new one is covered) with the
// token, with hostile path values, query strings and bodies that try to
// name a command, a var, an inventory or a shell: the only scripts any
// transport ever ran are the contracts' probes and their one declared
// repair, which ran once (its debounce held every later run), never for
// the report-only agent, and no canary file appeared.
func TestAPIRunsOnlyDeclaredRepairsInsideTheirGuards(t *testing.T) {
	root := t.TempDir()
	canary := filepath.Join(root, "canary")
	dir := t.TempDir()
	for _, c := range []struct{ name, extra string }{{"guarded", ""}, {"watched", "report_only_agents: [watched]"}} {
		flag := filepath.Join(root, c.name+".flag")
		os.WriteFile(flag, []byte("down\n"), 0o644)
		src := fmt.Sprintf(apiContract, c.name, c.name, c.extra, c.name, flag, filepath.Join(root, c.name+".marks"), c.name)
		if err := os.WriteFile(filepath.Join(dir, c.name+".md"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok\n"), 0o600)
	pool := transports.NewPool(transports.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	rec := &recordingOpener{PoolOpener: engine.PoolOpener{Pool: pool}}
	state := t.TempDir()
	eng, err := engine.New(engine.Options{StateDir: state, Opener: rec, GraceOverride: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, TokenFile: tokenFile, Runner: eng,
		Notify: func(ctx context.Context, c *contracts.Contract, text string) error { return nil }})

	// What a shell or a careless handler would run.
	hostile := []string{
		"$(touch " + canary + ")", "`touch " + canary + "`", "guarded;touch " + canary, "guarded && touch " + canary,
		"../../../bin/sh", "guarded\ntouch " + canary, "%s%s%n", "guarded-status;id",
	}
	values := append([]string{"guarded", "watched", "guarded-status", "nosuch"}, hostile...)
	bodies := []string{
		"",
		`{"command": "touch ` + canary + `", "action": "touch ` + canary + `", "script": "touch ` + canary + `"}`,
		`{"vars": {"marks": "` + canary + `"}, "inventory": "/etc/passwd", "dry_run": false, "force": true}`,
		`{"agent": "$(touch ` + canary + `)", "for": "1h", "reason": "` + "`touch " + canary + "`" + `"}`,
		`{"for": "1h", "reason": "$(touch ` + canary + `)"}`,
		`{"end": true}`,
	}
	query := "?command=" + url.QueryEscape("touch "+canary) + "&var=" + url.QueryEscape("marks="+canary) + "&inventory=/etc/passwd&dry_run=false"
	requests := 0
	for _, rt := range h.d.routes() {
		method, pattern, ok := strings.Cut(rt.pattern, " ")
		if !ok {
			method, pattern = http.MethodPost, rt.pattern // any method
		}
		pattern = strings.TrimSuffix(pattern, "{$}")
		for _, v := range values {
			path := strings.NewReplacer("{name}", url.PathEscape(v), "{command}", url.PathEscape(v)).Replace(pattern)
			for _, m := range []string{method, http.MethodPost, http.MethodPut, http.MethodDelete} {
				for _, body := range bodies {
					req, _ := http.NewRequest(m, h.base+path+query, strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer tok")
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatalf("%s %s: %v", m, path, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					requests++
				}
			}
			if !strings.Contains(rt.pattern, "{") {
				break // no path value to vary
			}
		}
	}

	if _, err := os.Stat(canary); err == nil {
		t.Fatalf("a request created %s: something ran that no contract declares", canary)
	}
	// Every script a transport ran is one the contracts declare.
	declared := map[string]string{}
	for _, name := range []string{"guarded", "watched"} {
		c, ds := contracts.LoadFile(filepath.Join(dir, name+".md"), contracts.Options{})
		if c == nil {
			t.Fatal(ds)
		}
		vars := c.StageVars(nil)
		for _, st := range c.Stages {
			for _, s := range st.Steps {
				declared[steps.ExecCommand(s, vars, nil, 0).Script] = name + " probe"
			}
			for _, a := range st.Actions {
				declared[steps.Script(a.Action, vars)] = name + " repair"
			}
		}
	}
	ran := rec.ran()
	repairs := map[string]int{}
	for _, s := range ran {
		what, ok := declared[s]
		if !ok {
			t.Errorf("a transport ran a script no contract declares:\n%s", s)
		}
		repairs[what]++
	}
	if repairs["guarded repair"] != 1 || repairs["watched repair"] != 0 {
		t.Errorf("repairs ran: guarded %d, watched (report-only) %d; want 1 and 0, after %d requests", repairs["guarded repair"], repairs["watched repair"], requests)
	}
	if repairs["guarded probe"] < 2 {
		t.Errorf("guarded was probed %d times: the run requests did not run it", repairs["guarded probe"])
	}
	b, _ := os.ReadFile(filepath.Join(root, "guarded.marks"))
	if string(b) != "repaired\n" {
		t.Errorf("guarded.marks = %q: want the one declared repair", b)
	}
	// And the guards said so: every later run held the repair back.
	rep, err := h.d.RunNow("guarded")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Actions {
		if a.Kind == engine.KindRepair && a.Status != guard.StatusPending && a.Status != guard.StatusBlocked {
			t.Errorf("a run after the repair: %s (%s); want it held by its guards", a.Status, a.Reason)
		}
	}
}
