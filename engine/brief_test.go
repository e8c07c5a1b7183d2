package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/store"
)

// A briefing's prose is the contract's body as written, never its front
// matter: also for a file an editor saved with a byte order mark, or
// whose front matter ends with "...", as the parser reads them.
func TestBriefProseIsTheBodyAlone(t *testing.T) {
	const body = "The body prose.\n\n## Execution\n\n### Web {#web agent=web}\n\n```sh {id=ping}\necho ok\n```\nExpected: `ok`\n"
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, head string }{
		{"plain", "---\nname: briefed\nruntime_contract: 2\n---\n\n"},
		{"byte order mark", "\xef\xbb\xbf---\nname: briefed\nruntime_contract: 2\n---\n\n"},
		{"closed by dots", "---\nname: briefed\nruntime_contract: 2\n...\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "briefed.md")
			if err := os.WriteFile(path, []byte(tc.head+body), 0o644); err != nil {
				t.Fatal(err)
			}
			c, diags := contracts.LoadFile(path, contracts.Options{})
			if c == nil || diags.HasErrors() {
				t.Fatalf("contract does not load:\n%v", diags.Err())
			}
			b, err := Brief(c, "", st, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSpace(body); b.Prose != want {
				t.Fatalf("prose:\n%q\nwant the body alone:\n%q", b.Prose, want)
			}
			b, err = Brief(c, "web", st, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(b.Prose, "### Web {#web agent=web}") || strings.Contains(b.Prose, "name: briefed") {
				t.Fatalf("stage prose:\n%s", b.Prose)
			}
		})
	}
}
