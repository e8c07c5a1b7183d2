package engine

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/contractd/contractd/transports"
)

// TestTransportNoteReachesTheReport: when the transport ran a step another
// way than usual (a broken resident session, a fresh one instead), the
// step's report and the text report say so.
func TestTransportNoteReachesTheReport(t *testing.T) {
	h := newHarness(t)
	const note = "resident session broken (the loop ended (exit 137)); ran in a fresh session"
	kobyhost := h.w.opener.targets["kobyhost"]
	inner := kobyhost.exec
	kobyhost.exec = func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		res, err := inner(ctx, cmd)
		res.Note = note
		return res, err
	}
	rep := h.run()
	var got []string
	for _, st := range rep.Stages {
		for _, sp := range st.Steps {
			if sp.Note != "" {
				got = append(got, st.ID+"/"+sp.ID+": "+sp.Note)
			}
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "koby/") || !strings.HasSuffix(got[0], note) {
		t.Fatalf("step notes %q, want koby's step only", got)
	}
	var b bytes.Buffer
	WriteText(&b, rep)
	if !strings.Contains(b.String(), "↻ ") || !strings.Contains(b.String(), note) {
		t.Fatalf("text report does not show the note:\n%s", b.String())
	}
}
