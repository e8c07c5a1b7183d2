package contracts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const limitsHead = "---\nkind: responsibility\nname: bomb\nruntime_contract: 2\n"
const limitsBody = "---\n\n## Execution\n\n### Box {#box on=local}\n\n```bash {id=probe}\necho ok\n```\n\nExpected: `ok`\n"

// fill repeats unit until s is about n bytes long.
func fill(unit string, n int) string { return strings.Repeat(unit, max(1, n/len(unit))) }

// Nesting bombs of the sizes a hostile tester tried (40 KB: 660 MB and
// 1.5 s in lint before; 200 KB: 15 GB) are refused before the YAML or
// Markdown parser sees them, at the line and column of the first level too
// deep, and loading one allocates next to nothing.
func TestNestingBombsAreRefusedBeforeParsing(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"flow lists 40 KB", limitsHead + "vars: " + fill("[", 20000) + fill("]", 20000) + "\n" + limitsBody,
			"bomb.md:5:38: error: YAML: nested deeper than 32 levels"},
		{"flow lists 200 KB", limitsHead + "vars: " + fill("[", 100000) + fill("]", 100000) + "\n" + limitsBody,
			"bomb.md:5:38: error: YAML: nested deeper than 32 levels"},
		{"flow mappings 40 KB", limitsHead + "vars: " + fill("{a: ", 20000) + "1" + fill("}", 10000) + "\n" + limitsBody,
			"bomb.md:5:131: error: YAML: nested deeper than 32 levels"},
		{"behind an anchor", limitsHead + "vars: &a " + fill("[", 20000) + fill("]", 20000) + "\n" + limitsBody,
			"bomb.md:5:41: error: YAML: nested deeper than 32 levels"},
		{"behind a tag", limitsHead + "vars: !!seq " + fill("[", 20000) + fill("]", 20000) + "\n" + limitsBody,
			"bomb.md:5:44: error: YAML: nested deeper than 32 levels"},
		{"bare braces 40 KB", limitsHead + "vars: " + fill("{", 20000) + fill("}", 20000) + "\n" + limitsBody,
			"bomb.md:5:38: error: YAML: nested deeper than 32 levels"},
		{"block mappings", limitsHead + func() string {
			var b strings.Builder
			for i := range 200 {
				fmt.Fprintf(&b, "%sk:\n", strings.Repeat(" ", i))
			}
			return b.String()
		}() + limitsBody, "bomb.md:37:33: error: YAML: nested deeper than 32 levels"},
		{"block sequences on one line", limitsHead + "vars: x\nfor_each:\n  l:\n    " + fill("- ", 20000) + "x\n" + limitsBody,
			"bomb.md:8:65: error: YAML: nested deeper than 32 levels"},
		{"block quotes 40 KB", limitsHead + limitsBody + fill(">", 40000) + "\n",
			"bomb.md:16:33: error: block quotes and lists nested deeper than 32 levels"},
		{"lists on one line 40 KB", limitsHead + limitsBody + fill("- ", 40000) + "\n",
			"bomb.md:16:65: error: block quotes and lists nested deeper than 32 levels"},
		{"a mapping of 3,000 keys", limitsHead + "vars:\n" + func() string {
			var b strings.Builder
			for i := range 3000 {
				fmt.Fprintf(&b, "  k%d: v\n", i)
			}
			return b.String()
		}() + limitsBody, "bomb.md:2006:3: error: YAML: more than 2000 entries in one mapping or list"},
		{"a flow list of 3,000 items", limitsHead + "for_each: {l: [" + fill("{a: 1}, ", 3000*8) + "]}\n" + limitsBody,
			"bomb.md:5:16014: error: YAML: more than 2000 entries in one mapping or list"},
		{"a paragraph of 3,000 lines", limitsHead + limitsBody + "\n" + fill("[a]: /u\n", 3000*8),
			"bomb.md:2017:1: error: more than 2000 lines without a blank line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bomb.md")
			if err := os.WriteFile(path, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c, ds := LoadFile(path, Options{})
			runtime.ReadMemStats(&after)
			if c != nil || len(ds) != 1 || !strings.HasPrefix(ds[0].String(), path[:len(path)-len("bomb.md")]+tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant one: %s", ds, tc.want)
			}
			// Reading the file and checking it costs about its size; the
			// parsers it never reached would have cost hundreds of MB.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
				t.Errorf("loading a %d-byte bomb allocated %d MB", len(tc.src), alloc>>20)
			}
		})
	}
}

