package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/fixtures/wait"
	"github.com/contractd/contractd/transports"
)

// systemctlStandIn is a real `systemctl` for the sibling-supervisor test:
// it keeps the sibling's ActiveState and LoadState in files, appends every
// start to a call log, and fails a start while a "refuse" file exists.
const systemctlStandIn = `#!/bin/sh
d=%q
verb=$1
unit=$2
case "$verb" in
show)
  echo "LoadState=$(cat "$d/load")"
  echo "ActiveState=$(cat "$d/active")"
  echo "SubState=dead"
  echo "NRestarts=0"
  ;;
start)
  echo "start $unit" >> "$d/calls"
  if [ -e "$d/refuse" ]; then echo "Job for $unit.service failed." >&2; exit 1; fi
  echo active > "$d/active"
  ;;
*)
  echo "systemctl stand-in: unexpected $*" >> "$d/calls"
  exit 1
  ;;
esac
`

// sibling is the stand-in's state directory.
type sibling struct {
	t   *testing.T
	dir string
}

func (s sibling) set(file, content string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, file), []byte(content+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s sibling) refuseStarts(on bool) {
	s.t.Helper()
	p := filepath.Join(s.dir, "refuse")
	if on {
		s.set("refuse", "")
	} else if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
}

func (s sibling) calls() []string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "calls"))
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), "start ", "start:"))
}

// TestSiblingSupervisorWithTheRealEngine runs the shipped sibling-supervisor
// contract in the daemon with the real engine against a systemctl stand-in,
// one scheduled minute at a time (the engine's clock is a fake; each minute
// is an on-demand run over HTTP), and checks the promises of seed 002.
func TestSiblingSupervisorWithTheRealEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real engine over a dozen runs")
	}
	standIn := sibling{t: t, dir: t.TempDir()}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fmt.Sprintf(systemctlStandIn, standIn.dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	standIn.set("load", "loaded")
	standIn.set("active", "inactive")

	dir, state := t.TempDir(), t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "contracts", "sibling-supervisor.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sibling-supervisor.md"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	pool := transports.NewPool(transports.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	eng, err := engine.New(engine.Options{
		StateDir: state, Opener: engine.PoolOpener{Pool: pool}, Clock: clock,
		NotifyDeps: notify.Deps{Log: io.Discard, Getenv: func(string) string { return "" }},
		// The verify-after-repair grace passes at once: time is the fake clock's.
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, TokenFile: tokenFile, Runner: eng,
		Notify: func(ctx context.Context, c *contracts.Contract, text string) error { return nil }})

	// minute advances the engine's clock by one scheduled interval and runs
	// the contract, as the daemon's next tick would.
	minute := func(what string) *engine.Report {
		t.Helper()
		clock.Advance(time.Minute)
		req, _ := http.NewRequest(http.MethodPost, h.base+"/contracts/sibling-supervisor/run", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep engine.Report
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: POST run = %d (%v)", what, resp.StatusCode, err)
		}
		return &rep
	}
	// The on_start run and any run it raced with are over before we drive.
	wait.For(h.t, "the on_start run", func() bool { return h.status("sibling-supervisor").LastResult != "" })
	wait.For(h.t, "the on_start run to end", func() bool { return h.status("sibling-supervisor").State == "idle" })

	t.Run("a stopped sibling is started", func(t *testing.T) {
		if got := standIn.calls(); len(got) != 1 || got[0] != "start:breeze-watchdog" {
			t.Fatalf("calls after the on_start run = %v, want one start", got)
		}
		if rep := minute("healthy minute"); rep.OverallSeverity.String() != "healthy" {
			t.Errorf("after the start: %s, want healthy", rep.OverallSeverity)
		}
		if n := len(standIn.calls()); n != 1 {
			t.Errorf("%d starts; a running sibling must not be started again", n)
		}
	})

	t.Run("pending transitions are left alone", func(t *testing.T) {
		for _, st := range []string{"activating", "deactivating", "reloading"} {
			standIn.set("active", st)
			rep := minute(st)
			if rep.OverallSeverity.String() != "degraded" {
				t.Errorf("%s: severity %s, want degraded", st, rep.OverallSeverity)
			}
		}
		if n := len(standIn.calls()); n != 1 {
			t.Errorf("%d starts; transitions must never be acted on", n)
		}
	})

	t.Run("three failed starts, then one per five minutes, never giving up", func(t *testing.T) {
		standIn.set("active", "failed")
		standIn.refuseStarts(true)
		before := len(standIn.calls())
		var startedAt []int
		opened := map[string]int{}
		for m := 1; m <= 13; m++ {
			rep := minute(fmt.Sprintf("failing minute %d", m))
			for _, a := range rep.Alerts {
				if a.Kind == "open" && a.Sent {
					opened[a.Key]++
				}
			}
			if n := len(standIn.calls()); n > before {
				startedAt = append(startedAt, m)
				before = n
			}
		}
		// Minutes 1-3 start every tick; three failed starts slow the
		// starts to one per five minutes: minute 8 and minute 13.
		if want := []int{1, 2, 3, 8, 13}; fmt.Sprint(startedAt) != fmt.Sprint(want) {
			t.Errorf("starts at minutes %v, want %v", startedAt, want)
		}
		// The operator hears about the stoppage, once per incident, not
		// once per attempt.
		if len(opened) == 0 {
			t.Error("no alert while the sibling stayed down for 13 minutes")
		}
		for key, n := range opened {
			if n != 1 {
				t.Errorf("incident %s alerted %d times", key, n)
			}
		}
	})

	t.Run("a sibling that comes back is left alone", func(t *testing.T) {
		standIn.refuseStarts(false)
		before := len(standIn.calls())
		for m := 1; m <= 5 && standIn.read("active") != "active"; m++ {
			minute("recovering minute")
		}
		if standIn.read("active") != "active" {
			t.Fatal("the sibling was not started once starts work again")
		}
		after := len(standIn.calls())
		minute("healthy again")
		minute("healthy again")
		if n := len(standIn.calls()); n != after || after-before != 1 {
			t.Errorf("starts: %d to recover, %d more while healthy; want 1 and 0", after-before, n-after)
		}
	})

	t.Run("a masked or missing unit is never touched", func(t *testing.T) {
		before := len(standIn.calls())
		for _, load := range []string{"masked", "not-found"} {
			standIn.set("load", load)
			standIn.set("active", "inactive")
			if rep := minute(load); rep.OverallSeverity.String() != "critical" {
				t.Errorf("%s: severity %s, want critical", load, rep.OverallSeverity)
			}
		}
		if n := len(standIn.calls()); n != before {
			t.Errorf("%d starts of a masked or missing unit", n-before)
		}
	})

	for _, c := range standIn.calls() {
		if c != "start:breeze-watchdog" {
			t.Errorf("the contract ran %q: it may only start its sibling", c)
		}
	}
}

func (s sibling) read(file string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, file))
	return strings.TrimSpace(string(b))
}
