package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/owner"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// binary builds the real contractd once for the tests that need a process
// to kill.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "contractd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "contractd")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// crashContract is down until its repair has written "up"; the repair takes
// a second, and the debounce allows one repair per hour.
const crashContract = `---
name: crashy
runtime_contract: 2
guards:
  debounce: 1h
  grace: 500ms
vars:
  dir: /nonexistent
notify:
  - {log: {path: "${dir}/pages.txt"}}
---

## Execution

### Service {#svc agent=svc}

` + "```sh {id=probe timeout=5s}\ncat \"${dir}/state\" 2>/dev/null || echo down\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`up`" + ` | ` + "`down`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`probe.stdout == \"down\"`" + ` | ` + "`echo start >> \"${dir}/repairs\"; sleep 1; echo up > \"${dir}/state\"`" + ` |
`

// kill -9 at a random point of a run whose repair is slow, then a full run
// inside the debounce: never a second repair, and when the first never ran,
// its incident is not lost (the second run pages). Between the two, history
// and status agree with the ledger. At least 20 kills.
func TestKillNineNeverRepairsTwiceNorLosesTheIncident(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	contract := filepath.Join(dir, "crashy.md")
	if err := os.WriteFile(contract, []byte(crashContract), 0o644); err != nil {
		t.Fatal(err)
	}
	const kills = 24
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	repairsSeen := map[int]int{} // repairs started in an iteration → iterations
	for i := range kills {
		work := filepath.Join(dir, fmt.Sprintf("w%02d", i))
		state := filepath.Join(dir, fmt.Sprintf("s%02d", i))
		if err := os.MkdirAll(work, 0o755); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", "--state-dir", state, "--var", "dir=" + work, contract}
		// The whole run takes about 1.6 s: probe, 1 s repair, 0.5 s grace,
		// verify, deliver, save. Kill anywhere in it, or just after.
		at := time.Duration(rng.Int64N(int64(1900 * time.Millisecond)))
		cmd := owner.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(at)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		// Wherever the kill landed, the next `history` and `status` show
		// what the ledger holds.
		(&interruptCase{bin: bin, dir: dir, state: state}).agree(t)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := owner.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kill %d at %s: the next run failed: %v\n%s", i, at, err, out)
		}
		repairs := countLines(t, filepath.Join(work, "repairs"), "start")
		repairsSeen[repairs]++
		if repairs > 1 {
			t.Errorf("kill %d at %s: %d repairs inside a 1h debounce, want at most 1\n%s", i, at, repairs, out)
		}
		up := strings.TrimSpace(readFile(t, filepath.Join(work, "state"))) == "up"
		paged := countLines(t, filepath.Join(work, "pages.txt"), "[open]") > 0
		if !up && !paged {
			st, _ := os.Stat(filepath.Join(work, "state"))
			t.Errorf("kill %d at %s: the service is still down and no page went out: the incident was lost (%d repairs started; state file %s)\n%s", i, at, repairs, describeFile(st), out)
		}
	}
	t.Logf("%d kills; iterations by repairs started: %v", kills, repairsSeen)
}

// describeFile says whether a file exists, its size and when it was last
// written.
func describeFile(fi os.FileInfo) string {
	if fi == nil {
		return "absent"
	}
	return fmt.Sprintf("%d bytes, written %s", fi.Size(), fi.ModTime().Format("15:04:05.000"))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func countLines(t *testing.T, path, sub string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(readFile(t, path), "\n") {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}
