package contracts

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden from the current diagnostics")

// Every good contract loads with no diagnostics at all.
func TestGoodContractsLoadClean(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good contracts found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, ds := LoadFile(f, Options{})
			if len(ds) > 0 {
				t.Fatalf("want no diagnostics, got:\n%s", ds)
			}
			if c == nil || c.Name == "" || len(c.Stages) == 0 {
				t.Fatalf("contract not loaded: %+v", c)
			}
		})
	}
}

// Every bad contract yields exactly the diagnostics in its golden file, and
// a contract with an error is never returned half-loaded.
func TestBadContractsMatchGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad contracts found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, ds := LoadFile(f, Options{})
			got := ds.String()
			golden := strings.TrimSuffix(f, ".md") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -run TestBadContractsMatchGolden -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
			if len(ds) == 0 {
				t.Fatalf("a bad contract must produce diagnostics")
			}
			if ds.HasErrors() && c != nil {
				t.Errorf("contract with errors was returned: %+v", c)
			}
			if !ds.HasErrors() && c == nil {
				t.Errorf("contract with only warnings was not returned")
			}
		})
	}
}
