package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/transports"
)

// TestRunLockOfAnotherProcess runs the real engine in the daemon while a
// separate process holds the contract's run lock: the daemon's run is
// skipped as an overlap (never a failure), and once that process is killed
// with SIGKILL the kernel has released the lock and the next run goes ahead.
func TestRunLockOfAnotherProcess(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "locked-elsewhere", "1", "1h", false)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := transports.NewPool(transports.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	eng, err := engine.New(engine.Options{StateDir: state, Opener: engine.PoolOpener{Pool: pool}})
	if err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, TokenFile: tokenFile, Runner: eng})

	holder := owner.Command(os.Args[0])
	holder.Env = append(os.Environ(), "SERVE_LOCK_HELPER="+state+"\x1flocked-elsewhere")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.StdinPipe(); err != nil { // open while the test runs
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock holder said %q, %v", line, err)
	}

	run := func() (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.base+"/contracts/locked-elsewhere/run", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := run(); code != http.StatusConflict || !strings.Contains(body["error"].(string), "another run holds the lock") {
		t.Fatalf("run while another process holds the lock = %d %v, want 409", code, body)
	}
	if st := h.status("locked-elsewhere"); st.SkippedOverlap != 1 || st.ConsecutiveFailures != 0 || st.LastResult != ResultSkippedOverlap {
		t.Errorf("status = %+v, want one skipped_overlap and no failure", st)
	}

	// The holder crashes; the kernel drops its flock with it.
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	holder.Wait()
	code, body := run()
	if code != http.StatusOK || body["overall_severity"] != "healthy" {
		t.Fatalf("run after the holder died = %d %v, want 200 healthy", code, body)
	}
	if st := h.status("locked-elsewhere"); st.LastResult != ResultOK {
		t.Errorf("status after the crash = %+v", st)
	}
}

// holdLock is the other process of TestRunLockOfAnotherProcess (TestMain
// runs it when SERVE_LOCK_HELPER is set): it takes the contract's run lock,
// says so, and holds it until killed or its stdin closes (the test is gone).
// It returns the exit code.
func holdLock(spec string) int {
	stateDir, name, _ := strings.Cut(spec, "\x1f")
	st, err := store.Open(stateDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock holder:", err)
		return 1
	}
	if _, err := st.Lock(context.Background(), name, 0); err != nil {
		fmt.Fprintln(os.Stderr, "lock holder:", err)
		return 1
	}
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin)
	return 0
}
