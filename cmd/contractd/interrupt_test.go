package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
)

// declaredCrashContract is crashContract as a command: `contractd
// crashy-status`, the way an operator pipes it into head.
var declaredCrashContract = strings.Replace(crashContract, "runtime_contract: 2\n", "runtime_contract: 2\ncommands: [crashy-status]\n", 1)

// interruptCase is one run of the real binary to interrupt: its contract
// directory, state dir and work dir (where the repair leaves its marks).
type interruptCase struct {
	bin, dir, state, work string
}

func newInterruptCase(t *testing.T) *interruptCase {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := &interruptCase{bin: binary(t), dir: t.TempDir(), state: filepath.Join(t.TempDir(), "state"), work: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.dir, "crashy.md"), []byte(declaredCrashContract), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// command is `contractd crashy-status`, as an operator types it.
func (c *interruptCase) command() *exec.Cmd {
	return owner.Command(c.bin, "crashy-status", "--dir", c.dir, "--state-dir", c.state, "--var", "dir="+c.work)
}

// waitForRepair waits until the repair has started: it writes "start" to
// its marks file before it takes its second.
func (c *interruptCase) waitForRepair(t *testing.T, done <-chan error) {
	t.Helper()
	wait.For(t, "the repair to start", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the run ended before its repair started: %v", err)
		default:
		}
		return countLines(t, filepath.Join(c.work, "repairs"), "start") > 0
	})
}

// read runs a read-only command of the binary and returns its stdout.
func (c *interruptCase) read(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// --dir names the contract even before it has state: a run killed
	// before it wrote anything leaves none.
	cmd := owner.CommandContext(ctx, c.bin, append(args, "--state-dir", c.state, "--dir", c.dir)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("contractd %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// agree checks what an operator relies on after any interruption: the next
// `history` and `status` show what the ledger holds. Every repair and every
// open incident of the ledger belongs to a run the history has; the
// status line's last run is the history's last; no run is left half
// recorded. It returns the history.
func (c *interruptCase) agree(t *testing.T) []engine.HistoryRecord {
	t.Helper()
	var hist []engine.HistoryRecord
	if err := json.Unmarshal([]byte(c.read(t, "history", "--json", "crashy")), &hist); err != nil {
		t.Fatalf("history --json: %v", err)
	}
	var sums []engine.Summary
	if err := json.Unmarshal([]byte(c.read(t, "status", "--json")), &sums); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	s, err := store.Open(c.state)
	if err != nil {
		t.Fatal(err)
	}
	l, err := engine.ReadLedger(s, "crashy")
	if err != nil {
		t.Fatal(err)
	}
	if l.Run != nil {
		t.Errorf("after history and status, the ledger still names run %s as unrecorded", l.Run.RunID)
	}
	runs := map[string]engine.HistoryRecord{}
	alerted := map[string]bool{}
	for _, h := range hist {
		runs[h.RunID] = h
		for _, a := range h.Alerts {
			alerted[a.Key] = true
		}
	}
	repairs := 0
	for _, u := range l.Units {
		repairs += len(u.Repairs)
	}
	if repairs > 0 && len(hist) == 0 {
		t.Errorf("the ledger holds %d repair(s) and the history no run", repairs)
	}
	for _, in := range l.Intents {
		if _, ok := runs[in.RunID]; !ok {
			t.Errorf("the ledger's repair %q belongs to run %s, which the history does not have", in.Command, in.RunID)
		}
	}
	open := 0
	for key, inc := range l.Incidents {
		if inc.Resolved {
			continue
		}
		open++
		if !alerted[key] {
			t.Errorf("incident %s is open in the ledger and no run in the history raised it", key)
		}
	}
	switch {
	case len(hist) == 0 && len(sums) > 0 && !sums[0].LastRun.IsZero():
		t.Errorf("status says crashy last ran at %s; the history has no run", sums[0].LastRun)
	case len(hist) > 0 && (len(sums) != 1 || sums[0].LastRunID != hist[len(hist)-1].RunID):
		t.Errorf("status %+v; want its last run to be the history's last, %s", sums, hist[len(hist)-1].RunID)
	case len(sums) == 1 && len(sums[0].Incidents) != open:
		t.Errorf("status shows %d open incidents, the ledger %d", len(sums[0].Incidents), open)
	}
	return hist
}

// exitCode is the exit code of a finished command, -1 for one a signal
// killed (with the signal).
func exitCode(err error) (int, syscall.Signal) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal()
	}
	return ee.ExitCode(), 0
}

// `contractd crashy-status 2>&1 | head -1`: the reader goes away while the
// run still writes its log. The run is not killed by SIGPIPE: it finishes,
// records, and exits as the run does.
func TestAReaderThatGoesAwayNeverCutsARunShort(t *testing.T) {
	c := newInterruptCase(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.command()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The first line is the repair's; the verification's, the report and
	// the rest come after the reader has gone.
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.Contains(line, "repaired svc") {
		t.Fatalf("first line %q, %v; want the repair's", line, err)
	}
	r.Close()
	err = cmd.Wait()
	if code, sig := exitCode(err); code != 0 || sig != 0 {
		t.Fatalf("the run ended with exit %d, signal %v (%v); want 0: a closed pipe must not kill it", code, sig, err)
	}
	hist := c.agree(t)
	if len(hist) != 1 || hist[0].Interrupted != "" || hist[0].OverallSeverity != "healthy" {
		t.Fatalf("history %+v; want the whole run, healthy after its repair", hist)
	}
	st, err := store.Open(c.state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ReadStatus(st, "crashy", time.Now()); err != nil {
		t.Errorf("no snapshot: %v", err)
	}
}

// SIGTERM or SIGINT during the repair: the run cancels it, records what it
// did with the signal as the reason, and exits 128+N.
func TestASignalledRunRecordsWhatItDidAndExits128PlusN(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		why  string
	}{
		{syscall.SIGTERM, 143, "SIGTERM received"},
		{syscall.SIGINT, 130, "SIGINT received"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			c := newInterruptCase(t)
			cmd := c.command()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			c.waitForRepair(t, done)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("the run did not end within 30s of %v", tc.sig)
			}
			if code, sig := exitCode(err); code != tc.code {
				t.Fatalf("exit %d (signal %v); want %d\n%s", code, sig, tc.code, stderr.String())
			}
			hist := c.agree(t)
			if len(hist) != 1 || hist[0].Interrupted != tc.why {
				t.Fatalf("history %+v; want the run, interrupted: %s", hist, tc.why)
			}
			if a := hist[0].Actions; len(a) != 1 || a[0].Kind != engine.KindRepair {
				t.Errorf("actions %+v; want the repair the signal cut off", a)
			}
			if !strings.Contains(stderr.String(), `level=WARN msg="run interrupted; recording what the run did" contract=crashy `) ||
				!strings.Contains(stderr.String(), ` reason="`+tc.why+`"`) {
				t.Errorf("stderr does not say the run was interrupted:\n%s", stderr.String())
			}
		})
	}
}

