package contracts

import (
	"reflect"
	"strings"
	"testing"
)

// A path names a key that is not a name in brackets, as expr reads it,
// and is split the same way wherever it is read: a health row's field,
// the paths an expression reads, the run's lookup.
func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		path  string
		parts []string
	}{
		{"stdout", []string{"stdout"}},
		{"health.queue.depth", []string{"health", "queue", "depth"}},
		{`perf["/"].value`, []string{"perf", "/", "value"}},
		{`perf["/var/lib.d"].crit`, []string{"perf", "/var/lib.d", "crit"}},
		{`perf["total 5m"]`, []string{"perf", "total 5m"}},
		{`perf["it's \"x\""].uom`, []string{"perf", `it's "x"`, "uom"}},
		{`a["b"]["c"].d`, []string{"a", "b", "c", "d"}},
		{`disk.perf["/boot/efi"].value`, []string{"disk", "perf", "/boot/efi", "value"}},
	} {
		if got := SplitPath(tc.path); !reflect.DeepEqual(got, tc.parts) {
			t.Errorf("SplitPath(%s) = %q, want %q", tc.path, got, tc.parts)
		}
		if !reFieldPath.MatchString(tc.path) {
			t.Errorf("%s is not a field a health row may name", tc.path)
		}
		if got := SplitPath(JoinPath(tc.parts)); !reflect.DeepEqual(got, tc.parts) {
			t.Errorf("SplitPath(JoinPath(%q)) = %q", tc.parts, got)
		}
	}
	if got := JoinPath([]string{"perf", "/", "value"}); got != `perf["/"].value` {
		t.Errorf("JoinPath: %s, want perf[\"/\"].value", got)
	}
	for _, bad := range []string{`perf["/`, `perf[/]`, `perf['/']`, `perf["/"]x`, `.a`, `a.`} {
		if reFieldPath.MatchString(bad) {
			t.Errorf("%s is accepted as a field", bad)
		}
	}
}

// A row's field may name a JSON key that is not a name (a label with a
// slash), in brackets; a malformed one is an error that shows the form.
func TestRowFieldWithABracketedKey(t *testing.T) {
	src := "---\nname: k\nruntime_contract: 2\n---\n\n## Execution\n\n### S {#s}\n\n" +
		"```bash {id=pod as=json fields=\"labels:map\"}\necho '{\"labels\": {\"app.kubernetes.io/name\": \"web\"}}'\n```\n\n" +
		"| Field | Healthy | Critical |\n|---|---|---|\n| `FIELD` | `web` | != web |\n"
	c, ds := Parse("k.md", []byte(strings.Replace(src, "FIELD", `labels["app.kubernetes.io/name"]`, 1)), Options{})
	if ds.HasErrors() {
		t.Fatalf("a bracketed key: %v", ds.Err())
	}
	if f := c.Stages[0].Steps[0].Health[0].Field; f != `labels["app.kubernetes.io/name"]` {
		t.Errorf("field %s", f)
	}
	_, ds = Parse("k.md", []byte(strings.Replace(src, "FIELD", `labels["app`, 1)), Options{})
	if err := ds.Err(); err == nil || !strings.Contains(err.Error(), `k.md:16:3: error: field "labels[\"app" is not a field name`) || !strings.Contains(err.Error(), `perf["/"].value`) {
		t.Errorf("a malformed bracketed key: %v", err)
	}
}

// FuzzPaths: any text splits (never panics), and its parts written back
// as a path split to the same parts.
func FuzzPaths(f *testing.F) {
	for _, s := range []string{`perf["/"].value`, `a["b"]["c"].d`, `perf["/`, `a..b`, `["x"]`, `a["\""].b`, `a[""]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts := SplitPath(s)
		if again := SplitPath(JoinPath(parts)); !reflect.DeepEqual(again, parts) {
			t.Fatalf("%q splits to %q; written back as %s it splits to %q", s, parts, JoinPath(parts), again)
		}
	})
}