// The same limits hold in an inventory, with the inventory's positions.
func TestInventoryNestingIsRefused(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "site.yaml")
	os.WriteFile(inv, []byte("vars:\n  x: "+fill("[", 20000)+fill("]", 20000)+"\n"), 0o644)
	c, ds := Parse("c.md", []byte(limitsHead+limitsBody), Options{Inventory: inv})
	if c != nil || len(ds) != 1 || ds[0].String() != inv+":2:36: error: YAML: nested deeper than 32 levels (a limit of contracts and inventories)" {
		t.Fatalf("diagnostics:\n%s", ds)
	}
}

// Files over the size limit are refused without being read whole, with
// the size and the flag that raises it; a raised limit lets them load.
func TestSizeLimit(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.md")
	pad := "\n" + strings.Repeat("Prose that makes the contract long. ", 1<<15) + "\n" // 1.1 MiB
	os.WriteFile(big, []byte(limitsHead+limitsBody+pad), 0o644)
	want := big + ":1:1: error: contract is 1.13 MiB, larger than the 1 MiB limit (raise the limit with --max-file-size)"
	if _, ds := LoadFile(big, Options{}); ds.String() != want+"\n" {
		t.Errorf("LoadFile: %s\nwant %s", ds, want)
	}
	if _, ds := LoadMany([]string{big}, Options{}); ds[0].String() != want+"\n" {
		t.Errorf("LoadMany: %s", ds[0])
	}
	if _, ds := Parse(big, []byte(limitsHead+limitsBody+pad), Options{}); ds.String() != want+"\n" {
		t.Errorf("Parse: %s", ds)
	}
	if c, ds := LoadFile(big, Options{MaxFileSize: 2 << 20}); c == nil {
		t.Errorf("with a 2 MiB limit: %s", ds)
	}
	inv := filepath.Join(dir, "big.yaml")
	os.WriteFile(inv, []byte("vars:\n  x: y\n"+strings.Repeat("# a long comment line\n", 60000)), 0o644)
	if _, ds := Parse("c.md", []byte(limitsHead+limitsBody), Options{Inventory: inv}); !strings.Contains(ds.String(), inv+":1:1: error: inventory is 1.26 MiB, larger than the 1 MiB limit") {
		t.Errorf("inventory: %s", ds)
	}
	// Not a regular file: read up to the limit, then refused.
	if _, ds := LoadFile("/dev/zero", Options{}); ds.String() != "/dev/zero:1:1: error: contract is larger than the 1 MiB limit (raise the limit with --max-file-size)\n" {
		t.Errorf("/dev/zero: %s", ds)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1MiB": 1 << 20, "4M": 4 << 20, "512KiB": 512 << 10, "1.5MiB": 3 << 19, "2000000": 2000000, "1 GiB": 1 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "big", "-1MiB", "0", "12", "1TiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

// A byte order mark is accepted the same in a contract and an inventory,
// and never counted as a column.
func TestByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "site.yaml")
	os.WriteFile(inv, []byte("\ufeffvars:\n  port: \"9100\"\n"), 0o644)
	src := "\ufeff" + limitsHead + "vars: {port: \"9000\"}\n" + limitsBody
	c, ds := Parse("c.md", []byte(src), Options{Inventory: inv})
	if c == nil || len(ds) != 0 || c.Vars["port"] != "9100" {
		t.Fatalf("BOM contract with BOM inventory: %v %s", c, ds)
	}
	os.WriteFile(inv, []byte("\ufeffbogus: 1\n"), 0o644)
	if _, ds := Parse("c.md", []byte(src), Options{Inventory: inv}); ds.String() != inv+":1:1: error: unknown key \"bogus\" in inventory\n" {
		t.Errorf("inventory error on the BOM's line: %s", ds)
	}
	if _, ds := Parse("c.md", []byte("\ufeff"+limitsHead+"bogus: 1\n"+limitsBody), Options{}); ds.String() != "c.md:5:1: error: unknown key \"bogus\" in front matter\n" {
		t.Errorf("contract: %s", ds)
	}
}

