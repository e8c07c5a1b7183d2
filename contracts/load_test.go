package contracts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A contract directory's dotfiles are what editors leave beside the file
// they edit: LoadDir, the daemon (ContractFiles) and the CLI's search by
// name all read the same files, and none of them reads a dotfile.
func TestContractFilesSkipDotfiles(t *testing.T) {
	src, err := os.ReadFile("testdata/good/minimal.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"minimal.md", ".minimal.md", ".#minimal.md", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{filepath.Join(dir, "minimal.md")}
	if got, err := ContractFiles(dir); err != nil || !slices.Equal(got, want) {
		t.Errorf("ContractFiles = %q, %v; want %q", got, err, want)
	}
	cs, ds, err := LoadDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0] == nil || cs[0].Name != "minimal" || len(ds) != 1 {
		t.Errorf("LoadDir read %d files, want minimal.md alone (diagnostics %v)", len(cs), ds)
	}
	if got, err := ContractFiles(filepath.Join(dir, "nope")); err != nil || len(got) != 0 {
		t.Errorf("ContractFiles of a missing directory = %q, %v; want none and no error", got, err)
	}
}
