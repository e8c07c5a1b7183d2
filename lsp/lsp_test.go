package lsp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
	"go.uber.org/zap"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/lsp"
)

// session is a client of a server running in the test, speaking JSON-RPC
// over a pipe as an editor does over stdio.
type session struct {
	t     *testing.T
	srv   protocol.Server
	diags chan protocol.PublishDiagnosticsParams
	done  chan error
}

func start(t *testing.T) *session {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, b := net.Pipe()
	s := &session{t: t, diags: make(chan protocol.PublishDiagnosticsParams, 64), done: make(chan error, 1)}
	go func() { s.done <- lsp.Serve(ctx, a, lsp.Options{}) }()
	conn := jsonrpc2.NewConn(jsonrpc2.NewStream(b))
	conn.Go(ctx, func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if req.Method() == "textDocument/publishDiagnostics" {
			var p protocol.PublishDiagnosticsParams
			if err := json.Unmarshal(req.Params(), &p); err != nil {
				t.Errorf("publishDiagnostics: %v", err)
			}
			s.diags <- p
		}
		return reply(ctx, nil, nil)
	})
	s.srv = protocol.ServerDispatcher(conn, zap.NewNop())
	t.Cleanup(func() {
		cancel()
		conn.Close()
	})
	res, err := s.srv.Initialize(ctx, &protocol.InitializeParams{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerInfo == nil || res.ServerInfo.Name != "contractd" || res.Capabilities.HoverProvider != true {
		t.Fatalf("initialize: %+v", res)
	}
	return s
}

// published waits for the diagnostics of uri.
func (s *session) published(u protocol.DocumentURI) []protocol.Diagnostic {
	s.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case p := <-s.diags:
			if p.URI == u {
				return p.Diagnostics
			}
		case <-deadline:
			s.t.Fatalf("no diagnostics for %s within a minute", u)
		}
	}
}

// open opens text as path and returns its diagnostics.
func (s *session) open(path, text string) []protocol.Diagnostic {
	s.t.Helper()
	u := uri.File(path)
	err := s.srv.DidOpen(context.Background(), &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{URI: u, LanguageID: "markdown", Version: 1, Text: text}})
	if err != nil {
		s.t.Fatal(err)
	}
	return s.published(u)
}

func (s *session) change(path string, version int32, text string) []protocol.Diagnostic {
	s.t.Helper()
	u := uri.File(path)
	err := s.srv.DidChange(context.Background(), &protocol.DidChangeTextDocumentParams{
		TextDocument:   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: version},
		ContentChanges: []protocol.TextDocumentContentChangeEvent{{Text: text}},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return s.published(u)
}

func at(path string, line, char int) protocol.TextDocumentPositionParams {
	return protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: uri.File(path)}, Position: protocol.Position{Line: uint32(line), Character: uint32(char)}}
}

func (s *session) hover(path string, line, char int) string {
	s.t.Helper()
	h, err := s.srv.Hover(context.Background(), &protocol.HoverParams{TextDocumentPositionParams: at(path, line, char)})
	if err != nil {
		s.t.Fatal(err)
	}
	if h == nil {
		return ""
	}
	return h.Contents.Value
}

func (s *session) complete(path string, line, char int) []string {
	s.t.Helper()
	l, err := s.srv.Completion(context.Background(), &protocol.CompletionParams{TextDocumentPositionParams: at(path, line, char)})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	if l != nil {
		for _, it := range l.Items {
			out = append(out, it.Label)
		}
	}
	return out
}

func (s *session) definition(path string, line, char int) []protocol.Location {
	s.t.Helper()
	locs, err := s.srv.Definition(context.Background(), &protocol.DefinitionParams{TextDocumentPositionParams: at(path, line, char)})
	if err != nil {
		s.t.Fatal(err)
	}
	return locs
}

// flagship is the flagship contract's text, written to a directory of
// the test's so that lint reads the same file the server is given.
func flagship(t *testing.T) (path, text string) {
	t.Helper()
	src, err := os.ReadFile("../fixtures/contracts/zulip-health.md")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(t.TempDir(), "zulip-health.md"), string(src)
}

