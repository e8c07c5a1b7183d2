package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/schemacheck"
)

// testFileBlock is a yaml block that is a test file: its first line is a
// comment naming one (`# a2a-selfheal.test.yaml, beside a2a-selfheal.md`).
var testFileBlock = regexp.MustCompile("(?s)```yaml[^\n]*\n(#[^\n]*\\.test\\.yaml[^\n]*\n.*?)```")

// Every front matter and inventory the docs show as good, and every test
// file they show (the editors' page and the tutorial's too), is valid
// against the JSON Schemas `contractd schema`
// prints: what the docs teach, an editor wired to the schemas accepts.
func TestDocExamplesMatchTheSchemas(t *testing.T) {
	compile := func(name string) *schemacheck.Schema {
		s, err := schemacheck.Compile(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fm, inv, tf := compile("front-matter"), compile("inventory"), compile("test")
	counts := map[string]int{}
	for _, page := range append(append([]string{}, pages...), "editors.md", "tutorial.md") {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		exs := extract(t, page, src)
		ctx := pageContext(t, page, exs)
		for _, ex := range exs {
			if ex.refuses != "" {
				continue
			}
			contract, _ := wrap(t, ex, ctx)
			front, _, ok := contracts.FrontMatterText([]byte(contract))
			if !ok {
				t.Fatalf("%s:%d: no front matter in the wrapped example", page, ex.line)
			}
			if err := fm.ValidateYAML(front); err != nil {
				t.Errorf("%s:%d (%s): the front-matter schema refuses what lint accepts: %v", filepath.Base(page), ex.line, ex.form, err)
			}
			counts["front matter"]++
			if first, _, _ := strings.Cut(ex.src, "\n"); ex.form == formInventory && !strings.Contains(first, ".test.yaml") {
				if err := inv.ValidateYAML([]byte(ex.src)); err != nil {
					t.Errorf("%s:%d: the inventory schema refuses it: %v", filepath.Base(page), ex.line, err)
				}
				counts["inventory"]++
			}
		}
		for _, m := range testFileBlock.FindAllSubmatch(src, -1) {
			if err := tf.ValidateYAML(m[1]); err != nil {
				t.Errorf("%s: the test-file schema refuses its example:\n%s\n%v", filepath.Base(page), m[1], err)
			}
			counts["test file"]++
		}
	}
	for _, what := range []string{"front matter", "inventory", "test file"} {
		if counts[what] == 0 {
			t.Errorf("no %s example found in %v", what, pages)
		}
	}
	t.Logf("validated: %v", counts)
}