// kill -9 during the repair: nothing runs after it, so the ledger holds the
// repair (written ahead) and the history nothing. The next `history` writes
// the run's record from the ledger; `status` agrees; the next run neither
// repeats the repair nor loses the run.
func TestAKilledRunIsInTheHistoryTheLedgerImplies(t *testing.T) {
	c := newInterruptCase(t)
	cmd := c.command()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	c.waitForRepair(t, done)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done

	hist := c.agree(t)
	if len(hist) != 1 || !strings.HasPrefix(hist[0].Interrupted, "the run did not record its end") || hist[0].OverallSeverity != "unknown" {
		t.Fatalf("history %+v; want the killed run, rebuilt from the ledger", hist)
	}
	if a := hist[0].Actions; len(a) != 1 || a[0].Status != engine.ActionInterrupted {
		t.Errorf("actions %+v; want the repair, interrupted", a)
	}
	status := exec.Command(c.bin, "status", "--state-dir", c.state, "crashy")
	var stderr strings.Builder
	status.Stderr = &stderr
	out, err := status.Output()
	if code, _ := exitCode(err); code != 1 || len(out) != 0 || !strings.Contains(stderr.String(), "has no snapshot: its last run, "+hist[0].RunID) {
		t.Errorf("status crashy: exit %d, %q, stderr %q; want exit 1 naming the interrupted run that wrote no snapshot", code, out, stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, c.bin, "crashy-status", "--dir", c.dir, "--state-dir", c.state, "--var", "dir="+c.work).CombinedOutput(); err != nil {
		t.Fatalf("the next run: %v\n%s", err, out)
	}
	if n := countLines(t, filepath.Join(c.work, "repairs"), "start"); n != 1 {
		t.Errorf("%d repairs; the killed run's counts inside the 1h debounce", n)
	}
	if hist := c.agree(t); len(hist) != 2 || hist[0].RunID == hist[1].RunID || hist[1].Interrupted != "" {
		t.Errorf("history %+v; want the killed run, then the next one", hist)
	}
	// kill -9 left the repair's own process running (its process group is
	// its own); it ends by writing "up", before the work dir goes.
	wait.For(t, "the killed run's repair to finish", func() bool {
		return strings.TrimSpace(readFile(t, filepath.Join(c.work, "state"))) == "up"
	})
}