// lineOf is the 0-based line holding want, and the byte column of want in
// it; it fails the test when no line does.
func lineOf(t *testing.T, text, want string) (int, int) {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if j := strings.Index(l, want); j >= 0 {
			return i, j
		}
	}
	t.Fatalf("no line holds %q", want)
	return 0, 0
}

// lintSays is what `contractd lint` says of text saved at path, in the
// protocol's terms: 0-based line, UTF-16 column, severity, words.
func lintSays(t *testing.T, path, text string) []string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ds := contracts.LoadFile(path, contracts.Options{})
	lines := strings.Split(text, "\n")
	var out []string
	for _, d := range ds {
		col := len(utf16.Encode([]rune(lines[d.Pos.Line-1])[:d.Pos.Col-1]))
		out = append(out, diagKey(uint32(d.Pos.Line-1), uint32(col), severityOf(d.Severity), d.Msg))
	}
	return out
}

func severityOf(s contracts.DiagSeverity) protocol.DiagnosticSeverity {
	return map[contracts.DiagSeverity]protocol.DiagnosticSeverity{contracts.DiagError: 1, contracts.DiagWarning: 2, contracts.DiagNote: 3}[s]
}

func diagKey(line, col uint32, sev protocol.DiagnosticSeverity, msg string) string {
	return fmt.Sprintf("%d:%d:%v: %s", line, col, sev, msg)
}

func served(ds []protocol.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, diagKey(d.Range.Start.Line, d.Range.Start.Character, d.Severity, d.Message))
	}
	return out
}

func sameDiags(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: the server's diagnostics differ from lint's\nserver:\n  %s\nlint:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// The flagship with a typo: the server says what lint says, at the same
// line and column, on open and after each change; the quick fix writes
// lint's suggestion and the error is gone.
func TestDiagnosticsAreLintsAndTheQuickFixAppliesItsSuggestion(t *testing.T) {
	s := start(t)
	path, text := flagship(t)
	typo := strings.Replace(text, "schedule: {every: 15m", "shedule: {every: 15m", 1)
	got := s.open(path, typo)
	sameDiags(t, "on open", served(got), lintSays(t, path, typo))
	if len(got) == 0 || !strings.Contains(got[0].Message, `unknown key "shedule"`) {
		t.Fatalf("diagnostics: %+v", got)
	}
	line, col := lineOf(t, typo, "shedule")
	if got[0].Range.Start.Line != uint32(line) || got[0].Range.Start.Character != uint32(col) || got[0].Range.End.Character != uint32(col+len("shedule")) {
		t.Errorf("the typo is at %d:%d; the diagnostic's range is %+v", line, col, got[0].Range)
	}

	actions, err := s.srv.CodeAction(context.Background(), &protocol.CodeActionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri.File(path)},
		Range:        protocol.Range{Start: protocol.Position{Line: uint32(line)}, End: protocol.Position{Line: uint32(line), Character: 3}},
	})
	if err != nil || len(actions) != 1 || actions[0].Edit == nil {
		t.Fatalf("code actions: %+v, %v", actions, err)
	}
	if actions[0].Title != `Change "shedule" to "schedule"` {
		t.Errorf("title %q", actions[0].Title)
	}
	fixed := apply(t, typo, actions[0].Edit.Changes[uri.File(path)])
	if fixed != text {
		t.Fatalf("the quick fix did not restore the contract")
	}
	after := s.change(path, 2, fixed)
	sameDiags(t, "after the fix", served(after), lintSays(t, path, fixed))
	for _, d := range after {
		if d.Severity == protocol.DiagnosticSeverityError {
			t.Errorf("an error is left: %s", d.Message)
		}
	}

	// A suggestion inside ${…}: the diagnostic starts where lint's does
	// (the $), and the fix replaces the name alone.
	refTypo := strings.Replace(text, "GET ${zulip_site}/api/v1/server_settings", "GET ${zulip_sit}/api/v1/server_settings", 1)
	got = s.change(path, 3, refTypo)
	sameDiags(t, "a typo in ${…}", served(got), lintSays(t, path, refTypo))
	line, col = lineOf(t, refTypo, "${zulip_sit}")
	actions, err = s.srv.CodeAction(context.Background(), &protocol.CodeActionParams{
		TextDocument: protocol.TextDocumentIdentifier{URI: uri.File(path)},
		Range:        protocol.Range{Start: protocol.Position{Line: uint32(line)}, End: protocol.Position{Line: uint32(line)}},
	})
	if err != nil || len(actions) != 1 {
		t.Fatalf("code actions: %+v, %v", actions, err)
	}
	if e := actions[0].Edit.Changes[uri.File(path)][0]; e.Range.Start.Character != uint32(col+2) || e.NewText != "zulip_site" {
		t.Errorf("the fix edits %+v", e)
	}
	if fixed := apply(t, refTypo, actions[0].Edit.Changes[uri.File(path)]); fixed != text {
		t.Errorf("the fix did not restore the contract")
	}

	// Every shipped contract: the server says exactly what lint says.
	mds, _ := filepath.Glob("../fixtures/contracts/*.md")
	for _, md := range mds {
		src, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), filepath.Base(md))
		sameDiags(t, md, served(s.open(p, string(src))), lintSays(t, p, string(src)))
	}
}

