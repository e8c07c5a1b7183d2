package engine

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/transports"
)

// TestReportCutKeepsTheCaptureNote: a step that prints 3 MB is captured up
// to the transport's cap with a "[captured N of M bytes]" note; the
// report's 2 KiB cut of that output keeps the note, so 3 MB does not read
// like 2 KiB, and the same holds for a repair's output.
func TestReportCutKeepsTheCaptureNote(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	const big = "printf x%2999999s ''"
	src := svcContract(state, "| Condition | Action |\n|-----------|--------|\n| `st.exit_code == 1` | `"+big+"; echo running > "+state+"` |\n")
	src = strings.Replace(src, "cat "+state+"\n", "cat "+state+" 2>/dev/null || { "+big+"; exit 1; }\n", 1)
	src = strings.Replace(src, "| `stdout` | `running` | `stopped` |", "| `exit_code` | 0 | 1 |", 1)
	rep := runOnPool(t, localPool(t, transports.PoolOptions{}), parse(t, src), Options{})
	note := fmt.Sprintf("\n[captured %d of 3000000 bytes]", transports.DefaultOutputCap)
	var outs []string
	for _, s := range rep.Stages {
		for _, st := range s.Steps {
			outs = append(outs, st.Stdout)
		}
	}
	for _, a := range rep.Actions {
		outs = append(outs, a.Stdout)
	}
	if len(outs) != 2 {
		t.Fatalf("want the probe's and the repair's output, got %d: %q", len(outs), outs)
	}
	for _, out := range outs {
		if !strings.HasPrefix(out, "x    ") || !strings.HasSuffix(out, note) || len(out) > 2200 {
			t.Errorf("report output (%d bytes) ends %q; want 2 KiB of it and the note %q", len(out), out[max(0, len(out)-80):], note)
		}
	}
}
