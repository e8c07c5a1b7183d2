package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

// cmdSudoers prints the sudoers lines that let exactly the commands the
// contracts run through sudo run, and nothing else: one NOPASSWD line per
// literal command per login user, grouped by the host they belong on.
func (m *Main) cmdSudoers(ctx context.Context, args []string) int {
	fs := m.flags("sudoers")
	user := fs.String("user", "contractd", "the `NAME` of the user contractd serve runs as: the login of the lines for the engine's own host")
	host := fs.String("host", "", "print only the lines for this target's host: an ssh target's name, or local")
	var lf loadFlags
	lf.register(fs)
	paths, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(paths) == 0 {
		m.errorf("sudoers: no contract files or directories given")
		return exitUsage
	}
	if !validLogin(*user) {
		m.errorf("sudoers: --user %q is not a user name a sudoers line can hold", *user)
		return exitUsage
	}
	var files []string
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			fs, err := contracts.ContractFiles(p)
			if err != nil {
				m.errorf("sudoers: %v", err)
				return exitUsage
			}
			files = append(files, fs...)
			continue
		}
		files = append(files, p)
	}
	cs, code := m.loadWith(files, lf)
	if code != exitOK {
		return code
	}
	g := &sudoers{user: *user, look: lookSudoPath, hosts: map[string]*sudoHost{}}
	for _, c := range cs {
		g.add(c)
	}
	if len(g.errs) > 0 {
		for _, d := range g.errs {
			fmt.Fprintln(m.Stderr, d.String())
		}
		return exitFailed
	}
	if *host != "" {
		key, ok := g.named[*host]
		if !ok {
			m.errorf("sudoers: no target %q runs commands through sudo in these contracts%s", *host, contracts.Suggest(*host, slices.Sorted(maps.Keys(g.named))))
			return exitUsage
		}
		g.only = key
	}
	g.write(m, files)
	return exitOK
}

// sudoHost is the lines one host needs: by login user, each command once.
type sudoHost struct {
	label     string // "the engine's own host", "ssh deploy@web:22"
	targets   []string
	lines     map[string]bool // "USER ALL=(root) NOPASSWD: CMD"
	contracts []string
}

// sudoers gathers the lines of a set of contracts.
type sudoers struct {
	user  string
	look  func(name string) (string, bool)
	hosts map[string]*sudoHost // by host key
	named map[string]string    // target name → host key
	only  string               // print only this host key
	errs  contracts.Diagnostics
}

