package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/fixtures/need"
)

// The manual page has every command with its usage line, summary and
// flags, as their --help says them, and man renders it without a warning.
func TestManPageDescribesEveryCommand(t *testing.T) {
	code, page, errs := runMain(t, "contractd", "man")
	if code != 0 || errs != "" {
		t.Fatalf("man: exit %d, stderr %q", code, errs)
	}
	file := filepath.Join(t.TempDir(), "contractd.1")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	manBin := need.Command(t, "man", "man-db")
	cmd := exec.Command(manBin, "--warnings", "-E", "UTF-8", "-l", file)
	// Wide enough that nothing is broken across lines or hyphenated.
	cmd.Env = append(os.Environ(), "MANWIDTH=1000", "MANPAGER=cat", "PAGER=cat")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l: %v\n%s", err, stderr.String())
	}
	// Bold and underline come as overstrikes (X\bX, _\bX) on a pipe.
	text := regexp.MustCompile(`.\x08`).ReplaceAllString(string(out), "")
	docs := commandDocs(context.Background())
	if len(docs) != len(commands) {
		t.Fatalf("%d commands described, %d in the table", len(docs), len(commands))
	}
	for _, d := range docs {
		usage := strings.TrimSpace("contractd " + d.Name + " " + d.Args)
		if !strings.Contains(text, "\n   "+usage+"\n       "+d.Summary) {
			t.Errorf("the manual lacks %q with its summary %q", usage, d.Summary)
		}
		if _, help, _ := runMain(t, "contractd", d.Name, "--help"); d.Name != "version" {
			for _, f := range d.Flags {
				left := strings.TrimSpace(f.Flag + " " + f.Arg)
				if !strings.Contains(help, "  "+left) {
					t.Errorf("%s --help does not show %s, which the manual has", d.Name, left)
				}
				// A short flag shares its line with its text.
				if !regexp.MustCompile(`\n {7}` + regexp.QuoteMeta(left) + `\s+` + regexp.QuoteMeta(f.Usage)).MatchString(text) {
					t.Errorf("the manual lacks %s %s: %q", d.Name, left, f.Usage)
				}
			}
		}
	}
	for _, want := range []string{"EXIT STATUS", "2 bad usage or a contract that does not load", "/etc/contractd/", "CONTRACTD_DIR"} {
		if !strings.Contains(text, want) {
			t.Errorf("the manual lacks %q", want)
		}
	}
}

// The bash completion, run by a real bash, offers the commands, each
// command's flags, file names for a flag's value, commands after help and
// shells after completion.
func TestBashCompletion(t *testing.T) {
	bash := need.Command(t, "bash", "bash")
	code, script, errs := runMain(t, "contractd", "completion", "bash")
	if code != 0 || errs != "" {
		t.Fatalf("completion bash: exit %d, stderr %q", code, errs)
	}
	file := filepath.Join(t.TempDir(), "contractd")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		out, err := exec.Command(bash, "--norc", "-c", `source "$1"; COMP_WORDS=(`+strings.Join(quoted, " ")+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _contractd; echo "${COMPREPLY[*]}"`, "bash", file).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("contractd", "ma"); got != "maintenance man" {
		t.Errorf("contractd ma<TAB> offers %q", got)
	}
	if got := complete("contractd", "--v"); got != "--version" {
		t.Errorf("contractd --v<TAB> offers %q", got)
	}
	for _, d := range commandDocs(context.Background()) {
		got := " " + complete("contractd", d.Name, "-") + " "
		for _, f := range d.Flags {
			if !strings.Contains(got, " "+f.Flag+" ") {
				t.Errorf("contractd %s -<TAB> offers %q, not %s", d.Name, got, f.Flag)
			}
		}
	}
	if got := complete("contractd", "run", "--inventory", ""); got != "" {
		t.Errorf("the value of --inventory completes to %q, want nothing (file names, from -o default)", got)
	}
	if got := complete("contractd", "help", "ser"); got != "serve" {
		t.Errorf("contractd help ser<TAB> offers %q", got)
	}
	if got := complete("contractd", "completion", ""); got != "bash zsh" {
		t.Errorf("contractd completion <TAB> offers %q", got)
	}
}

// The zsh completion is valid zsh that compinit picks up for contractd,
// with every command's flags and their help.
func TestZshCompletion(t *testing.T) {
	zsh := need.Command(t, "zsh", "zsh")
	code, script, errs := runMain(t, "contractd", "completion", "zsh")
	if code != 0 || errs != "" {
		t.Fatalf("completion zsh: exit %d, stderr %q", code, errs)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "_contractd"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zsh, "-n", filepath.Join(dir, "_contractd")).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	out, err := exec.Command(zsh, "-f", "-c", `fpath=("$1" $fpath); autoload -U compinit; compinit -u -D; print -r -- $_comps[contractd]`, "zsh", dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_contractd" {
		t.Fatalf("compinit does not take the script for contractd: %v %q", err, out)
	}
	for _, d := range commandDocs(context.Background()) {
		if !strings.Contains(script, "\n        "+d.Name+")\n") {
			t.Errorf("no case for %s", d.Name)
		}
		for _, f := range d.Flags {
			if !strings.Contains(script, "'"+f.Flag+"[") {
				t.Errorf("%s: no spec for %s", d.Name, f.Flag)
			}
		}
	}
	if code, _, errs := runMain(t, "contractd", "completion", "fish"); code != exitUsage || !strings.Contains(errs, "bash or zsh") {
		t.Errorf("completion fish: exit %d, %q", code, errs)
	}
}