// A --var names a var some contract reads: one of its vars, or a $name or
// ${name} in its text. Anything else is a mistake, with a suggestion for a
// likely typo.
func TestVarOverridesMustBeDeclared(t *testing.T) {
	src := limitsHead + "vars: {pi_url: \"http://x\", port: \"9\"}\n" + limitsBody + "\n| Condition | Action |\n|---|---|\n| `probe.stdout == \"bad\"` | `restart \"${unit}\" \"$mode\"` |\n"
	c, ds := Parse("c.md", []byte(src), Options{Vars: map[string]string{"unit": "x", "mode": "y"}})
	if c == nil {
		t.Fatalf("%s", ds)
	}
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"pi_url": "a", "unit": "b", "mode": "c"}, ""},
		{map[string]string{"nosuch": "1"}, `--var nosuch: bomb declares no var "nosuch" (its vars: pi_url, port)`},
		{map[string]string{"pi_ulr": "1", "port": "2"}, `--var pi_ulr: bomb declares no var "pi_ulr" (did you mean "pi_url"?)`},
	} {
		err := CheckVarOverrides([]*Contract{c}, tc.vars)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%v: %v, want %q", tc.vars, err, tc.want)
		}
	}
	other, _ := Parse("d.md", []byte(strings.Replace(limitsHead, "name: bomb", "name: other", 1)+"vars: {nosuch: \"1\"}\n"+limitsBody), Options{})
	if err := CheckVarOverrides([]*Contract{c, other}, map[string]string{"nosuch": "1"}); err != nil {
		t.Errorf("a var one of the contracts declares: %v", err)
	}
	if err := CheckVarOverrides([]*Contract{c, other}, map[string]string{"zzz": "1"}); fmt.Sprint(err) != `--var zzz: none of the contracts declares a var "zzz" (their vars: nosuch, pi_url, port)` {
		t.Errorf("two contracts: %v", err)
	}
}

// An inventory var a contract does not declare is fine (one inventory
// serves several contracts), unless it looks like a typo of one the
// contract declares and the inventory leaves at its default.
func TestInventoryNearMissIsAWarning(t *testing.T) {
	inv := filepath.Join(t.TempDir(), "site.yaml")
	os.WriteFile(inv, []byte("vars:\n  pi_ulr: http://127.0.0.1:9\n  mumuni_addr: 127.0.0.1:7\n"), 0o644)
	c, ds := Parse("c.md", []byte(limitsHead+"vars: {pi_url: \"http://x\"}\n"+limitsBody), Options{Inventory: inv})
	want := inv + `:2:3: warning: vars: bomb declares no var "pi_ulr" (did you mean "pi_url"? as written, pi_url keeps its default)` + "\n"
	if c == nil || ds.String() != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", ds, want)
	}
	os.WriteFile(inv, []byte("vars:\n  pi_ulr: http://127.0.0.1:9\n  pi_url: http://127.0.0.1:8\n"), 0o644)
	if _, ds := Parse("c.md", []byte(limitsHead+"vars: {pi_url: \"http://x\"}\n"+limitsBody), Options{Inventory: inv}); len(ds) != 0 {
		t.Errorf("the inventory sets pi_url too, so pi_ulr is another contract's: %s", ds)
	}
}

// BenchmarkNestingBomb loads the 40 KB flow-list bomb: it is refused by
// the depth limit before the YAML parser runs.
func BenchmarkNestingBomb(b *testing.B) {
	src := []byte(limitsHead + "vars: " + fill("[", 20000) + fill("]", 20000) + "\n" + limitsBody)
	for b.Loop() {
		if c, _ := Parse("bomb.md", src, Options{}); c != nil {
			b.Fatal("bomb loaded")
		}
	}
}
