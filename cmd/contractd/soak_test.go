package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/wait"
)

// soakContract is one of the soak's services: NAME.state is "down" until
// its repair writes "up"; the repair appends "start NODE" to NAME.repairs
// and takes a second; every message goes to pages.jsonl as one JSON line.
func soakContract(name string) string {
	return `---
name: ` + name + `
runtime_contract: 2
schedule: {every: 1s, on_start: true}
guards:
  debounce: 2s
  grace: 300ms
vars:
  dir: /nonexistent
  node: ""
notify:
  - {log: {path: "${dir}/pages.jsonl", format: json}}
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe timeout=10s}\ncat \"${dir}/" + name + ".state\" 2>/dev/null || echo down\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`probe.stdout == \"down\"`" + ` | ` + "`echo \"start ${node}\" >> \"${dir}/" + name + ".repairs\"; sleep 1; echo up > \"${dir}/" + name + ".state\"`" + ` |
`
}

// TestSoakFailover runs three instances on a 3-member etcd cluster for
// $CONTRACTD_SOAK (10m by default) while it breaks services and kills
// (-9), pauses (SIGSTOP past the lease) and stops (SIGTERM) instances at
// random, restarting them; then it counts what the guards allow: at most
// one repair per break, and no message delivered twice. It runs only when
// -run names it: `go test -run Soak -timeout 30m ./cmd/contractd/`.
func TestSoakFailover(t *testing.T) {
	if run := flag.Lookup("test.run"); run == nil || !strings.Contains(run.Value.String(), "Soak") {
		t.Skip("soak: runs only with -run Soak")
	}
	duration := 10 * time.Minute
	if v := os.Getenv("CONTRACTD_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CONTRACTD_SOAK: %v", err)
		}
		duration = d
	}
	const services = 6
	contracts := map[string]string{}
	var names []string
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("svc%d", i)
		names = append(names, name)
		contracts[name] = soakContract(name)
	}
	r := startHA(t, 0, contracts)
	r.vars = []string{"dir=" + r.work}
	r.nodeVar = true
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(r.work, name+".state"), []byte("up\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nodes := []string{"n1", "n2", "n3"}
	procs := map[string]*haNode{}
	for _, n := range nodes {
		procs[n] = r.start(n)
	}
	for _, name := range names {
		r.settled(name)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var kills, pauses, stops, breaks int
	lastBreak := map[string]time.Time{}
	restartAt := map[string]time.Time{}
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		now := time.Now()
		for n, at := range restartAt {
			if now.After(at) {
				procs[n] = r.start(n)
				delete(restartAt, n)
			}
		}
		// Break a service that is up and was last broken a while ago.
		name := names[rng.IntN(len(names))]
		state := strings.TrimSpace(readFile(t, filepath.Join(r.work, name+".state")))
		if state == "up" && now.Sub(lastBreak[name]) > 4*time.Second {
			appendLine(t, filepath.Join(r.work, name+".repairs"), "break")
			if err := os.WriteFile(filepath.Join(r.work, name+".state"), []byte("down\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			lastBreak[name] = now
			breaks++
		}
		if rng.IntN(4) != 0 || len(restartAt) >= 2 {
			continue // about one fault every 4–5 s, never all instances down
		}
		n := nodes[rng.IntN(len(nodes))]
		p := procs[n]
		if _, down := restartAt[n]; down || !p.alive() {
			continue
		}
		switch rng.IntN(3) {
		case 0: // the host dies
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			restartAt[n] = now.Add(time.Duration(1000+rng.IntN(4000)) * time.Millisecond)
			kills++
		case 1: // a pause past the lease, in the middle of whatever it was doing
			p.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(haTTL + time.Duration(rng.IntN(int(2*haTTL/time.Millisecond)))*time.Millisecond)
			p.cmd.Process.Signal(syscall.SIGCONT)
			pauses++
		default: // a clean stop
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
			restartAt[n] = now.Add(time.Duration(1000+rng.IntN(4000)) * time.Millisecond)
			stops++
		}
	}
	for n := range restartAt {
		procs[n] = r.start(n)
	}
	// Quiet time: every break is repaired.
	wait.For(t, "every service up again", func() bool {
		for _, name := range names {
			if strings.TrimSpace(readFile(t, filepath.Join(r.work, name+".state"))) != "up" {
				return false
			}
		}
		return true
	})
	// The last runs' messages are out once every service's owner has
	// finished a healthy run that began after all were up: only then is
	// "no repair twice, no message twice" a statement about the whole soak.
	upAt := time.Now()
	for _, name := range names {
		owner := r.settled(name)
		wait.For(t, name+": a healthy run after every service was up", func() bool {
			c, ok := owner.contracts()[name]
			return ok && c.LastRunAt != nil && c.LastRunAt.After(upAt) && c.LastSeverity == "healthy"
		})
	}

	repairs, dupRepairs := 0, 0
	for _, name := range names {
		since := 0 // repairs since the last break
		for _, l := range strings.Split(readFile(t, filepath.Join(r.work, name+".repairs")), "\n") {
			switch {
			case l == "break":
				since = 0
			case strings.HasPrefix(l, "start"):
				repairs++
				since++
				if since > 1 {
					dupRepairs++
					t.Errorf("%s: a second repair for one break: %s", name, l)
				}
			}
		}
	}
	seen := map[string]int{}
	messages := 0
	for _, l := range strings.Split(readFile(t, filepath.Join(r.work, "pages.jsonl")), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		messages++
		seen[l]++
	}
	var dups []string
	for l, k := range seen {
		if k > 1 {
			dups = append(dups, fmt.Sprintf("%d× %s", k, l))
		}
	}
	sort.Strings(dups)
	for _, d := range dups {
		t.Errorf("message delivered more than once: %s", d)
	}
	// What the instances said about runs cut short: repairs a new owner
	// verified instead of running, and intents and messages a fence refused.
	var interrupted, refusedRepairs, refusedMessages int
	for _, node := range nodes {
		log := readFile(t, r.node(node).log)
		interrupted += strings.Count(log, `msg="repair interrupted"`)
		refusedRepairs += strings.Count(log, `msg="repair not run: its intent cannot be recorded"`)
		refusedMessages += strings.Count(log, `msg="alert not sent"`)
	}
	t.Logf("soak %s, 3 instances, %d services, TTL %s: %d breaks, %d kill -9, %d pauses past the lease, %d SIGTERM; %d repairs (%d for the same break twice), %d messages (%d delivered twice); %d interrupted repairs verified by the next owner, %d repairs and %d messages refused by the fence",
		duration, services, haTTL, breaks, kills, pauses, stops, repairs, dupRepairs, messages, len(dups), interrupted, refusedRepairs, refusedMessages)
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}
