package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// rooms places each package of the product in a room: the parts of the
// house CONTRIBUTING.md ("The rooms") draws. fixtures and docs are test
// support and the demo's, outside the rooms.
var rooms = map[string]string{
	"cmd/contractd":          "cli",
	"lsp":                    "editor",
	"schema":                 "editor",
	"engine/serve":           "daemon",
	"engine/mcpserver":       "daemon",
	"engine":                 "run",
	"engine/replay":          "run",
	"engine/guard":           "guards",
	"engine/notify":          "routes",
	"engine/store":           "state",
	"engine/store/etcdstore": "state",
	"steps":                  "kinds",
	"contracts":              "format",
	"contracts/fill":         "format",
	"contracts/monitrc":      "format",
	"contracts/calendar":     "format",
	"transports":             "transports",
	"transports/addr":        "transports",
	"engine/clock":           "clock",
}

// arrows are the rooms each room may import; a room may always import
// itself. Every other import between rooms is one that never should exist:
// the editor's help (the language server, the schemas) reads the format,
// the step kinds and the test files' runner and drives nothing; the daemon
// drives runs, a run drives everything below it, the guards and
// routes decide and deliver but keep no state of their own, state is bytes
// and files (it knows nothing of what a ledger holds), the format knows
// the transports only by their table of kinds, and the transports and the
// clock import nothing of the project.
var arrows = map[string][]string{
	"cli":        {"editor", "daemon", "run", "guards", "routes", "state", "kinds", "format", "transports", "clock"},
	"editor":     {"run", "kinds", "format", "transports"},
	"daemon":     {"run", "guards", "routes", "state", "kinds", "format", "transports", "clock"},
	"run":        {"guards", "routes", "state", "kinds", "format", "transports", "clock"},
	"guards":     {"format", "clock"},
	"routes":     {"format", "transports", "clock"},
	"state":      {"clock"},
	"kinds":      {"format", "transports"},
	"format":     {"transports"},
	"transports": {},
	"clock":      {},
}

// TestImportsFollowTheRooms: every package of the product is in a room,
// and every import between rooms is an arrow the rooms allow.
func TestImportsFollowTheRooms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/contractd/contractd/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, bad := range strayImports(mod, string(out)) {
		t.Error(bad)
	}
}

// strayImports returns what go list's output (a package and its imports
// per line) holds that the rooms do not allow, one line each.
func strayImports(mod, list string) []string {
	outside := func(p string) bool { return strings.HasPrefix(p, "fixtures") || strings.HasPrefix(p, "docs") }
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		if outside(pkg) {
			continue
		}
		room, ok := rooms[pkg]
		if !ok {
			bad = append(bad, "package "+pkg+" is in no room: place it in rooms (and CONTRIBUTING.md)")
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, mod)
			if !ok || outside(dep) {
				continue
			}
			to, ok := rooms[dep]
			if ok && to != room && !slices.Contains(arrows[room], to) {
				bad = append(bad, pkg+" ("+room+") imports "+dep+" ("+to+"): an arrow the rooms do not allow")
			}
		}
	}
	return bad
}

// TestTheRoomsRefuseAnArrowUpwards: the check itself, on an import the
// rooms forbid (transports importing the engine) and one they allow.
func TestTheRoomsRefuseAnArrowUpwards(t *testing.T) {
	const mod = "github.com/contractd/contractd/"
	bad := strayImports(mod, mod+"transports "+mod+"engine "+mod+"transports/addr\n"+mod+"engine "+mod+"transports")
	if len(bad) != 1 || bad[0] != "transports (transports) imports engine (run): an arrow the rooms do not allow" {
		t.Fatalf("stray imports %q; want exactly the one from transports to engine", bad)
	}
}