// apply applies text edits (one line each, as the quick fix makes them).
func apply(t *testing.T, text string, edits []protocol.TextEdit) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for _, e := range edits {
		if e.Range.Start.Line != e.Range.End.Line {
			t.Fatalf("an edit over several lines: %+v", e)
		}
		l := []rune(lines[e.Range.Start.Line])
		lines[e.Range.Start.Line] = string(l[:e.Range.Start.Character]) + e.NewText + string(l[e.Range.End.Character:])
	}
	return strings.Join(lines, "\n")
}

// Completion in a health table's cell lists the values the step's kind
// declares and its declared JSON fields; in a condition, the stage's
// steps; on= lists the targets; ${ lists the vars; in the front matter,
// guards: lists the guard keys and a notify route the notifier's options.
func TestCompletion(t *testing.T) {
	s := start(t)
	path, text := flagship(t)
	s.open(path, text)
	cases := []struct {
		name, line, after string
		want, not         []string
	}{
		{"a health cell of a bash step as=json", "| `fail_rate_pct` | < 50 | ≥ 50 |", "| `fail_rate_pct` | ", []string{"stdout", "exit_code", "fail_rate_pct", "finalized", "it", "vars"}, []string{"skipped_bot_msgs"}},
		{"a health table's field", "| `fail_rate_pct` | < 50 | ≥ 50 |", "| `", []string{"stdout", "fail_rate_pct"}, []string{"it", "pm2"}},
		{"a step's values by id", "| `retry_count >= 3` | `pm2 restart abiba-zulip` |", "| `retry_count >= 3` | `pm2 restart abiba-zulip` | after=3 restart_count=pm2.", []string{"restarts", "uptime_seconds", "stdout"}, []string{"fail_rate_pct"}},
		{"an action condition", "| `stuck: true` |", "| `", []string{"stuck", "restarts", "stdout", "pm2", "severity"}, nil},
		{"on= of a step", "```bash {id=public timeout=20s on=local}", "```bash {id=public timeout=20s on=", []string{"local", "amdpve", "tanko", "agent-zero"}, nil},
		{"as= of a step", "```bash {id=pm2 timeout=15s as=json", "```bash {id=pm2 timeout=15s as=", []string{"json", "lines", "text"}, []string{"local"}},
		{"a step attribute", "```bash {id=pm2 timeout=15s as=json", "```bash {id=pm2 ", []string{"timeout", "as", "fields", "on", "sudo"}, nil},
		{"a stage attribute", "### Step 3: Platform B — Tanko (DSH on amdpve CT 112) {#tanko agent=tanko on=tanko}", "### Step 3: Platform B — Tanko (DSH on amdpve CT 112) {#tanko ", []string{"agent", "on", "for_each"}, []string{"timeout", "sudo"}},
		{"a var in a notifier option", "  - {zulip: {site:", "  - {zulip: {site: \"${", []string{"zulip_site"}, nil},
		{"a var", "GET ${zulip_site}/api/v1/server_settings", "GET ${", []string{"zulip_site", "pi_url", "ZULIP_API_KEY"}, []string{"stdout"}},
		{"a guard key", "  debounce: 300s", "  ", []string{"debounce", "crash_loop", "budget", "slow_retry", "blast_radius"}, []string{"schedule"}},
		{"a crash_loop key", "  crash_loop: {max_restarts: 10, per: 1h, then: alert}", "  crash_loop: {max_restarts: 10, ", []string{"max_restarts", "per", "then"}, []string{"debounce"}},
		{"an enum value", "  crash_loop: {max_restarts: 10, per: 1h, then: alert}", "  crash_loop: {max_restarts: 10, per: 1h, then: ", []string{"alert", "escalate"}, nil},
		{"a notifier option", "  - {zulip: {site:", "  - {zulip: {", []string{"site", "stream", "bot_email_env", "retries"}, []string{"url"}},
		{"a notifier kind", "  - {log: {}}", "  - {", []string{"log", "zulip", "webhook", "alertmanager", "command"}, nil},
		{"a target's via", "  tanko: {via: amdpve, pct: 112}", "  tanko: {via: ", []string{"amdpve", "a0host"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, _ := lineOf(t, text, tc.line)
			if !strings.HasPrefix(strings.Split(text, "\n")[line], tc.after) {
				t.Fatalf("line %d does not start with %q", line, tc.after)
			}
			got := s.complete(path, line, len([]rune(tc.after)))
			have := map[string]bool{}
			for _, g := range got {
				have[g] = true
			}
			for _, w := range tc.want {
				if !have[w] {
					t.Errorf("no %q among %v", w, got)
				}
			}
			for _, n := range tc.not {
				if have[n] {
					t.Errorf("%q is offered: %v", n, got)
				}
			}
		})
	}
}

