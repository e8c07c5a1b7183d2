package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quotingContract probes and repairs through a real local shell: the probe
// and the repair each write a var's value to a file, once from a contract
// var (${v}) and once from a for_each item (${item.val} and ${val}). Its
// probes always fail, so every repair runs.
const quotingContract = `---
name: quoting
runtime_contract: 2
vars:
  dir: %s
  v: %s
for_each:
  items:
    - {name: one, val: %s}
---

# Quoting

## Execution

### Plain {#plain agent=plain}

` + "```sh {id=p}\nprintf '%%s' \"${v}\" > \"$dir/probe_v\"\necho bad\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action |
|-----------|--------|
| ` + "`p.stdout != \"ok\"`" + ` | ` + "`printf '%%s' \"${v}\" > \"${dir}/action_v\"; echo unquoted ${v} > \"${dir}/action_unquoted\"`" + ` |

### Items {#items agent=$name for_each=items}

` + "```sh {id=q}\nprintf '%%s' \"${item.val}\" > \"$dir/probe_item\"\necho bad\n```" + `

Expected: ` + "`ok`" + `

| Condition | Action |
|-----------|--------|
| ` + "`q.stdout != \"ok\"`" + ` | ` + "`printf '%%s' \"${item.val}\" > \"${dir}/action_item\"; printf '%%s' \"${val}\" > \"${dir}/action_val\"; echo ${val} > \"${dir}/action_val_unquoted\"`" + ` |
`

// yamlString writes s as a double-quoted YAML scalar (JSON's escapes are
// YAML's).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Every value reaches probes and repairs as data: whatever it holds and
// wherever it comes from (the contract's vars, an inventory, --var, a
// for_each item), it arrives intact and never runs. On 02630f2 vars were
// spliced into the repair command at load, and every one of these ran.
func TestVarsReachCommandsAsDataFromEverySource(t *testing.T) {
	payloads := []struct{ name, value string }{
		{"command substitution", "$(touch PWN)"},
		{"backticks", "`touch PWN`"},
		{"semicolon", "x; touch PWN"},
		{"pipe", "x | touch PWN"},
		{"and", "x && touch PWN"},
		{"newline", "x\ntouch PWN"},
		{"single quote", "x'; touch PWN; echo '"},
		{"double quote", "x\"; touch PWN; echo \""},
		{"nested expansion", "${x:-$(touch PWN)}"},
		{"backslash and quotes", `\'\"$(touch PWN)\`},
		{"arithmetic", "$((1+1))$(touch PWN)"},
		{"carriage return and tab", "a\r\tb;touch PWN"},
	}
	for _, source := range []string{"contract", "inventory", "--var", "for_each"} {
		for _, p := range payloads {
			t.Run(source+"/"+p.name, func(t *testing.T) {
				dir := t.TempDir()
				pwned := filepath.Join(dir, "pwned")
				value := strings.ReplaceAll(p.value, "PWN", pwned)
				contractV, itemV := "plain", "plain"
				args := []string{"contractd", "run", "--quiet", "--verify-grace", "1ms", "--state-dir", filepath.Join(dir, "state")}
				switch source {
				case "contract":
					contractV = value
				case "inventory":
					inv := filepath.Join(dir, "inv.yaml")
					if err := os.WriteFile(inv, []byte("vars:\n  v: "+yamlString(value)+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					args = append(args, "--inventory", inv)
				case "--var":
					args = append(args, "--var", "v="+value)
				case "for_each":
					itemV = value
				}
				path := filepath.Join(dir, "c.md")
				src := fmt.Sprintf(quotingContract, yamlString(dir), yamlString(contractV), yamlString(itemV))
				if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				code, out, errs := runMain(t, append(args, path)...)
				if code != 0 {
					t.Fatalf("run exit %d:\n%s\n%s", code, out, errs)
				}
				if _, err := os.Stat(pwned); err == nil {
					t.Fatalf("%q ran a command of its own:\n%s", value, out)
				}
				want := map[string]string{"probe_v": contractV, "action_v": contractV, "probe_item": itemV, "action_item": itemV, "action_val": itemV}
				if source == "inventory" || source == "--var" {
					want["probe_v"], want["action_v"] = value, value
				}
				for file, w := range want {
					got, err := os.ReadFile(filepath.Join(dir, file))
					if err != nil {
						t.Fatalf("%s: %v (the probe or repair did not run)\n%s\n%s", file, err, out, errs)
					}
					if string(got) != w {
						t.Errorf("%s got %q, want %q intact", file, got, w)
					}
				}
				// Unquoted, the shell splits the value into words, but still
				// never runs it.
				for _, file := range []string{"action_unquoted", "action_val_unquoted"} {
					if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
						t.Errorf("%s: %v", file, err)
					}
				}
			})
		}
	}
}

// explain and the run report show the command as declared, the value
// beside it: never the value spliced in as if it were shell text.
func TestExplainAndReportShowVarsBesideTheCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.md")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(quotingContract, yamlString(dir), `"plain"`, `"plain"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	value := "$(touch " + filepath.Join(dir, "pwned") + ")"
	code, out, errs := runMain(t, "contractd", "explain", "--var", "v="+value, path)
	if code != 0 {
		t.Fatalf("explain exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `printf '%s' "${v}" > "${dir}/action_v"`) || !strings.Contains(out, fmt.Sprintf("  v            %q", value)) {
		t.Fatalf("explain does not show the declared command and the var's value:\n%s", out)
	}
	if strings.Contains(out, `"`+value+`" >`) {
		t.Fatalf("explain shows the value spliced into the command:\n%s", out)
	}
	code, out, errs = runMain(t, "contractd", "run", "--quiet", "--verify-grace", "1ms", "--state-dir", filepath.Join(dir, "state"), "--var", "v="+value, path)
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, errs)
	}
	want := fmt.Sprintf(`printf '%%s' "${v}" > "%s/action_v"; echo unquoted ${v} > "%s/action_unquoted" (v='%s')`, dir, dir, value)
	if !strings.Contains(out, want) {
		t.Fatalf("report does not show %s:\n%s", want, out)
	}
}

// A var of a name the shell reads itself would let a value pick the
// program that runs (PATH) or how words split (IFS): such names are refused
// from every source.
func TestVarsRefuseNamesTheShellReads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.md")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(quotingContract, yamlString(dir), `"plain"`, `"plain"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runMain(t, "contractd", "run", "--quiet", "--state-dir", filepath.Join(dir, "state"), "--var", "PATH="+dir, path)
	if code != exitUsage || !strings.Contains(errs, `--var "PATH=`) || !strings.Contains(errs, "reserved") {
		t.Fatalf("--var PATH=…: exit %d, %s", code, errs)
	}
	inv := filepath.Join(dir, "inv.yaml")
	if err := os.WriteFile(inv, []byte("vars:\n  IFS: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runMain(t, "contractd", "lint", "--inventory", inv, path)
	if code != 1 || !strings.Contains(out, `inv.yaml:2:3: error: vars: "IFS" is reserved`) {
		t.Fatalf("inventory IFS: exit %d, %s", code, out)
	}
}
