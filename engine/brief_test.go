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

// A briefing lists the maintenance windows in force, a window the
// contract declares among them: an agent briefed during a patch night
// reads that repairs are paused, not "No maintenance window".
func TestBriefListsADeclaredMaintenanceWindow(t *testing.T) {
	c := parse(t, `---
name: briefed
runtime_contract: 2
maintenance:
  - {calendar: "daily", for: 2h, timezone: UTC, reason: patch night, agents: [web]}
---

## Execution

### Web {#web agent=web}

`+"```sh {id=ping}\necho ok\n```\nExpected: `ok`\n")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), "- agent web: maintenance until 2026-12-01T02:00:00Z: patch night (set by the contract's maintenance schedule)"},
		{time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), "No maintenance window."},
	} {
		b, err := Brief(c, "", st, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := WriteBrief(&out, b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("at %s the briefing lacks %q:\n%s", tc.at.Format(time.Kitchen), tc.want, out.String())
		}
	}
}
