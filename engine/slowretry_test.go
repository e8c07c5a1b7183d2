package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

// supervisorContract starts a stopped sibling, leaves its pending states
// alone and slows to 5x the interval after 3 failed starts.
const supervisorContract = "---\n" + `name: sup
runtime_contract: 2
schedule: {every: 1m}
guards:
  debounce: 30s
  grace: 5s
  slow_retry: {after: 3, factor: 5}
targets:
  host: {ssh: root@sib.example}
---

## Execution

### Sibling {#sib agent=sib on=host}

` + "```sh {id=unit as=json}\nshow\n```" + `

| Field | Healthy | Degraded | Critical |
|-------|---------|----------|----------|
| ` + "`ActiveState`" + ` | ` + "`active`" + ` | ` + "`activating`" + ` | ` + "`it in [\"inactive\", \"failed\"]`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`ActiveState in [\"inactive\", \"failed\"]`" + ` | ` + "`systemctl start sib`" + ` |

| Aggregate | Action |
|-----------|--------|
| ` + "`critical_count > 0`" + ` | Log — the supervisor's messages are its starts and its slow-retry incident |
`

// sibling is a fake service manager: a start refuses, dies after
// "activating", or works.
type sibling struct {
	mu     sync.Mutex
	state  string
	mode   string // refuse, dies, works
	starts int
}

func (s *sibling) exec(ctx context.Context, cmd transports.Command) (transports.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(cmd.Script, "systemctl start") {
		s.starts++
		switch s.mode {
		case "refuse":
			s.state = "failed"
			return transports.Result{ExitCode: 1, Stderr: "Job for sib.service failed."}, nil
		case "dies":
			s.state = "activating"
		default:
			s.state = "active"
		}
		return transports.Result{}, nil
	}
	out := `{"ActiveState":"` + s.state + `"}`
	if s.state == "activating" && s.mode == "dies" {
		s.state = "failed" // seen starting once, then dead
	}
	return transports.Result{Stdout: out}, nil
}

func (s *sibling) set(state, mode string) {
	s.mu.Lock()
	s.state, s.mode = state, mode
	s.mu.Unlock()
}

func (s *sibling) startCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// TestSlowRetrySupervisor follows a sibling that will not start, one
// scheduled minute at a time, each run a new Engine over the same state:
// three starts at full speed, then one every five minutes; a start into a
// pending state that dies counts as failed once the next run sees it dead;
// one message when the starts slow, none for each slow start, and one when
// the sibling runs again.
func TestSlowRetrySupervisor(t *testing.T) {
	sib := &sibling{}
	h := newHarness(t)
	h.c = parse(t, supervisorContract)
	h.w.opener.targets["host"] = &fakeTarget{name: "host", exec: sib.exec}
	sib.set("failed", "refuse")

	var startedAt []int
	for minute := 0; minute <= 17; minute++ {
		h.clock.Set(time.Date(2026, 11, 29, 12, minute, 0, 0, time.UTC))
		if minute == 10 {
			sib.set("failed", "dies") // fixed enough to start, not to stay up
		}
		if minute == 15 {
			sib.set("failed", "works")
		}
		before := sib.startCount()
		rep := h.run()
		if sib.startCount() > before {
			startedAt = append(startedAt, minute)
			continue
		}
		if minute < 17 {
			acts := actionsWith(rep, "pending")
			if len(acts) != 1 || acts[0].Guard != "slow-retry" || !strings.Contains(acts[0].Reason, "every 5m, 5x the 1m interval") {
				t.Fatalf("minute %d: no start and no slow-retry pending action:\n%s", minute, summarizeActions(rep))
			}
		}
	}
	// 0, 1, 2 fail; slowed: 7 fails; 12 starts into "activating" and dies,
	// which minute 13 sees (still slowed); 17 starts it for good.
	if got, want := startedAt, []int{0, 1, 2, 7, 12, 17}; !equal(got, want) {
		t.Errorf("started at minutes %v, want %v", got, want)
	}
	msgs := h.rec.since(0)
	var kinds []string
	for _, m := range msgs {
		kinds = append(kinds, m.Kind+"/"+m.Condition)
	}
	want := []string{
		notify.KindRepair + "/" + "ActiveState in [\"inactive\", \"failed\"]",
		notify.KindRepair + "/" + "ActiveState in [\"inactive\", \"failed\"]",
		notify.KindOpen + "/slow-retry",
		notify.KindResolved + "/slow-retry",
	}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("messages:\n%s\nwant two failed starts, the slow-retry incident opening once and resolving once", render(msgs))
	}
	if !strings.Contains(msgs[2].Text, "3 repairs in a row did not help (`systemctl start sib`); repairing only every 5m (5x the 1m interval)") || msgs[2].Severity != "critical" {
		t.Errorf("slow-retry open: [%s] %s", msgs[2].Severity, msgs[2].Text)
	}
	if !strings.Contains(msgs[3].Text, "repaired sib") || msgs[3].Severity != "healthy" {
		t.Errorf("recovery: [%s] %s, want the verified start as the resolve", msgs[3].Severity, msgs[3].Text)
	}
	st, err := store.Open(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	led, err := ReadLedger(st, "sup")
	if err != nil {
		t.Fatal(err)
	}
	if u := led.Units["sib"]; u == nil || u.Slow != nil {
		t.Errorf("ledger after recovery: slow-retry state %+v, want none", u.Slow)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func summarizeActions(rep *Report) string {
	var b strings.Builder
	for _, a := range rep.Actions {
		b.WriteString("  " + a.Status + " " + a.Guard + ": " + a.Reason + "\n")
	}
	return b.String()
}
