package docs_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/owner"
)

// The Neovim configuration editors.md gives, as written, for the Neovim
// installed: opening a contract with a misspelt key shows lint's
// diagnostic from the real `contractd lsp` found on PATH.
func TestEditorsNeovimConfigAsWritten(t *testing.T) {
	nvim := need.Command(t, "nvim", "neovim")
	out, err := owner.Command(nvim, "--version").Output()
	if err != nil {
		t.Fatalf("nvim --version: %v", err)
	}
	m := regexp.MustCompile(`NVIM v(\d+)\.(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("nvim --version says %q", out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	installed := major*1000 + minor

	src, err := os.ReadFile("editors.md")
	if err != nil {
		t.Fatal(err)
	}
	// The newest form whose version the installed Neovim has.
	var config string
	best := -1
	forms := 0
	for _, b := range blocks(src) {
		v, ok := b.attrs["nvim"]
		if b.lang != "lua" || !ok {
			continue
		}
		forms++
		maj, min, _ := strings.Cut(v, ".")
		a, _ := strconv.Atoi(maj)
		c, _ := strconv.Atoi(min)
		if w := a*1000 + c; w <= installed && w > best {
			best, config = w, b.body
		}
	}
	if forms < 2 || config == "" {
		t.Fatalf("editors.md has %d Neovim forms, none for the installed %s.%s", forms, m[1], m[2])
	}

	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if out, err := owner.Command("go", "build", "-o", filepath.Join(bin, "contractd"), "github.com/contractd/contractd/cmd/contractd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	initLua := filepath.Join(work, "init.lua")
	contract := filepath.Join(work, "site.md")
	result := filepath.Join(work, "diagnostics.txt")
	text := "---\nname: site\nruntime_contract: 2\nshedule: {every: 1m}\n---\n\n## Execution\n\n### Web {#web agent=web}\n\n```sh {id=probe}\necho up\n```\n\nExpected: `up`\n"
	// After the configuration: wait for the server's diagnostics, write
	// them down, quit.
	probe := `
vim.api.nvim_create_autocmd("VimEnter", { nested = true, callback = function()
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("CONTRACTD_FILE")))
  vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
  local lines = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do
    table.insert(lines, string.format("%d:%d: %s", d.lnum + 1, d.col + 1, d.message))
  end
  vim.fn.writefile(lines, os.getenv("CONTRACTD_RESULT"))
  vim.cmd("qa!")
end })
`
	for path, body := range map[string]string{initLua: config + probe, contract: text} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := owner.CommandContext(ctx, nvim, "--headless", "-n", "-u", initLua)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+work,
		"XDG_STATE_HOME="+work, "XDG_DATA_HOME="+work, "XDG_CONFIG_HOME="+work, "CONTRACTD_FILE="+contract, "CONTRACTD_RESULT="+result)
	nvimOut, err := cmd.CombinedOutput()
	got, rerr := os.ReadFile(result)
	if rerr != nil {
		t.Fatalf("neovim wrote no diagnostics (%v, %v):\n%s", err, rerr, nvimOut)
	}
	want := `4:1: unknown key "shedule" in front matter (did you mean "schedule"?)`
	if !strings.Contains(string(got), want) {
		t.Fatalf("Neovim %s.%s with editors.md's nvim=%d.%d form shows:\n%s\nwant %q\n%s", m[1], m[2], best/1000, best%1000, got, want, nvimOut)
	}
	t.Logf("Neovim %s.%s with the nvim=%d.%d form of editors.md: %s", m[1], m[2], best/1000, best%1000, strings.TrimSpace(string(got)))
}