// Hover says what explain says: the guards in force on an action row, a
// step as it runs and on what, a target's chain, a front-matter key's doc
// with the setting in force, a value's doc.
func TestHover(t *testing.T) {
	s := start(t)
	path, text := flagship(t)
	s.open(path, text)
	cases := []struct {
		name, line, on string
		want           []string
	}{
		{"an action row", "| `retry_count >= 3` | `pm2 restart abiba-zulip` | after=3", "retry_count", []string{"run `pm2 restart abiba-zulip` on local", "guards: act after 3 failing run(s), debounce 5m, verify after 30s", "crash loop 10 per 1h then alert", "restart count from pm2.restarts"}},
		{"a step", "```bash {id=a2a timeout=15s}", "a2a", []string{"step a2a (bash, timeout 15s) on ssh root@192.168.68.14 → docker agent-zero"}},
		{"a stage", "### Step 3: Platform B", "Step 3", []string{"stage tanko", "agent tanko, on tanko (ssh root@192.168.68.15 → pct 112)"}},
		{"a health row", "| `fail_rate_pct` | < 50 | ≥ 50 |", "fail_rate_pct", []string{"step delivery (bash) on local, judged:", "critical  when fail_rate_pct", "**fail_rate_pct** (int) of step delivery"}},
		{"a target", "  tanko: {via: amdpve, pct: 112}", "tanko", []string{"target tanko: ssh root@192.168.68.15 → pct 112"}},
		{"a guard key", "  debounce: 300s", "debounce", []string{"**guards.debounce** (duration)", "the least time between two repairs", "debounce 5m, verify after 30s", "crash loop 10 per 1h then alert, slow retry off"}},
		{"a schedule key", "schedule: {every: 15m, on_start: true}", "on_start", []string{"**schedule.on_start** (bool)", "schedule: every 15m, and once on start"}},
		{"a route", "  - {zulip: {site:", "zulip", []string{"route zulip: site https://chat.sysloggh.net"}},
		{"a var", "GET ${zulip_site}/api/v1/server_settings", "zulip_site", []string{"var **zulip_site** = `https://chat.sysloggh.net`"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, col := lineOf(t, text, tc.line)
			l := strings.Split(text, "\n")[line]
			j := strings.Index(l[col:], tc.on)
			if j < 0 {
				t.Fatalf("no %q on line %d", tc.on, line)
			}
			got := s.hover(path, line, len([]rune(l[:col+j]))+1)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("hover lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// Go to definition: ${var} to its key, on=TARGET to the target, a step id
// to its fence, item.x to the key of the for_each list's items.
func TestDefinition(t *testing.T) {
	s := start(t)
	path, text := flagship(t)
	s.open(path, text)
	small := filepath.Join(t.TempDir(), "lanes.md")
	smallText := "---\nname: lanes\nruntime_contract: 2\nvars: {base: /srv}\nfor_each:\n  lanes:\n    - {name: alpha, port: 9001}\n    - {name: beta, port: 9002}\n---\n\n" +
		"## Execution\n\n### Lanes {#lanes agent=$name for_each=lanes}\n\n```bash {id=probe}\necho ${item.port} ${base}\n```\n\n| Field | Healthy |\n|---|---|\n| `stdout` | `it == string(item.port)` |\n"
	if ds := s.open(small, smallText); len(ds) != 0 {
		t.Fatalf("the small contract does not lint clean: %+v", ds)
	}
	cases := []struct {
		name, file, text, line, on, to string
	}{
		{"a var", path, text, "GET ${zulip_site}/api/v1/server_settings", "zulip_site", "  zulip_site: https://chat.sysloggh.net"},
		{"on=TARGET", path, text, "{#tanko agent=tanko on=tanko}", "on=tanko", "  tanko: {via: amdpve, pct: 112}"},
		{"a target's via", path, text, "  tanko: {via: amdpve, pct: 112}", "amdpve,", "  amdpve: {ssh: root@192.168.68.15}"},
		{"a step id", path, text, "| `echo_loop_bot_msgs_15min` | `echo_loop.skipped_bot_msgs` |", "echo_loop.skipped", "```bash {id=echo_loop timeout=10s"},
		{"example=ID", path, text, "```json {example=health}", "health", "```http {id=health timeout=10s}"},
		{"item.x in a cell", small, smallText, "| `stdout` | `it == string(item.port)` |", "item.port", "    - {name: alpha, port: 9001}"},
		{"${item.x}", small, smallText, "echo ${item.port} ${base}", "item.port", "    - {name: alpha, port: 9001}"},
		{"for_each=LIST", small, smallText, "for_each=lanes}", "lanes}", "  lanes:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, col := lineOf(t, tc.text, tc.line)
			l := strings.Split(tc.text, "\n")[line]
			j := strings.Index(l[col:], tc.on)
			if j < 0 {
				t.Fatalf("no %q on line %d", tc.on, line)
			}
			j += col + strings.LastIndex(tc.on, "=") + 1
			locs := s.definition(tc.file, line, len([]rune(l[:j]))+1)
			want, _ := lineOf(t, tc.text, tc.to)
			if len(locs) != 1 || locs[0].Range.Start.Line != uint32(want) || locs[0].URI != uri.File(tc.file) {
				t.Fatalf("definition: %+v, want line %d (%q)", locs, want, tc.to)
			}
		})
	}
}

// A test file's mistake is a diagnostic at its line, in contractd test's
// words; a Markdown file that is no contract gets none.
func TestTestFilesAndOtherMarkdown(t *testing.T) {
	s := start(t)
	dir := t.TempDir()
	ds := s.open(filepath.Join(dir, "web.test.yaml"), "runs:\n  - name: up\n    expct: {overall: healthy}\n")
	if len(ds) != 1 || ds[0].Range.Start.Line != 2 || !strings.Contains(ds[0].Message, "expct") {
		t.Fatalf("test file diagnostics: %+v", ds)
	}
	if ds := s.open(filepath.Join(dir, "README.md"), "# Notes\n\n---\nschedule: x\n"); len(ds) != 0 {
		t.Fatalf("a README got diagnostics: %+v", ds)
	}
}

// A 1 MiB contract built to hurt the parser is answered with lint's
// refusal, and the server goes on answering.
func TestPathologicalContractIsRefusedAsLintRefusesIt(t *testing.T) {
	s := start(t)
	dir := t.TempDir()
	nested := "---\nname: deep\nruntime_contract: 2\n---\n\n" + strings.Repeat(">", 1<<20-64) + " x\n"
	over := "---\nname: big\nruntime_contract: 2\n---\n\n" + strings.Repeat("word ", (1<<20)/5+10) + "\n"
	for name, text := range map[string]string{"nested.md": nested, "over.md": over} {
		p := filepath.Join(dir, name)
		got := served(s.open(p, text))
		want := lintSays(t, p, text)
		sameDiags(t, name, got, want)
		if len(got) == 0 {
			t.Fatalf("%s: no refusal", name)
		}
	}
	path, text := flagship(t)
	s.open(path, text)
	if h := s.hover(path, 20, 3); !strings.Contains(h, "guards.debounce") {
		t.Fatalf("the server no longer answers: hover %q", h)
	}
}

// The protocol's lifecycle: shutdown then exit ends Serve with nil; exit
// alone ends it with ErrExitWithoutShutdown; after shutdown a request is
// refused; a method the server does not know is an error the client sees,
// and the server goes on.
func TestLifecycle(t *testing.T) {
	for _, orderly := range []bool{true, false} {
		s := start(t)
		ctx := context.Background()
		if _, err := s.srv.Symbols(ctx, &protocol.WorkspaceSymbolParams{Query: "x"}); err == nil || !strings.Contains(err.Error(), "method not found") {
			t.Fatalf("an unknown method: %v", err)
		}
		path, text := flagship(t)
		s.open(path, text)
		if orderly {
			if err := s.srv.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.srv.Hover(ctx, &protocol.HoverParams{TextDocumentPositionParams: at(path, 20, 3)}); err == nil {
				t.Fatal("hover answered after shutdown")
			}
		}
		if err := s.srv.Exit(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-s.done:
			if orderly && err != nil || !orderly && err != lsp.ErrExitWithoutShutdown {
				t.Fatalf("orderly %v: Serve returned %v", orderly, err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Serve did not return within a minute of exit")
		}
	}
}

// Hover, completion and definition answer at every line of the flagship,
// at its start, middle and end, whole and with a line cut in half: none
// is an error (a handler's panic would be one).
func TestEveryPositionAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of requests")
	}
	s := start(t)
	path, text := flagship(t)
	lines := strings.Split(text, "\n")
	cut := strings.Join(append(append([]string{}, lines[:len(lines)/2]...), lines[len(lines)/2][:len(lines[len(lines)/2])/2]), "\n")
	ctx := context.Background()
	for i, version := range []string{text, cut} {
		if i == 0 {
			s.open(path, version)
		} else {
			s.change(path, 2, version)
		}
		for n, l := range strings.Split(version, "\n") {
			units := len(utf16.Encode([]rune(l)))
			for _, c := range []int{0, units / 2, units} {
				pos := at(path, n, c)
				if _, err := s.srv.Hover(ctx, &protocol.HoverParams{TextDocumentPositionParams: pos}); err != nil {
					t.Fatalf("hover at %d:%d: %v", n, c, err)
				}
				if _, err := s.srv.Completion(ctx, &protocol.CompletionParams{TextDocumentPositionParams: pos}); err != nil {
					t.Fatalf("completion at %d:%d: %v", n, c, err)
				}
				if _, err := s.srv.Definition(ctx, &protocol.DefinitionParams{TextDocumentPositionParams: pos}); err != nil {
					t.Fatalf("definition at %d:%d: %v", n, c, err)
				}
			}
		}
	}
}
