package steps

import (
	"os/exec"
	"strings"
	"testing"
)

// A script is the assignments, then the text as written; the shell it runs
// in reads every value intact and runs none.
func TestScriptPassesValuesAsShellVariables(t *testing.T) {
	vars := map[string]string{
		"v":         "a'b\"c $(touch /nonexistent/x) `id` ; | && \n ${HOME}",
		"item.port": "90'01",
		"port":      "90'01",
		"PATH":      "/nowhere", // reserved: never assigned
		"bad-name":  "x",
	}
	script := Script(`printf '%s|%s|%s' "${v}" "${item.port}" "$port"`, vars)
	if strings.Contains(script, "PATH=") || strings.Contains(script, "bad-name") {
		t.Fatalf("a reserved or invalid name was assigned:\n%s", script)
	}
	if !strings.Contains(script, `"${CONTRACTD_item_port}"`) {
		t.Fatalf("${item.port} not renamed to its variable:\n%s", script)
	}
	for _, shell := range []string{"sh", "bash"} {
		out, err := exec.Command(shell, "-c", script).Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", shell, err, script)
		}
		if want := vars["v"] + "|90'01|90'01"; string(out) != want {
			t.Errorf("%s printed %q, want %q", shell, out, want)
		}
	}
}

func TestShowCommand(t *testing.T) {
	vars := map[string]string{"unit": "worker@9001", "v": "x; rm -rf /", "empty": ""}
	for _, tc := range []struct{ in, want string }{
		{"systemctl restart ${unit}", "systemctl restart worker@9001"},
		{"echo ${v} ${v}", "echo ${v} ${v} (v='x; rm -rf /')"},
		{`x "${empty}"`, `x "${empty}" (empty='')`},
		{"curl -H ${API_TOKEN}", "curl -H ${API_TOKEN}"},
	} {
		if got := ShowCommand(tc.in, vars); got != tc.want {
			t.Errorf("ShowCommand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEnvReadsTheTargetsEnvironment: ${env.NAME} in a script or a repair
// command reads the target shell's own environment variable (lint would
// refuse ${NAME} in a command unless a var is called so), and ${HOME}, a
// name the shell reads itself, is the shell's too; neither is ever
// assigned from a var.
func TestEnvReadsTheTargetsEnvironment(t *testing.T) {
	script := Script(`printf '%s|%s' "${env.CONTRACTD_TEST_ENV}" "${HOME}"`, map[string]string{"HOME": "/nowhere", "env.CONTRACTD_TEST_ENV": "x"})
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"CONTRACTD_TEST_ENV=from the target", "HOME=/home/target"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, script)
	}
	if want := "from the target|/home/target"; string(out) != want {
		t.Fatalf("printed %q, want %q\n%s", out, want, script)
	}
}
