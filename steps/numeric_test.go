package steps

import (
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
)

// TestNumericStdoutComparesAsANumber: `< 5` beside a probe's stdout, which
// is a string, compares the number it holds, as an author means; a string
// that holds no number is unknown with the comparison's error; equality
// still compares the string as written ("quote strings that look like
// numbers").
func TestNumericStdoutComparesAsANumber(t *testing.T) {
	age := &contracts.HealthRow{Field: "stdout", Cells: []*contracts.Cell{
		cell(t, contracts.SeverityHealthy, "< 5", "it != nil && it < 5"),
		cell(t, contracts.SeverityCritical, ">= 5", "it != nil && it >= 5"),
	}}
	for _, tc := range []struct {
		stdout string
		want   contracts.Severity
		in     string
	}{
		{"3", contracts.SeverityHealthy, ""},
		{"12", contracts.SeverityCritical, "stdout (12) >= 5 → critical"},
		{" 7.5 ", contracts.SeverityCritical, ">= 5 → critical"},
		{"abc", contracts.SeverityUnknown, "invalid operation"},
	} {
		got, finding := EvaluateRow(age, map[string]any{"stdout": tc.stdout})
		if got != tc.want || !strings.Contains(finding, tc.in) {
			t.Errorf("stdout %q: %v %q, want %v with %q", tc.stdout, got, finding, tc.want, tc.in)
		}
	}
	code := &contracts.HealthRow{Field: "stdout", Cells: []*contracts.Cell{
		cell(t, contracts.SeverityHealthy, `"200"`, `it == "200"`),
	}}
	if got, _ := EvaluateRow(code, map[string]any{"stdout": "200"}); got != contracts.SeverityHealthy {
		t.Errorf("a quoted \"200\" no longer matches stdout 200: %v", got)
	}
}
