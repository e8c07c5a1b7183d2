package contracts

import (
	"strings"
	"testing"
)

// A condition that compares severity with a word no severity is never
// holds, written with == or with in: both are errors at the word. (The
// list form was checked in the compiled program, whose optimizer makes
// the list a constant set, and slipped through.)
func TestSeverityWordsInAList(t *testing.T) {
	src := "---\nname: w\nruntime_contract: 2\n---\n\n## Execution\n\n### A {#a agent=a}\n\n```bash {id=x}\necho 1\n```\n\nExpected: `1`\n\n" +
		"| Condition | Action |\n|---|---|\n| `severity in [\"critical\", \"degarded\"]` | log |\n| `severity not in [\"healthy\", \"unknwon\"]` | log |\n"
	_, ds := Parse("w.md", []byte(src), Options{})
	got := ds.String()
	for _, want := range []string{
		`w.md:18:30: error: severity compared with "degarded", which is not a severity (did you mean "degraded"?)`,
		`w.md:19:33: error: severity compared with "unknwon", which is not a severity (did you mean "unknown"?)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lint does not say %q:\n%s", want, got)
		}
	}
}