// lookSudoPath finds a bare command name the way the run does on the
// target (steps.SudoScript): the first of contracts.SudoSearchPath holding
// an executable file of that name, here.
func lookSudoPath(name string) (string, bool) {
	for _, d := range contracts.SudoSearchPath {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// hostOf names the host a local or ssh target's commands run on, its key
// and the login that runs sudo there: the engine's own host under --user,
// or the ssh target's host under its login.
func (g *sudoers) hostOf(t *contracts.Target) (key, label, login string) {
	if t == nil || t.Kind == "local" {
		return "local", "the engine's own host (targets that are local; the login is the user contractd runs as, --user)", g.user
	}
	var s transports.Spec
	if k, ok := transports.KindOf(t.Kind); !ok || k.Address(t.Address, &s) != nil {
		return "", "", "" // lint refused it already
	}
	u, h, port := s.User, s.Host, s.Port
	hp := h
	if port != 22 {
		hp += ":" + strconv.Itoa(port)
	}
	return "ssh " + u + "@" + hp, "ssh " + u + "@" + hp, u
}

func (g *sudoers) host(key, label, target, contract string) *sudoHost {
	h := g.hosts[key]
	if h == nil {
		h = &sudoHost{label: label, lines: map[string]bool{}}
		g.hosts[key] = h
	}
	if !slices.Contains(h.targets, target) {
		h.targets = append(h.targets, target)
	}
	if !slices.Contains(h.contracts, contract) {
		h.contracts = append(h.contracts, contract)
	}
	if g.named == nil {
		g.named = map[string]string{}
	}
	g.named[target] = key
	return h
}

// add gathers the lines of one contract: its commands that run through
// sudo, and the pct or docker commands its containers' hosts run through
// sudo.
func (g *sudoers) add(c *contracts.Contract) {
	cmds, ds := c.SudoCommands()
	g.errs = append(g.errs, ds...) // none: lint refused the contract otherwise
	for _, sc := range cmds {
		t := c.TargetNamed(sc.Target)
		key, label, login := g.hostOf(t)
		path, ok := g.resolve(sc.Argv[0])
		if !ok {
			where := fmt.Sprintf("; its line is for %s: write its full path in the contract, or run contractd sudoers --host %s on that host", label, sc.Target)
			if key == "local" {
				where = ", the engine's own host, where it runs: write its full path in the contract, or install it"
			}
			g.errs = append(g.errs, contracts.Diagnostic{Pos: sc.Pos, Severity: contracts.DiagError,
				Msg: fmt.Sprintf("%s: the command %s is in none of %s on this host%s", sc.What, sc.Argv[0], strings.Join(contracts.SudoSearchPath, ":"), where)})
			continue
		}
		h := g.host(key, label, sc.Target, c.Path)
		h.lines[sudoersLine(login, path, sc.Argv[1:], false)] = true
	}
	for _, name := range slices.Sorted(maps.Keys(c.Targets)) {
		t := c.Targets[name]
		if !t.SudoHop() {
			continue
		}
		var parent *contracts.Target
		if t.Via != "" {
			parent = c.Targets[t.Via]
		}
		key, label, login := g.hostOf(parent)
		// The wrapper the transport runs on the parent, as its kind
		// writes it (`pct exec 112 --`, `docker exec -i web`).
		k, _ := transports.KindOf(t.Kind)
		var s transports.Spec
		if k.Wrap == nil || k.Address(t.Address, &s) != nil {
			continue // lint refused it already
		}
		wrap := k.Wrap(&s)
		tool, args := wrap[0], wrap[1:]
		path, ok := g.resolve(tool)
		if !ok {
			g.errs = append(g.errs, contracts.Diagnostic{Pos: t.Pos, Severity: contracts.DiagError,
				Msg: fmt.Sprintf("targets.%s: %s is in none of %s on this host; its line is for %s: run contractd sudoers --host %s on that host",
					name, tool, strings.Join(contracts.SudoSearchPath, ":"), label, nonEmpty(t.Via, "local"))})
			continue
		}
		h := g.host(key, label, nonEmpty(t.Via, "local"), c.Path)
		// Every step and repair in the container goes through this one
		// fixed argv (docs/transports.md): the container itself is the
		// boundary, as it is for root on that host.
		h.lines[sudoersLine(login, path, append(args, "sh", "-c"), true)] = true
	}
}

func (g *sudoers) resolve(cmd string) (string, bool) {
	if strings.HasPrefix(cmd, "/") {
		return cmd, true
	}
	return g.look(cmd)
}

// sudoersLine renders one rule: login may run path with exactly args as
// root without a password. With no args the line says "" (sudoers reads a
// command without arguments as "any arguments"); rest adds the one
// wildcard a container hop needs, its launcher's arguments.
func sudoersLine(login, path string, args []string, rest bool) string {
	words := []string{path}
	for _, a := range args {
		words = append(words, contracts.SudoersWord(a))
	}
	switch {
	case rest:
		words = append(words, "*")
	case len(args) == 0:
		words = append(words, `""`)
	}
	return login + " ALL=(root) NOPASSWD: " + strings.Join(words, " ")
}

// write prints the lines, host by host (the engine's own host first),
// each host's lines sorted, with comments that say where they go.
func (g *sudoers) write(m *Main, files []string) {
	w := m.Stdout
	say(w, "# sudoers lines generated by `contractd sudoers` from %d contract(s):\n", len(files))
	for _, f := range files {
		say(w, "#   %s\n", f)
	}
	say(w, "# Each command is exactly as the contract declares it, vars filled; bare names\n")
	say(w, "# were looked up in %s on this host.\n", strings.Join(contracts.SudoSearchPath, ":"))
	say(w, "# Install each host's lines on that host only (docs/operations.md, \"Least privilege\").\n")
	keys := slices.Sorted(maps.Keys(g.hosts))
	sort.SliceStable(keys, func(i, j int) bool { return keys[i] == "local" && keys[j] != "local" })
	printed := 0
	for _, k := range keys {
		if g.only != "" && k != g.only {
			continue
		}
		h := g.hosts[k]
		say(w, "\n# Host: %s\n# Targets: %s\n", h.label, strings.Join(h.targets, ", "))
		for _, l := range slices.Sorted(maps.Keys(h.lines)) {
			say(w, "%s\n", l)
			printed++
		}
	}
	if printed == 0 {
		say(w, "\n# No command of these contracts runs through sudo (no target has sudo: true).\n")
	}
}

// validLogin reports whether s can stand as the user of a sudoers line.
func validLogin(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '#' || s[0] == '%' || s[0] == '+' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
