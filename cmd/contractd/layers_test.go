package main

import (
	"os/exec"
	"strings"
	"testing"
)

// layers ranks the project's packages: a package imports only packages of a
// lower rank, so imports run one way (CONTRIBUTING.md, "The layers").
// fixtures and docs are test support and the demo's, outside the ranks.
var layers = map[string]int{
	"transports/addr":        0,
	"engine/clock":           0,
	"transports":             1,
	"contracts/fill":         1,
	"contracts/calendar":     1,
	"contracts":              2,
	"steps":                  3,
	"engine/guard":           4,
	"engine/notify":          5,
	"engine/store":           6,
	"engine/store/etcdstore": 7,
	"engine":                 8,
	"engine/replay":          9,
	"engine/serve":           9,
	"engine/mcpserver":       10,
	"cmd/contractd":          11,
}

// No import runs back up the layers: contracts imports nothing of steps or
// the engine, steps nothing of the engine, the engine nothing of serve, and
// every package of the product has a rank (a new one is placed on purpose).
func TestImportsRunOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/contractd/contractd/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	outside := func(p string) bool { return strings.HasPrefix(p, "fixtures") || strings.HasPrefix(p, "docs") }
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		if outside(pkg) {
			continue
		}
		rank, ok := layers[pkg]
		if !ok {
			t.Errorf("package %s has no layer: give it a rank in layers (and CONTRIBUTING.md)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			dep := strings.TrimPrefix(imp, mod)
			if outside(dep) {
				continue
			}
			if r, ok := layers[dep]; ok && r >= rank {
				t.Errorf("%s imports %s: an import that does not run down the layers", pkg, dep)
			}
		}
	}
}
