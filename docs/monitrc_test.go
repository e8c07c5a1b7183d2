package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts/monitrc"
)

// TestMovingInFromMonitShowsWhatTheImportWrites: the worked example of
// operations.md ("Moving in from Monit") is what `contractd import
// monitrc` writes for the monitrc it shows, byte for byte, and the email
// route it shows is what the mail settings it names become. (The contract
// itself is linted and run by TestDocExamples.)
func TestMovingInFromMonitShowsWhatTheImportWrites(t *testing.T) {
	src, err := os.ReadFile("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(src)
	section := page[strings.Index(page, "## Moving in from Monit"):]
	rc := regexp.MustCompile("(?s)```monitrc\n(.*?)```\n").FindStringSubmatch(section)
	shown := regexp.MustCompile("(?s)````markdown\n(.*?)````\n").FindStringSubmatch(section)
	if rc == nil || shown == nil {
		t.Fatal("operations.md's Moving in from Monit has no ```monitrc block followed by the ````markdown contract")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web-agent.monitrc"), []byte(rc[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := monitrc.Import([]string{"web-agent.monitrc"}, monitrc.Options{Dir: dir, Hostname: "web1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contracts) != 1 || len(res.Notes) != 0 {
		t.Fatalf("the example imports as %d contracts with notes %v; the page shows one and no note", len(res.Contracts), res.Notes)
	}
	if got := res.Contracts[0].Text; got != shown[1] {
		t.Fatalf("the page shows another contract than the import writes; put this in operations.md:\n%s", got)
	}

	mail := "set daemon 30\nset mailserver localhost\nset mail-format { from: monit@web1.example.com }\n" +
		"set alert ops@example.com with reminder on 20 cycles\ncheck process web-agent with pidfile /run/web-agent.pid\n"
	for _, stmt := range strings.Split(strings.TrimSpace(mail), "\n")[1:4] {
		if !strings.Contains(strings.Join(strings.Fields(section), " "), "`"+stmt+"`") {
			t.Fatalf("the page does not name %q", stmt)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "mail.monitrc"), []byte(mail), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = monitrc.Import([]string{"mail.monitrc"}, monitrc.Options{Dir: dir, Hostname: "web1"})
	if err != nil {
		t.Fatal(err)
	}
	route := regexp.MustCompile("(?s)```yaml\n(guards:.*?\\{email:.*?)```\n").FindStringSubmatch(section)
	if route == nil {
		t.Fatal("no yaml block with the email route in the section")
	}
	for _, line := range strings.Split(strings.TrimSpace(route[1]), "\n") {
		if !strings.Contains(res.Contracts[0].Text, line+"\n") {
			t.Errorf("the import writes no line %q:\n%s", line, res.Contracts[0].Text)
		}
	}
}
