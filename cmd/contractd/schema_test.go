package main

import (
	"os"
	"strings"
	"testing"
)

// `contractd schema NAME` prints the schema packaging/schema/NAME.json
// holds (the schema package checks that against the declarations and a
// real validator); a name it does not know is a usage error naming them.
func TestSchemaPrintsThePackagedSchemas(t *testing.T) {
	for _, name := range []string{"front-matter", "inventory", "test"} {
		code, out, errs := runMain(t, "contractd", "schema", name)
		want, err := os.ReadFile("../../packaging/schema/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || errs != "" || out != string(want) {
			t.Errorf("schema %s: exit %d, stderr %q, stdout the packaged schema: %v", name, code, errs, out == string(want))
		}
	}
	code, _, errs := runMain(t, "contractd", "schema", "front-mater")
	if code != 2 || !strings.Contains(errs, `no schema "front-mater" (want front-matter, inventory, test); did you mean "front-matter"?`) {
		t.Errorf("a misspelt schema: exit %d, %q", code, errs)
	}
}
