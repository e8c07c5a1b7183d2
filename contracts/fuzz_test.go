package contracts

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser without the recover safety
// net: a malformed file must never panic, and a file with errors must never
// come back half-loaded.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.md")
	seeds = append(seeds, zulipFixture)
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: x\nruntime_contract: 2\n---\n## Execution\n### S {#s}\n```bash {id=\n```\n| Field | Healthy |\n|-|-|\n| `x` | `it >` |\n"))
	l := newLoader(Options{})
	md := newMarkdownParser()
	f.Fuzz(func(t *testing.T, src []byte) {
		c, ds := l.parse(md, "fuzz.md", src, false)
		if ds.HasErrors() && c != nil {
			t.Fatalf("contract returned despite errors:\n%s", ds)
		}
		if !ds.HasErrors() && c == nil {
			t.Fatalf("no contract and no error:\n%s", ds)
		}
		for _, d := range ds {
			if d.Pos.Line < 1 || d.Pos.Col < 1 {
				t.Fatalf("diagnostic without a position: %s", d)
			}
		}
	})
}
