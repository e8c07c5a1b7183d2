package lsp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
)

// contractdBinary builds the real contractd for the editor to start.
func contractdBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "contractd")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := owner.CommandContext(ctx, "go", "build", "-o", bin, "github.com/contractd/contractd/cmd/contractd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// nvimResult is what testdata/nvim_client.lua saw.
type nvimResult struct {
	Error      string  `json:"error"`
	OpenMS     float64 `json:"open_ms"`
	Diagnostic struct {
		Line    int    `json:"line"`
		Col     int    `json:"col"`
		EndCol  int    `json:"end_col"`
		Message string `json:"message"`
	} `json:"diagnostic"`
	Completion       []string `json:"completion"`
	Hover            string   `json:"hover"`
	Action           string   `json:"action"`
	FixMS            float64  `json:"fix_ms"`
	FixedLine        string   `json:"fixed_line"`
	ChangeMS         float64  `json:"change_ms"`
	ChangeDiagnostic string   `json:"change_diagnostic"`
}

// Neovim, its own LSP client driven by a Lua script, against the real
// `contractd lsp`: the flagship contract with a typo shows lint's
// diagnostic at the typo's line and column, completion inside a health
// cell lists stdout, hover answers with the guards of an action row, the
// quick fix writes lint's suggestion into the buffer and the error goes,
// and a new mistake typed into a cell is diagnosed. The times from open
// and from a change to the diagnostic are logged.
func TestNeovimAsTheClient(t *testing.T) {
	nvim := need.Command(t, "nvim", "neovim")
	bin := contractdBinary(t)
	dir := t.TempDir()
	path, text := flagship(t)
	path = filepath.Join(dir, filepath.Base(path))
	typo := strings.Replace(text, "schedule: {every: 15m", "shedule: {every: 15m", 1)
	if err := os.WriteFile(path, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}
	cellLine, cellCol := lineOf(t, typo, "| `fail_rate_pct` | < 50 | ≥ 50 |")
	rowLine, rowCol := lineOf(t, typo, "| `retry_count >= 3` | `pm2 restart abiba-zulip` | after=3")
	changeLine, _ := lineOf(t, typo, "| `stdout` | `it in [\"200\", \"401\"]`")
	plan := map[string]any{
		"contractd": bin, "file": path, "result": filepath.Join(dir, "result.json"),
		"complete": map[string]int{"line": cellLine, "character": cellCol + len("| `fail_rate_pct` | ")},
		"hover":    map[string]int{"line": rowLine, "character": rowCol + 4},
		"change":   map[string]any{"line": changeLine, "from": "stdout", "to": "stdot"},
	}
	planFile := filepath.Join(dir, "plan.json")
	b, _ := json.Marshal(plan)
	if err := os.WriteFile(planFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := owner.CommandContext(ctx, nvim, "--headless", "--clean", "-n", "-c", "luafile testdata/nvim_client.lua")
	cmd.Env = append(os.Environ(), "CONTRACTD_NVIM_PLAN="+planFile, "HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_DATA_HOME="+dir)
	out, err := cmd.CombinedOutput()
	raw, rerr := os.ReadFile(filepath.Join(dir, "result.json"))
	if rerr != nil {
		t.Fatalf("neovim wrote no result (%v, %v):\n%s", err, rerr, out)
	}
	var res nvimResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	if res.Error != "" {
		t.Fatalf("the Lua client failed: %s\n%s", res.Error, out)
	}

	line, col := lineOf(t, typo, "shedule")
	if res.Diagnostic.Line != line || res.Diagnostic.Col != col || res.Diagnostic.EndCol != col+len("shedule") ||
		res.Diagnostic.Message != `unknown key "shedule" in front matter (did you mean "schedule"?)` {
		t.Errorf("diagnostic %+v, want lint's at %d:%d", res.Diagnostic, line, col)
	}
	if !contains(res.Completion, "stdout") || !contains(res.Completion, "fail_rate_pct") {
		t.Errorf("completion in the cell: %v", res.Completion)
	}
	if !strings.Contains(res.Hover, "guards: act after 3 failing run(s), debounce 5m") {
		t.Errorf("hover: %q", res.Hover)
	}
	if res.Action != `Change "shedule" to "schedule"` || !strings.HasPrefix(res.FixedLine, "schedule: {every: 15m") {
		t.Errorf("quick fix %q left %q", res.Action, res.FixedLine)
	}
	if !strings.Contains(res.ChangeDiagnostic, `(did you mean "stdout"?)`) {
		t.Errorf("after typing stdot: %q", res.ChangeDiagnostic)
	}
	t.Logf("neovim %s: open → diagnostic %.1f ms (server start included); fix → diagnostics %.1f ms; change → diagnostic %.1f ms",
		version(nvim), res.OpenMS, res.FixMS, res.ChangeMS)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func version(nvim string) string {
	out, err := exec.Command(nvim, "--version").Output()
	if err != nil {
		return "?"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return fmt.Sprint(strings.TrimPrefix(first, "NVIM "))
}
