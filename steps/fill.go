package steps

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/fill"
)

// This file is where a ${name} reference in a script or a command meets
// its value: a shell reads it from a variable, it is never spliced into
// command text, so nothing a value contains can change which command runs.
// References in http and tcp steps are filled by package fill.

// ShellQuote quotes s for POSIX sh as one word (contracts.ShellQuote). It
// is the only function that writes a value into shell text, and it only
// ever writes the right side of an assignment (see Script).
func ShellQuote(s string) string { return contracts.ShellQuote(s) }

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// shellVar is the shell variable a reference reads: the name itself when
// it is a shell identifier, else a name made for it (${item.port} reads
// CONTRACTD_item_port; CONTRACTD_ is reserved, so no var can take it).
func shellVar(name string) string {
	if shellName.MatchString(name) {
		return name
	}
	return "CONTRACTD_" + strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// Script returns what a shell reads for a probe script or a repair
// command: every var assigned to a shell variable of its own name (values
// single-quoted by ShellQuote; reserved names are never assigned), then
// text as written, except that a reference whose name is not a shell
// identifier (${item.port}) is renamed to the variable made for it, and
// ${env.NAME} reads the target's environment variable NAME (${NAME}). The
// shell expands ${name} itself and never parses a value as syntax, in
// double quotes or not. Variables are not exported: no program the script
// starts sees them, so no value can reach one through its environment
// (LD_PRELOAD, PAGER, …).
func Script(text string, vars map[string]string) string {
	var b strings.Builder
	names := make([]string, 0, len(vars))
	for k := range vars {
		if shellName.MatchString(k) && !contracts.ReservedVarName(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s=%s\n", k, ShellQuote(vars[k]))
	}
	made := map[string]bool{}
	body := fill.Replace(text, func(name, m string) string {
		if env, ok := strings.CutPrefix(name, "env."); ok && shellName.MatchString(env) {
			return "${" + env + "}" // the target's environment variable
		}
		v, ok := vars[name]
		if !ok || shellName.MatchString(name) {
			return m
		}
		sv := shellVar(name)
		if !made[sv] {
			made[sv] = true
			fmt.Fprintf(&b, "%s=%s\n", sv, ShellQuote(v))
		}
		return "${" + sv + "}"
	})
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
	return b.String()
}

// SudoScript returns what a shell reads to run argv (SudoArgv's) as
// `sudo -n -- COMMAND ARGS…`: each word single-quoted as one argument, no
// var, no expansion, so sudo is asked for exactly the words a sudoers line
// allows. A bare command name is looked up on the target in
// contracts.SudoSearchPath, the directories `contractd sudoers` resolves it
// in, and its full path is what sudo gets; one found nowhere exits 127
// saying where it was looked for. -n makes sudo fail at once, with "sudo:
// a password is required", when no sudoers line allows the command,
// rather than wait for a password no one will type.
func SudoScript(argv []string) string {
	args := make([]string, len(argv)-1)
	for i, a := range argv[1:] {
		args[i] = " " + ShellQuote(a)
	}
	rest := strings.Join(args, "")
	if strings.HasPrefix(argv[0], "/") {
		return "exec sudo -n -- " + ShellQuote(argv[0]) + rest + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "for d in %s; do\n", strings.Join(contracts.SudoSearchPath, " "))
	fmt.Fprintf(&b, "\tif [ -f \"$d\"/%[1]s ] && [ -x \"$d\"/%[1]s ]; then exec sudo -n -- \"$d\"/%[1]s%[2]s; fi\n", ShellQuote(argv[0]), rest)
	b.WriteString("done\n")
	fmt.Fprintf(&b, "echo %s >&2\nexit 127\n", ShellQuote("contractd: "+argv[0]+": no such command in "+strings.Join(contracts.SudoSearchPath, ":")+" (where sudo commands are looked up)"))
	return b.String()
}

// ShowCommand renders a repair command for people (reports, `why`, logs):
// a reference whose value is plain (letters, digits, -_./:=@,+%) shows the
// value in place; any other reference stays as written and its value
// follows, quoted, so the line shows what runs: `echo ${v} (v='a; b')`.
func ShowCommand(text string, vars map[string]string) string {
	var bound []string
	seen := map[string]bool{}
	out := fill.Replace(text, func(name, m string) string {
		v, ok := vars[name]
		if !ok {
			return m
		}
		if v != "" && ShellQuote(v) == v {
			return v
		}
		if !seen[name] {
			seen[name] = true
			bound = append(bound, name+"="+ShellQuote(v))
		}
		return m
	})
	if len(bound) > 0 {
		out += " (" + strings.Join(bound, " ") + ")"
	}
	return out
}

// WithSecrets returns vars plus the named secrets' values, for the native
// probes, which fill ${SECRET} in a request at run time.
func WithSecrets(vars, secrets map[string]string) map[string]string {
	if len(secrets) == 0 {
		return vars
	}
	m := make(map[string]string, len(vars)+len(secrets))
	for k, v := range vars {
		m[k] = v
	}
	for k, v := range secrets {
		m[k] = v
	}
	return m
}
