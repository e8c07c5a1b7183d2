package serve

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/wait"
)

// socketPost POSTs path over the Unix socket and returns the status and the
// decoded answer.
func socketPost(t *testing.T, sock, path string) (int, map[string]any) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Post("http://contractd"+path, "", nil)
	if err != nil {
		t.Fatalf("POST %s over %s: %v", path, sock, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestSocketRunsDeclaredCommandsForTheDaemonsUser(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "zulip-health", "3", "1h", false, "commands: [zulip-status]\n")
	writeContract(t, dir, "other", "1", "1h", false)
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		return report(c), nil
	}}
	sock := SocketPath(state)
	// No token file: the TCP address refuses on-demand runs.
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: runner, Socket: sock})
	wait.For(h.t, "both contracts", func() bool { return len(h.list().Contracts) == 2 })

	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v %v; want a socket with mode 0600", sock, fi.Mode(), err)
	}
	cases := []struct {
		name, path string
		want       int
		contract   string
	}{
		{"a declared command", "/commands/zulip-status/run", http.StatusOK, "zulip-health"},
		{"a contract by name", "/contracts/other/run", http.StatusOK, "other"},
		{"a command no contract declares", "/commands/nope/run", http.StatusNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := socketPost(t, sock, tc.path)
			if code != tc.want || (tc.contract != "" && body["contract"] != tc.contract) {
				t.Fatalf("POST %s = %d %v, want %d for %q", tc.path, code, body, tc.want, tc.contract)
			}
		})
	}
	if code, _ := postAPI(t, h.base+"/commands/zulip-status/run", "", ""); code != http.StatusForbidden {
		t.Fatalf("TCP without a token file: %d, want 403", code)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after a clean stop: %v", err)
	}
}

func TestSocketReplacesAStaleOneAndNeverAFile(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "a", "1", "1h", false)
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}
	sock := SocketPath(state)
	// A socket left by a daemon that died.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: runner, Socket: sock})
	if code, _ := socketPost(t, sock, "/contracts/a/run"); code != http.StatusOK {
		t.Fatalf("after replacing the stale socket: %d", code)
	}
	h.stop()

	// A regular file where the socket goes is left alone: no socket, and
	// the daemon still serves TCP.
	file := filepath.Join(t.TempDir(), "not-a-socket")
	os.WriteFile(file, []byte("keep me"), 0o600)
	h = startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: runner, Socket: file})
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatalf("the file was replaced")
	}
	if !h.logs.contains("not a socket") {
		t.Fatalf("the refusal is not logged: %v", h.logs.lines)
	}
}

// TestSocketAsksOtherUsersForTheToken: the socket's mode keeps other users
// out; if an operator loosens it, the peer check still does.
func TestSocketAsksOtherUsersForTheToken(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to connect as another user")
	}
	curl := need.Command(t, "curl", "curl")
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	writeContract(t, dir, "a", "1", "1h", false)
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) { return report(c), nil }}
	sock := SocketPath(state)
	startDaemon(t, Config{Dir: dir, StateDir: state, TokenFile: writeToken(t), Runner: runner, Socket: sock})
	for _, p := range []string{filepath.Dir(dir), dir, state} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(sock, 0o666)
	cmd := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock, "-X", "POST", "http://contractd/contracts/a/run")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl as nobody: %v", err)
	}
	if code := strings.TrimSpace(string(out)); code != "401" {
		t.Fatalf("another user over the socket without the token: HTTP %s, want 401", code)
	}
}
