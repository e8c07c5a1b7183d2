package schema_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/schemacheck"
	"github.com/contractd/contractd/schema"
	_ "github.com/contractd/contractd/steps" // the step kinds the contracts use
	"github.com/contractd/contractd/transports"
)

var update = flag.Bool("update", false, "rewrite packaging/schema/ from the declarations")

// The checked-in schemas are what the declarations generate: a key added
// to lint and not to packaging/schema/ fails here (go test ./schema
// -update rewrites them).
func TestCheckedInSchemasAreGenerated(t *testing.T) {
	for _, name := range schema.Names {
		got, err := schema.Generate(name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "packaging", "schema", name+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./schema -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the declarations generate: run go test ./schema -update", path)
		}
	}
}

func compile(t *testing.T, name string) *schemacheck.Schema {
	t.Helper()
	s, err := schemacheck.Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every shipped contract's front matter and every shipped test file is
// valid, as lint and contractd test find them.
func TestShippedFilesAreValid(t *testing.T) {
	fm, tf := compile(t, "front-matter"), compile(t, "test")
	mds, _ := filepath.Glob("../fixtures/contracts/*.md")
	good, _ := filepath.Glob("../contracts/testdata/good/*.md")
	tests, _ := filepath.Glob("../fixtures/contracts/*.test.yaml")
	if len(mds) < 5 || len(tests) < 5 {
		t.Fatalf("found %d contracts and %d test files", len(mds), len(tests))
	}
	for _, path := range append(mds, good...) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, ds := contracts.Parse(path, src, contracts.Options{}); ds.HasErrors() {
			t.Fatalf("%s does not lint:\n%s", path, ds)
		}
		text, _, ok := contracts.FrontMatterText(src)
		if !ok {
			t.Fatalf("%s: no front matter", path)
		}
		if err := fm.ValidateYAML(text); err != nil {
			t.Errorf("%s: lint accepts its front matter, the schema refuses it: %v", path, err)
		}
	}
	for _, path := range tests {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := tf.ValidateYAML(src); err != nil {
			t.Errorf("%s: the schema refuses it: %v", path, err)
		}
	}
}

// A front matter lint refuses for a wrong key or value, the schema refuses
// too, at the same key: `shedule:` is not a key in either.
func TestSchemaRefusesWhatLintRefuses(t *testing.T) {
	fm := compile(t, "front-matter")
	cases := []struct {
		name, yaml string
		lint       string // what lint says
		where      string // where the validator says it
	}{
		{"misspelt key", "schedule: {every: 5m}\nshedule: {every: 1m}\n", `unknown key "shedule" in front matter (did you mean "schedule"?)`, "shedule"},
		{"misspelt guard", "guards: {debounse: 5m}\n", `unknown key "debounse" in guards (did you mean "debounce"?)`, "debounse"},
		{"bare number duration", "guards: {debounce: 300}\n", "guards.debounce: expected a duration", "/guards/debounce"},
		{"format", "runtime_contract: 3\n", "runtime_contract: this engine runs format 2", "/runtime_contract"},
		{"alert_on", "alert_on: always\n", "alert_on: must be change, repair or critical", "/alert_on"},
		{"two transports", "targets: {box: {ssh: root@h, docker: app}}\n", "sets ssh and docker: a target is exactly one transport kind", "/targets/box"},
		{"no transport", "targets: {box: {via: h}}\n", "needs exactly one of " + transports.KindNames("or"), "/targets/box"},
		{"crash loop half", "guards: {crash_loop: {max_restarts: 3}}\n", "needs both max_restarts and per", "/guards/crash_loop"},
		{"notifier kind", "notify:\n  - {slak: {}}\n", `unknown key "slak" in notify`, "slak"},
		{"notifier option", "notify:\n  - {webhook: {url: http://h/x, retrys: 3}}\n", `unknown option "retrys"`, "retrys"},
		{"notifier required", "notify:\n  - {webhook: {}}\n", "needs url", "url"},
		{"notifier enum", "notify:\n  - {log: {format: yaml}}\n", "format: must be text or json", "/notify/0/log/format"},
		{"host_key", "targets: {box: {ssh: root@h, host_key: yes}}\n", "host_key: must be strict or accept-new", "/targets/box/host_key"},
		{"a var that is a list", "vars: {port: [1, 2]}\n", "vars.port: expected a scalar", "/vars/port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			front := "name: example\nruntime_contract: 2\n" + tc.yaml
			if strings.HasPrefix(tc.yaml, "runtime_contract") {
				front = "name: example\n" + tc.yaml
			}
			src := "---\n" + front + "---\n"
			_, ds := contracts.Parse("example.md", []byte(src), contracts.Options{})
			if !ds.HasErrors() || !strings.Contains(ds.String(), tc.lint) {
				t.Fatalf("lint: want %q, got:\n%s", tc.lint, ds)
			}
			err := fm.ValidateYAML([]byte(front))
			if err == nil || !schemacheck.Invalid(err) {
				t.Fatalf("the schema accepts what lint refuses (%s): %v", tc.lint, err)
			}
			if !strings.Contains(err.Error(), tc.where) {
				t.Errorf("the schema refuses it, but not at %s:\n%v", tc.where, err)
			}
		})
	}
}

// The inventory and test schemas refuse a misspelt key too.
func TestInventoryAndTestSchemas(t *testing.T) {
	inv, tf := compile(t, "inventory"), compile(t, "test")
	if err := inv.ValidateYAML([]byte("vars: {port: 8080}\ntargets: {web: {ssh: root@web1}}\n")); err != nil {
		t.Errorf("a good inventory: %v", err)
	}
	if err := inv.ValidateYAML([]byte("var: {port: 8080}\n")); !schemacheck.Invalid(err) || !strings.Contains(err.Error(), "var") {
		t.Errorf("an inventory with var: is accepted: %v", err)
	}
	if err := tf.ValidateYAML([]byte("runs:\n  - steps: {web/probe: {stdout: up}}\n    expect: {overall: helthy}\n")); !schemacheck.Invalid(err) || !strings.Contains(err.Error(), "/runs/0/expect/overall") {
		t.Errorf("a test file expecting helthy is accepted: %v", err)
	}
	if err := tf.ValidateYAML([]byte("runs:\n  - steps: {probe: {stdout: up}}\n")); !schemacheck.Invalid(err) {
		t.Errorf("a step not written as stage/step is accepted: %v", err)
	}
}
