package contracts

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestBulkLoadRestoresTheGCTarget(t *testing.T) {
	src, err := os.ReadFile("../fixtures/contracts/a2a-selfheal.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for i := 0; i < bulkLoad; i++ {
		p := filepath.Join(dir, "c"+string(rune('a'+i%26))+string(rune('a'+i/26))+".md")
		if err := os.WriteFile(p, src, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	prev := debug.SetGCPercent(150)
	defer debug.SetGCPercent(prev)
	cs, diags := LoadMany(paths, Options{})
	for i, d := range diags {
		if d.HasErrors() || cs[i] == nil {
			t.Fatalf("%s: %v", paths[i], d.Err())
		}
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("GC target after a bulk load is %d, want the caller's 150 back", got)
	}
}
