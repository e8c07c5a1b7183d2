package contracts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVarLint(t *testing.T) {
	const head = "---\nname: v\nruntime_contract: 2\n"
	const stage = "---\n\n## Execution\n\n### S {#s}\n\n```sh {id=p}\necho ok\n```\n\nExpected: `ok`\n\n| Condition | Action |\n|---|---|\n"
	for _, tc := range []struct{ name, src, want string }{
		{"a reference in single quotes is never expanded",
			head + "vars: {v: x}\n" + stage + "| `p.stdout != \"ok\"` | `echo '${v}' \"${v}\"` |\n",
			`v.md:19:31: warning: ${v} is inside single quotes, where the shell does not expand it`},
		{"a var named PATH could pick the program",
			head + "vars: {PATH: /tmp}\n" + stage + "| `p.stdout != \"ok\"` | `true` |\n",
			`v.md:4:8: error: vars: "PATH" is reserved`},
		{"a for_each key named IFS",
			head + "for_each: {l: [{IFS: x}]}\n" + stage + "| `p.stdout != \"ok\"` | `true` |\n",
			`v.md:4:17: error: for_each.l[0]: key "IFS" is reserved`},
		{"a command notifier does not take vars",
			head + "vars: {v: x}\nnotify:\n  - {command: {run: \"logger ${v}\"}}\n" + stage + "| `p.stdout != \"ok\"` | `true` |\n",
			`v.md:6:21: error: notify[0].command.run: ${…} is not filled into a command line`},
		{"an undefined reference in a command",
			head + stage + "| `p.stdout != \"ok\"` | `echo ${nosuch}` |\n",
			`v.md:18:30: error: undefined var "nosuch"`},
		{"a shell default for an undefined var",
			head + "vars: {v: x}\n" + stage + "| `p.stdout != \"ok\"` | `echo \"${v:-a}\" \"${nosuch:-b}\"` |\n",
			`v.md:19:41: error: undefined var "nosuch" in ${nosuch:-b}`},
		{"an http step fills ${name} only",
			head + "vars: {port: \"80\"}\n---\n\n## Execution\n\n### S {#s}\n\n```http {id=h}\nGET http://127.0.0.1:${port:-8080}/\n```\n",
			`v.md:12:22: error: ${port:-8080}: an http or tcp step fills only ${name}, not shell expansions; give port its default under vars`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := Parse("v.md", []byte(tc.src), Options{})
			if !strings.Contains(ds.String(), tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant %s", ds, tc.want)
			}
		})
	}
	if _, ds := Parse("v.md", []byte(head+"vars: {v: x}\n"+stage+"| `p.stdout != \"ok\"` | `echo \"${v}\" it's` |\n"), Options{}); len(ds) != 0 {
		t.Fatalf("a reference in double quotes (and a quote after it) is clean: %s", ds)
	}
	// A var is a shell variable in a command, so the shell's expansions of
	// it work there (steps.TestScriptShellExpansions runs one).
	if _, ds := Parse("v.md", []byte(head+"vars: {v: x}\n"+stage+"| `p.stdout != \"ok\"` | `echo \"${v:-a}\" ${v:+set} ${v%x}` |\n"), Options{}); len(ds) != 0 {
		t.Fatalf("a shell expansion of a var in a command is clean: %s", ds)
	}
}

// An inventory's ssh address is data: one user, one host, no control
// characters.
func TestSSHAddressIsOneUserAndHost(t *testing.T) {
	for _, addr := range []string{`"root@h\nx"`, `"root@a@b"`, `"root@h/x"`, `"root@h\u0000"`} {
		src := "---\nname: v\nruntime_contract: 2\ntargets:\n  t: {ssh: " + addr + "}\n---\n"
		if _, ds := Parse("v.md", []byte(src), Options{}); !strings.Contains(ds.String(), "targets.t.ssh: expected user@host") {
			t.Errorf("ssh: %s accepted: %s", addr, ds)
		}
	}
	if _, ds := Parse("v.md", []byte("---\nname: v\nruntime_contract: 2\ntargets:\n  t: {ssh: \"root@[::1]:2222\"}\n---\n"), Options{}); strings.Contains(ds.String(), "targets.t.ssh") {
		t.Errorf("an IPv6 address was refused: %s", ds)
	}
}

// vars.NAME reads what the run binds: a var the contract declares, one an
// inventory or --var gives, or, in a for_each stage, an item's key. A name
// none of them gives reads null, so every row over it would be unknown.
func TestVarReadsMustBeBound(t *testing.T) {
	const src = "---\nname: v\nruntime_contract: 2\n---\n\n## Execution\n\n### S {#s}\n\n```sh {id=p}\necho 1\n```\n\n" +
		"| Field | Healthy | Critical |\n|---|---|---|\n| `stdout` | `it < vars.limit` | `it >= vars.limit` |\n"
	_, ds := Parse("v.md", []byte(src), Options{})
	if want := `v.md:16:20: error: vars.limit: the contract declares no var "limit" (declare it under vars, with a default); the run would read null`; !strings.Contains(ds.String(), want) {
		t.Fatalf("diagnostics:\n%s\nwant %s", ds, want)
	}
	inv := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(inv, []byte("vars:\n  limit: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ds := Parse("v.md", []byte(src), Options{Inventory: inv}); len(ds) != 0 {
		t.Errorf("a var the inventory gives is bound: %s", ds)
	}
	if _, ds := Parse("v.md", []byte(src), Options{Vars: map[string]string{"limit": "5"}}); len(ds) != 0 {
		t.Errorf("a var --var gives is bound: %s", ds)
	}
}
