package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/transports"
)

// stateContract keeps a flag file "up": its probe reads the last line,
// its one repair appends "up" (so the file counts the repairs). Both
// contracts of the test page the same two routes.
const stateContract = `---
kind: responsibility
name: %s
runtime_contract: 2
agent: %s
schedule: {every: 1h, on_start: false}
guards: {debounce: 0s}
vars:
  flag: %s
notify:
  - {webhook: {url: %q, retries: 0}}
  - {log: {path: %q}}
---

## Execution

### Flag {#flag agent=%s}

` + "```sh {id=probe timeout=10s}\ntail -n 1 \"${flag}\"\n```" + `

Expected: ` + "`up`" + `

| Condition | Action |
|---|---|
| ` + "`probe.stdout != \"up\"`" + ` | ` + "`echo up >> \"${flag}\"`" + ` |
`

// TestUnwritableStateDir runs serve with the real engine on a state dir
// that becomes a read-only bind mount, then writable, then a full tmpfs,
// then writable again: while it cannot be written every contract is still
// probed and reported, nothing is repaired, each route hears once per
// condition (across contracts), /metrics, /healthz, /contracts and the
// page name the cause; the first run that can write repairs, once, and
// each route hears that it is over.
func TestUnwritableStateDir(t *testing.T) {
	need.Root(t, "mounting a read-only bind mount and a tmpfs")
	mount := need.Command(t, "mount", "mount")
	sh := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	root := t.TempDir()
	backing, state := filepath.Join(root, "backing"), filepath.Join(root, "state")
	os.Mkdir(backing, 0o700)
	os.Mkdir(state, 0o700)
	// A small tmpfs behind a bind mount: remounting the bind read-only is
	// the read-only case, filling the tmpfs the full one.
	sh(mount, "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", backing)
	t.Cleanup(func() { exec.Command("umount", "-l", backing).Run() })
	sh(mount, "--bind", backing, state)
	t.Cleanup(func() { exec.Command("umount", "-l", state).Run() })

	var mu sync.Mutex
	var hooks []notify.Message
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		hooks = append(hooks, m)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	pages := filepath.Join(root, "pages.log")
	stateMsgs := func(kind string) (hook int, log int, other int) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range hooks {
			switch {
			case m.Condition == stateConditionName && m.Kind == kind:
				hook++
			case m.Condition != stateConditionName:
				other++
			}
		}
		b, _ := os.ReadFile(pages)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "["+kind+"]") && (strings.Contains(l, "cannot be written") || strings.Contains(l, "can be written again")) {
				log++
			}
		}
		return hook, log, other
	}

	dir := t.TempDir()
	flags := map[string]string{}
	for _, name := range []string{"alpha", "beta"} {
		flags[name] = filepath.Join(root, name+".flag")
		os.WriteFile(flags[name], []byte("up\n"), 0o644)
		src := fmt.Sprintf(stateContract, name, name, flags[name], hook.URL, pages, name)
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repairs := func(name string) int {
		b, _ := os.ReadFile(flags[name])
		return strings.Count(string(b), "up\n") - 1
	}
	down := func(name string) {
		f, _ := os.OpenFile(flags[name], os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString("down\n")
		f.Close()
	}
	pool := transports.NewPool(transports.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	eng, err := engine.New(engine.Options{StateDir: state, Opener: engine.PoolOpener{Pool: pool}, GraceOverride: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: eng})
	run := func(name string) *engine.Report {
		t.Helper()
		rep, err := h.d.RunNow(name)
		if err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
		return rep
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// unwritable checks one run of each contract while the state cannot
	// be written for cause.
	unwritable := func(cause string) {
		t.Helper()
		down("alpha")
		down("beta")
		for _, name := range []string{"alpha", "beta", "alpha"} {
			rep := run(name)
			if rep.OverallSeverity.String() != "critical" || !strings.Contains(rep.StateUnwritable, cause) {
				t.Fatalf("%s: severity %s, state_unwritable %q: want it probed (critical) and the cause %q", name, rep.OverallSeverity, rep.StateUnwritable, cause)
			}
			for _, a := range rep.Actions {
				if a.Kind == engine.KindRepair && (a.Status != guard.StatusBlocked || a.Guard != "state") {
					t.Errorf("%s: repair %s %s: want it blocked by state", name, a.Status, a.Guard)
				}
			}
		}
		if repairs("alpha") != 1 || repairs("beta") != 0 {
			t.Errorf("repairs alpha %d beta %d: something was repaired while the state could not be written", repairs("alpha"), repairs("beta"))
		}
		if hk, lg, other := stateMsgs(notify.KindEscalate); hk != 1 || lg != 1 || other != 1 {
			t.Errorf("webhook heard %d, log %d state messages (want one each for %q), %d others (want only alpha's first repair)", hk, lg, cause, other)
		}
		if m := get("/metrics"); !strings.Contains(m, "contractd_state_writable 0") || !strings.Contains(m, cause) {
			t.Errorf("/metrics lacks the state: %s", grepLines(m, "contractd_state"))
		}
		for _, path := range []string{"/healthz", "/contracts", "/"} {
			if body := get(path); !strings.Contains(body, cause) {
				t.Errorf("%s does not name %q:\n%s", path, cause, body)
			}
		}
	}
	// writable checks the first run once the state can be written again.
	writable := func(resolvedSoFar int) {
		t.Helper()
		before := repairs("alpha")
		rep := run("alpha")
		if rep.StateUnwritable != "" || repairs("alpha") != before+1 || rep.OverallSeverity.String() != "healthy" {
			t.Fatalf("after recovery: state_unwritable %q, repairs %d→%d, severity %s: want one repair, verified", rep.StateUnwritable, before, repairs("alpha"), rep.OverallSeverity)
		}
		if rep := run("alpha"); repairs("alpha") != before+1 {
			t.Errorf("the next run repaired again: %+v", rep.Actions)
		}
		if hk, lg, _ := stateMsgs(notify.KindResolved); hk != resolvedSoFar || lg != resolvedSoFar {
			t.Errorf("resolved messages: webhook %d, log %d; want %d each", hk, lg, resolvedSoFar)
		}
		// The resolve says when the problem began, as the escalation did.
		mu.Lock()
		var opened, resolvedOpened time.Time
		for _, m := range hooks {
			switch {
			case m.Condition == stateConditionName && m.Kind == notify.KindEscalate:
				opened = m.OpenedAt
			case m.Condition == stateConditionName && m.Kind == notify.KindResolved:
				resolvedOpened = m.OpenedAt
			}
		}
		mu.Unlock()
		if !resolvedOpened.Equal(opened) {
			t.Errorf("the resolve says the problem began %s, the escalation %s", resolvedOpened, opened)
		}
		if m := get("/metrics"); !strings.Contains(m, "contractd_state_writable 1") || strings.Contains(m, "contractd_state_unwritable_info{") {
			t.Errorf("/metrics still shows the state: %s", grepLines(m, "contractd_state"))
		}
	}

	down("alpha")
	if rep := run("alpha"); repairs("alpha") != 1 || rep.StateUnwritable != "" {
		t.Fatalf("a first run on a writable state dir: %d repairs, %q", repairs("alpha"), rep.StateUnwritable)
	}

	sh(mount, "-o", "remount,bind,ro", state)
	unwritable("read-only file system")
	sh(mount, "-o", "remount,bind,rw", state)
	writable(1)

	// Full: fill the tmpfs to the last byte.
	down("beta")
	run("beta") // repaired, while it still can be
	mu.Lock()
	hooks = nil
	mu.Unlock()
	os.Remove(pages)
	filler := filepath.Join(state, "filler")
	exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").Run() // ends with ENOSPC
	beta := repairs("beta")
	down("alpha")
	down("beta")
	for _, name := range []string{"alpha", "beta", "alpha"} {
		if rep := run(name); !strings.Contains(rep.StateUnwritable, "no space left on device") {
			t.Fatalf("%s on a full state dir: %q", name, rep.StateUnwritable)
		}
	}
	if hk, lg, other := stateMsgs(notify.KindEscalate); hk != 1 || lg != 1 || other != 0 {
		t.Errorf("full: webhook %d, log %d state messages, %d others; want 1, 1, 0", hk, lg, other)
	}
	if repairs("beta") != beta {
		t.Errorf("beta was repaired on a full state dir")
	}
	os.Remove(filler)
	writable(1)
	if rep := run("beta"); repairs("beta") != beta+1 || rep.StateUnwritable != "" {
		t.Errorf("beta after recovery: repairs %d, want %d", repairs("beta"), beta+1)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
