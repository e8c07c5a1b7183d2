package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// serveFlagTables returns the flags docs/operations.md lists in its tables
// of serve flags: "Flags of `contractd serve`" and High availability's
// "### Flags".
func serveFlagTables(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	flagRe := regexp.MustCompile("`--([a-z][a-z0-9.-]*[a-z0-9])")
	out := map[string]bool{}
	tables := 0
	collecting, inTable := false, false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "Flags of `contractd serve`") || line == "### Flags":
			collecting, inTable = true, false
			tables++
		case collecting && strings.HasPrefix(line, "|"):
			inTable = true
			first := strings.SplitN(strings.TrimPrefix(line, "|"), " | ", 2)[0]
			for _, m := range flagRe.FindAllStringSubmatch(first, -1) {
				out[m[1]] = true
			}
		case collecting && inTable:
			collecting = false
		}
	}
	if tables != 2 || len(out) == 0 {
		t.Fatalf("found %d serve flag tables (%d flags) in docs/operations.md, want 2", tables, len(out))
	}
	return out
}

// Every flag `contractd serve --help` lists is in docs/operations.md's
// tables of serve flags, and every flag those tables list exists.
func TestServeFlagsAreDocumented(t *testing.T) {
	code, help, errs := runMain(t, "contractd", "serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help: exit %d: %s", code, errs)
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		if f, ok := strings.CutPrefix(line, "  --"); ok {
			flags[strings.Fields(f)[0]] = true
		}
	}
	docs := serveFlagTables(t)
	var undocumented, gone []string
	for f := range flags {
		if !docs[f] {
			undocumented = append(undocumented, "--"+f)
		}
	}
	for f := range docs {
		if !flags[f] {
			gone = append(gone, "--"+f)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(gone)
	if len(undocumented) > 0 {
		t.Errorf("serve --help lists flags docs/operations.md does not: %s", strings.Join(undocumented, ", "))
	}
	if len(gone) > 0 {
		t.Errorf("docs/operations.md lists serve flags that do not exist: %s", strings.Join(gone, ", "))
	}
}
