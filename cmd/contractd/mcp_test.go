package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/owner"
	"github.com/contractd/contractd/fixtures/wait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP tests drive the real contractd binary with the official Go
// SDK's own client: over stdio (`contractd mcp`, as an agent spawns it)
// and over streamable HTTP (`contractd serve --mcp`), against the svc
// contract of the HA tests (down until its one declared repair writes
// "up"; each repair appends a line to the file repairs).

// mcpRig is a contract directory holding svc, its state dir, and the
// files its probe and repair use.
type mcpRig struct {
	t                      *testing.T
	bin                    string
	dir, state, work, logs string
}

func newMCPRig(t *testing.T) *mcpRig {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts contractd")
	}
	root := t.TempDir()
	r := &mcpRig{t: t, bin: binary(t), dir: filepath.Join(root, "contracts"), state: filepath.Join(root, "state"), work: filepath.Join(root, "work"), logs: root}
	for _, d := range []string{r.dir, r.state, r.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.dir, "svc.md"), []byte(haContract("svc")), 0o644); err != nil {
		t.Fatal(err)
	}
	r.setState("down")
	return r
}

func (r *mcpRig) setState(s string) {
	if err := os.WriteFile(filepath.Join(r.work, "state"), []byte(s+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// repairs counts the repairs svc ran.
func (r *mcpRig) repairs() int {
	b, err := os.ReadFile(filepath.Join(r.work, "repairs"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// stdio starts `contractd mcp` on the rig with extra flags and connects
// the SDK's client to it over its stdin and stdout.
func (r *mcpRig) stdio(name string, extra ...string) *mcp.ClientSession {
	r.t.Helper()
	args := append([]string{"mcp", "--dir", r.dir, "--state-dir", r.state, "--var", "dir=" + r.work, "--var", "node=" + name}, extra...)
	cmd := owner.Command(r.bin, args...)
	logf, err := os.Create(filepath.Join(r.logs, name+".log"))
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stderr = logf
	r.t.Cleanup(func() {
		logf.Close()
		if r.t.Failed() {
			r.t.Logf("--- %s stderr:\n%s", name, tailOf(readFile(r.t, logf.Name()), 20000))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "contractd-test-agent", Version: "0.1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		r.t.Fatalf("connect to contractd mcp: %v", err)
	}
	r.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its result; a protocol error fails the
// test (a tool's own error is a result with IsError).
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok calls a tool that must succeed, decodes its structured content into
// out (when not nil) and returns its text.
func ok(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", tool, args, resultText(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return resultText(res)
}

// refused calls a tool that must answer with an error result, and returns
// the error's text.
func refused(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res := call(t, cs, tool, args)
	if !res.IsError {
		t.Fatalf("%s(%v) answered, want an error: %s", tool, args, resultText(res))
	}
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// lineOf is the 1-based line of the first line of text holding s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	i := strings.Index(text, s)
	if i < 0 {
		t.Fatalf("%q not in the text", s)
	}
	return strings.Count(text[:i], "\n") + 1
}

type runOutT struct {
	Severity    string `json:"severity"`
	DryRun      bool   `json:"dry_run"`
	RequestedBy string `json:"requested_by"`
	Skipped     string `json:"skipped"`
	Actions     []struct {
		Agent  string   `json:"agent"`
		Action string   `json:"action"`
		Status string   `json:"status"`
		Guard  string   `json:"guard"`
		Verify string   `json:"verify"`
		Trace  []string `json:"trace"`
	} `json:"actions"`
}

// repairsIn counts a run's actions that ran a command.
func (o runOutT) repairsIn() (ran int, statuses []string) {
	for _, a := range o.Actions {
		statuses = append(statuses, a.Status)
		if a.Status == "ran" {
			ran++
		}
	}
	return ran, statuses
}

// Over stdio, as an agent that spawns contractd: the tools are listed with
// truthful annotations; the status reads; a draft with a typo gets lint's
// line:col and the fixed one none; a dry run runs no repair; the run tool
// is refused without --allow-actions, and with it a broken contract gets
// exactly one repair, recorded with who asked.
func TestMCPStdioReadsLintsDryRunsAndRepairsOnce(t *testing.T) {
	r := newMCPRig(t)
	cs := r.stdio("reader")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		tools[tl.Name] = tl
	}
	for _, name := range []string{"list_contracts", "get_status", "why", "get_history", "explain_contract", "list_incidents", "get_health", "brief",
		"lint_draft", "explain_draft", "test_draft", "dry_run", "run_contract", "set_maintenance", "release_hold_down"} {
		tl := tools[name]
		if tl == nil {
			t.Fatalf("tool %s not listed; tools: %v", name, slices.Sorted(func(yield func(string) bool) {
				for n := range tools {
					if !yield(n) {
						return
					}
				}
			}))
		}
		if tl.InputSchema == nil || tl.OutputSchema == nil {
			t.Errorf("%s: no input or output schema", name)
		}
		acting := name == "run_contract" || name == "set_maintenance" || name == "release_hold_down"
		a := tl.Annotations
		if a == nil || a.ReadOnlyHint == acting || a.DestructiveHint == nil {
			t.Errorf("%s: annotations %+v: want readOnlyHint %v and destructiveHint set", name, a, !acting)
		}
	}
	if d := tools["run_contract"].Annotations.DestructiveHint; !*d {
		t.Errorf("run_contract is not marked destructive")
	}
	if d := tools["lint_draft"].Annotations.DestructiveHint; *d {
		t.Errorf("lint_draft is marked destructive")
	}

	var st struct {
		Contract struct {
			Name     string `json:"name"`
			Severity string `json:"severity"`
			LastRun  string `json:"last_run"`
		} `json:"contract"`
	}
	text := ok(t, cs, "get_status", map[string]any{"contract": "svc"}, &st)
	if st.Contract.Name != "svc" || st.Contract.Severity != "unknown" || st.Contract.LastRun != "" || !strings.Contains(text, "has not run") {
		t.Fatalf("status of a contract that never ran: %+v\n%s", st, text)
	}

	src := haContract("svc")
	typo := strings.Replace(src, "  debounce: 1h", "  debounse: 1h", 1)
	line := lineOf(t, typo, "debounse")
	var lint struct {
		OK          bool `json:"ok"`
		Diagnostics []struct {
			File     string `json:"file"`
			Line     int    `json:"line"`
			Col      int    `json:"col"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Text     string `json:"text"`
		} `json:"diagnostics"`
	}
	text = ok(t, cs, "lint_draft", map[string]any{"text": typo, "file": "svc.md"}, &lint)
	if lint.OK || len(lint.Diagnostics) == 0 {
		t.Fatalf("a draft with a typo passed lint: %s", text)
	}
	d := lint.Diagnostics[0]
	want := fmt.Sprintf("svc.md:%d:3: error: ", line)
	if d.Line != line || d.Col != 3 || d.Severity != "error" || !strings.HasPrefix(d.Text, want) || !strings.Contains(d.Message, "debounce") {
		t.Fatalf("lint of the typo: %+v, want %s… naming debounce", d, want)
	}
	if !strings.Contains(text, want) {
		t.Fatalf("lint's text lacks %q:\n%s", want, text)
	}
	// The CLI says the same of the same text.
	path := filepath.Join(t.TempDir(), "svc.md")
	if err := os.WriteFile(path, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}
	_, cliOut, _ := runMain(t, "contractd", "lint", path)
	if !strings.Contains(cliOut, strings.TrimPrefix(d.Text, "svc.md")) {
		t.Fatalf("lint_draft says %q, contractd lint says:\n%s", d.Text, cliOut)
	}
	text = ok(t, cs, "lint_draft", map[string]any{"text": src, "file": "svc.md"}, &lint)
	if !lint.OK || len(lint.Diagnostics) != 0 {
		t.Fatalf("the fixed draft: %s", text)
	}

	var dry runOutT
	text = ok(t, cs, "dry_run", map[string]any{"contract": "svc"}, &dry)
	_, statuses := dry.repairsIn()
	if !dry.DryRun || dry.Severity != "critical" || !slices.Contains(statuses, "dry-run") || r.repairs() != 0 {
		t.Fatalf("dry run: %+v, %d repairs run:\n%s", dry, r.repairs(), text)
	}
	if !strings.Contains(text, "guards:") {
		t.Fatalf("dry run's text has no guards' answers:\n%s", text)
	}

	msg := refused(t, cs, "run_contract", map[string]any{"contract": "svc"})
	if !strings.Contains(msg, "--allow-actions") || r.repairs() != 0 {
		t.Fatalf("run without --allow-actions: %q, %d repairs", msg, r.repairs())
	}
	refused(t, cs, "set_maintenance", map[string]any{"contract": "svc", "duration": "1h", "reason": "test"})
	refused(t, cs, "release_hold_down", map[string]any{"contract": "svc"})

	actor := r.stdio("actor", "--allow-actions")
	var run runOutT
	text = ok(t, actor, "run_contract", map[string]any{"contract": "svc"}, &run)
	ran, statuses := run.repairsIn()
	if ran != 1 || r.repairs() != 1 {
		t.Fatalf("run of a broken contract: %d repairs in the report (%v), %d run:\n%s", ran, statuses, r.repairs(), text)
	}
	if !strings.Contains(run.RequestedBy, "contractd-test-agent 0.1") || !strings.Contains(run.RequestedBy, "stdio") {
		t.Fatalf("requested_by %q does not name the client", run.RequestedBy)
	}
	// A second run finds it healthy: no second repair.
	ok(t, actor, "run_contract", map[string]any{"contract": "svc"}, &run)
	if ran, _ := run.repairsIn(); ran != 0 || r.repairs() != 1 || run.Severity != "healthy" {
		t.Fatalf("second run: severity %s, %d repairs in it, %d in all", run.Severity, ran, r.repairs())
	}

	// who asked is in the history and in why, for the reader too.
	var why struct {
		RequestedBy string `json:"requested_by"`
		Operator    []struct {
			By   string `json:"by"`
			What string `json:"what"`
			Seen string `json:"seen"`
		} `json:"operator"`
	}
	text = ok(t, cs, "why", map[string]any{"contract": "svc"}, &why)
	if !strings.Contains(why.RequestedBy, "contractd-test-agent") || !strings.Contains(text, "requested by mcp contractd-test-agent") {
		t.Fatalf("why does not say who asked: %+v\n%s", why, text)
	}
	ok(t, actor, "set_maintenance", map[string]any{"contract": "svc", "duration": "2h", "reason": "disk swap"}, nil)
	text = ok(t, cs, "why", map[string]any{"contract": "svc"}, &why)
	if len(why.Operator) != 1 || why.Operator[0].Seen != "since_run" || !strings.Contains(why.Operator[0].By, "contractd-test-agent") || !strings.Contains(why.Operator[0].What, "disk swap") {
		t.Fatalf("why after set_maintenance: %+v", why.Operator)
	}
	// The tool says what `contractd why` says, line for line.
	if _, cli, _ := runMain(t, "contractd", "why", "--state-dir", r.state, "svc"); cli != text {
		t.Fatalf("the why tool says:\n%s\ncontractd why says:\n%s", text, cli)
	}
	_, hist, _ := runMain(t, "contractd", "history", "--state-dir", r.state, "svc")
	if !strings.Contains(hist, "requested by mcp contractd-test-agent 0.1 (stdio)") {
		t.Fatalf("contractd history does not say who asked:\n%s", hist)
	}
	_, whyOut, _ := runMain(t, "contractd", "why", "--state-dir", r.state, "svc")
	if !strings.Contains(whyOut, "since then: ") || !strings.Contains(whyOut, "maintenance of the whole contract for 2h: disk swap") {
		t.Fatalf("contractd why does not list the maintenance an agent set:\n%s", whyOut)
	}

	var after struct {
		Contract struct {
			Severity    string `json:"severity"`
			LastRun     string `json:"last_run"`
			Maintenance []struct {
				By     string `json:"by"`
				Reason string `json:"reason"`
			} `json:"maintenance"`
		} `json:"contract"`
	}
	var inc struct {
		Maintenance []struct {
			Contract string `json:"contract"`
			By       string `json:"by"`
		} `json:"maintenance"`
	}
	ok(t, cs, "list_incidents", map[string]any{}, &inc)
	if len(inc.Maintenance) != 1 || inc.Maintenance[0].Contract != "svc" || !strings.Contains(inc.Maintenance[0].By, "contractd-test-agent") {
		t.Fatalf("list_incidents: %+v", inc)
	}
	var brief struct {
		Contract    string         `json:"contract"`
		Maintenance map[string]any `json:"maintenance"`
		Report      []struct {
			Field string `json:"field"`
		} `json:"report"`
	}
	text = ok(t, cs, "brief", map[string]any{"contract": "svc", "stage": "svc"}, &brief)
	if brief.Contract != "svc" || len(brief.Report) != 1 || brief.Report[0].Field != "stdout" || brief.Maintenance["*"] == nil ||
		!strings.Contains(text, "# Briefing: stage svc of contract svc") || !strings.Contains(text, "disk swap") {
		t.Fatalf("brief: %+v\n%s", brief, text)
	}
	ok(t, cs, "get_status", map[string]any{"contract": "svc"}, &after)
	if after.Contract.Severity != "healthy" || after.Contract.LastRun == "" || len(after.Contract.Maintenance) != 1 || after.Contract.Maintenance[0].Reason != "disk swap" {
		t.Fatalf("status after the runs: %+v", after)
	}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// httpClient connects the SDK's client to addr's /mcp with token ("" for
// none).
func httpClient(ctx context.Context, addr, token string) (*mcp.ClientSession, error) {
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearer{token: token, next: http.DefaultTransport}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "contractd-test-agent", Version: "0.1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
}

// The same client over streamable HTTP against serve --mcp: without the
// token, or with another, nothing answers; with it the read tools do, and
// the acting tools only where serve allows them.
func TestMCPServeHTTPNeedsTheToken(t *testing.T) {
	r := newMCPRig(t)
	r.setState("up")
	token := filepath.Join(r.logs, "token")
	if err := os.WriteFile(token, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := owner.Command(r.bin, "serve", "--dir", r.dir, "--state-dir", r.state, "--listen", addr, "--stagger", "0", "--socket", "none",
		"--token-file", token, "--mcp", "--var", "dir="+r.work, "--var", "node=serve")
	logf, err := os.Create(filepath.Join(r.logs, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			t.Logf("--- serve log:\n%s", tailOf(readFile(t, logf.Name()), 20000))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var cs *mcp.ClientSession
	wait.For(t, "serve answers MCP with the token", func() bool {
		c, err := httpClient(ctx, addr, "s3cret-token")
		if err != nil {
			return false
		}
		cs = c
		return true
	})
	defer cs.Close()
	for _, tok := range []string{"", "wrong-token"} {
		if c, err := httpClient(ctx, addr, tok); err == nil {
			res, cerr := c.CallTool(ctx, &mcp.CallToolParams{Name: "list_contracts", Arguments: map[string]any{}})
			c.Close()
			t.Fatalf("token %q: connected; list_contracts answered %v, %v", tok, res, cerr)
		}
		// A bare request gets 401 before any tool sees it.
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_health","arguments":{}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: tools/call answered %s, want 401", tok, resp.Status)
		}
	}

	var h struct {
		Status    string `json:"status"`
		Contracts int    `json:"contracts"`
	}
	ok(t, cs, "get_health", map[string]any{}, &h)
	if h.Status != "ok" || h.Contracts != 1 {
		t.Fatalf("health: %+v", h)
	}
	var list struct {
		Contracts []struct {
			Name    string `json:"name"`
			State   string `json:"state"`
			LastRun string `json:"last_run"`
		} `json:"contracts"`
	}
	wait.For(t, "svc's first run in list_contracts", func() bool {
		ok(t, cs, "list_contracts", map[string]any{}, &list)
		return len(list.Contracts) == 1 && list.Contracts[0].Name == "svc" && list.Contracts[0].LastRun != ""
	})
	var st struct {
		Contract struct {
			Severity string `json:"severity"`
		} `json:"contract"`
	}
	ok(t, cs, "get_status", map[string]any{"contract": "svc"}, &st)
	if st.Contract.Severity != "healthy" {
		t.Fatalf("status over HTTP: %+v", st)
	}
	text := ok(t, cs, "explain_contract", map[string]any{"contract": "svc"}, nil)
	if !strings.Contains(text, "stage svc") {
		t.Fatalf("explain over HTTP:\n%s", text)
	}
	// A draft over the contract size cap is refused by the tool, as an
	// error result: the session goes on. One over the transport's body
	// limit is refused by the transport (the SDK's client then closes its
	// session); the server answers the next client.
	msg := refused(t, cs, "lint_draft", map[string]any{"text": "---\nname: x\n---\n" + strings.Repeat("y", 2<<20)})
	if !strings.Contains(msg, "larger than the 1 MiB limit") {
		t.Fatalf("oversize draft over HTTP: %s", msg)
	}
	ok(t, cs, "get_health", map[string]any{}, &h)
	big, err := httpClient(ctx, addr, "s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.CallTool(ctx, &mcp.CallToolParams{Name: "lint_draft", Arguments: map[string]any{"text": strings.Repeat("y", 6<<20)}}); err == nil || !strings.Contains(err.Error(), "Too Large") {
		t.Fatalf("a 6 MiB request: %v, want Request Entity Too Large", err)
	}
	big.Close()
	ok(t, cs, "get_health", map[string]any{}, &h)
	if h.Status != "ok" {
		t.Fatalf("health after oversize requests: %+v", h)
	}
	// serve without --mcp-allow-actions: the acting tools refuse.
	msg = refused(t, cs, "run_contract", map[string]any{"contract": "svc"})
	if !strings.Contains(msg, "allow-actions") {
		t.Fatalf("run over HTTP without --mcp-allow-actions: %s", msg)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Under --etcd every node answers the MCP tools with the owner's truth:
// the same owner, the same repair run in the history, each node its own
// health.
func TestMCPServeEtcdEveryNodeAnswersWithTheOwnersTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd cluster and three instances")
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("group-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startHAArgs(t, haTTL, []string{"--token-file", token, "--mcp"}, 3, map[string]string{"svc": haContract("svc")})
	own := r.settled("svc")
	r.setState("down")
	wait.For(t, "the owner's one repair", func() bool { return r.lines("repairs") == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type view struct {
		owner, repairRun string
	}
	views := map[string]view{}
	for _, n := range r.live() {
		cs, err := httpClient(ctx, n.addr, "group-token")
		if err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		defer cs.Close()
		var h struct {
			Status string `json:"status"`
			Node   string `json:"node"`
			EtcdUp *bool  `json:"etcd_up"`
			Nodes  []string
		}
		ok(t, cs, "get_health", map[string]any{}, &h)
		if h.Node != n.name || h.EtcdUp == nil || !*h.EtcdUp {
			t.Fatalf("%s: health %+v", n.name, h)
		}
		var list struct {
			Contracts []struct {
				Name  string `json:"name"`
				Owner string `json:"owner"`
			} `json:"contracts"`
		}
		ok(t, cs, "list_contracts", map[string]any{}, &list)
		if len(list.Contracts) != 1 {
			t.Fatalf("%s: contracts %+v", n.name, list)
		}
		v := view{owner: list.Contracts[0].Owner}
		// The repair's run is recorded once its repair is verified.
		wait.For(t, n.name+" lists the repair's run", func() bool {
			var hist struct {
				Runs []struct {
					RunID   string `json:"run_id"`
					Actions []struct {
						Status string `json:"status"`
					} `json:"actions"`
				} `json:"runs"`
			}
			ok(t, cs, "get_history", map[string]any{"contract": "svc", "limit": 200}, &hist)
			v.repairRun = ""
			for _, run := range hist.Runs {
				for _, a := range run.Actions {
					if a.Status == "ran" {
						if v.repairRun != "" {
							t.Fatalf("%s: two runs repaired: %s and %s", n.name, v.repairRun, run.RunID)
						}
						v.repairRun = run.RunID
					}
				}
			}
			return v.repairRun != ""
		})
		views[n.name] = v
	}
	want := views[own.name]
	if want.owner != own.name || want.repairRun == "" {
		t.Fatalf("the owner %s answers %+v", own.name, want)
	}
	for name, v := range views {
		if v != want {
			t.Fatalf("node %s answers %+v, the owner %s answers %+v", name, v, own.name, want)
		}
	}
}

// Hostile input: shell metacharacters in every argument, drafts over the
// size cap, unknown names, and concurrent calls during a run never reach
// a command line, never take the server down, and get clear errors.
func TestMCPHostileInput(t *testing.T) {
	r := newMCPRig(t)
	canary := filepath.Join(r.work, "CANARY")
	cs := r.stdio("hostile", "--allow-actions", "--var", "slow=1")
	named := []string{"list_contracts", "get_status", "why", "get_history", "explain_contract", "brief", "dry_run", "run_contract", "release_hold_down"}
	for _, bad := range []string{"svc; touch " + canary, "$(touch " + canary + ")", "`touch " + canary + "`", "../../etc/passwd", "svc\n", "svc | tee x", strings.Repeat("s", 300)} {
		for _, tool := range named[1:] {
			msg := refused(t, cs, tool, map[string]any{"contract": bad})
			if !strings.Contains(msg, "invalid contract name") {
				t.Fatalf("%s(%q): %s", tool, bad, msg)
			}
		}
	}
	for _, tool := range []string{"get_status", "run_contract", "dry_run", "brief", "why"} {
		msg := refused(t, cs, tool, map[string]any{"contract": "svx"})
		if !strings.Contains(msg, `"svx"`) || !strings.Contains(msg, "svc") {
			t.Fatalf("%s of an unknown contract: %s", tool, msg)
		}
	}
	msg := refused(t, cs, "set_maintenance", map[string]any{"contract": "svc", "agent": "svc; touch " + canary, "duration": "1h", "reason": "x"})
	if !strings.Contains(msg, "has no agent") {
		t.Fatalf("maintenance of an unknown agent: %s", msg)
	}
	// A dry run takes a contract's name, never a draft: its probes would
	// be the caller's commands.
	msg = refused(t, cs, "dry_run", map[string]any{"contract": "svc", "text": "---\nname: x\n---\n```sh {id=a}\ntouch " + canary + "\n```\n"})
	if !strings.Contains(msg, "text") {
		t.Fatalf("dry_run with a draft: %s", msg)
	}

	// A reason full of shell is kept as words; the run it blocks runs
	// nothing of it.
	reason := "$(touch " + canary + "); `touch " + canary + "` | touch " + canary
	ok(t, cs, "set_maintenance", map[string]any{"contract": "svc", "duration": "1h", "reason": reason}, nil)
	var run runOutT
	ok(t, cs, "run_contract", map[string]any{"contract": "svc"}, &run)
	if ran, statuses := run.repairsIn(); ran != 0 || !slices.Contains(statuses, "blocked") {
		t.Fatalf("run in maintenance: %v", statuses)
	}
	var why struct {
		Actions []struct {
			Reason string `json:"reason"`
		} `json:"actions"`
	}
	ok(t, cs, "why", map[string]any{"contract": "svc"}, &why)
	if !strings.Contains(fmt.Sprint(why.Actions), reason) {
		t.Fatalf("the blocked repair's reason does not quote the window's: %+v", why.Actions)
	}
	ok(t, cs, "set_maintenance", map[string]any{"contract": "svc", "end": true}, nil)

	// Drafts: one whose probe is shell is linted, explained and tested
	// (replayed, never run); one over the size cap is refused by size.
	shell := strings.Replace(haContract("svc"), "s=$(cat", "touch "+canary+"; s=$(cat", 1)
	ok(t, cs, "lint_draft", map[string]any{"text": shell}, nil)
	ok(t, cs, "explain_draft", map[string]any{"text": shell}, nil)
	test := `contract: svc.md
runs:
  - steps:
      svc/probe: {stdout: "down\n"}
    after_repair:
      svc/probe: {stdout: "up\n"}
    expect:
      overall: healthy
      actions:
        - {agent: svc, status: ran, verify: remediated}
`
	var tr struct {
		Passed bool     `json:"passed"`
		Errors []string `json:"errors"`
	}
	text := ok(t, cs, "test_draft", map[string]any{"contract": shell, "test": test}, &tr)
	if !tr.Passed {
		t.Fatalf("test of the draft: %+v\n%s", tr, text)
	}
	msg = refused(t, cs, "test_draft", map[string]any{"contract": shell, "test": "contract: ../../svc.md\nruns: [{steps: {}}]\n"})
	if !strings.Contains(msg, "file name alone") {
		t.Fatalf("test file naming a contract elsewhere: %s", msg)
	}
	huge := "---\nname: huge\n---\n" + strings.Repeat("prose ", 400_000)
	for _, tool := range []string{"lint_draft", "explain_draft"} {
		msg := refused(t, cs, tool, map[string]any{"text": huge})
		if !strings.Contains(msg, "larger than the 1 MiB limit") {
			t.Fatalf("%s of a %d-byte draft: %s", tool, len(huge), msg)
		}
	}
	msg = refused(t, cs, "test_draft", map[string]any{"contract": huge, "test": test})
	if !strings.Contains(msg, "limit") {
		t.Fatalf("test_draft of a huge draft: %s", msg)
	}

	// Concurrent calls while a slow repair runs: one repair in all, every
	// call answered.
	r.setState("down")
	done := make(chan string, 12)
	for i := 0; i < 4; i++ {
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_contract", Arguments: map[string]any{"contract": "svc"}})
			switch {
			case err != nil:
				done <- "error: " + err.Error()
			default:
				done <- resultText(res)
			}
		}()
		for _, tool := range []string{"get_status", "why"} {
			go func() {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"contract": "svc"}})
				if err != nil {
					done <- "error: " + err.Error()
					return
				}
				done <- "ok"
			}()
		}
	}
	for i := 0; i < 12; i++ {
		select {
		case s := <-done:
			if strings.HasPrefix(s, "error: ") {
				t.Fatalf("a concurrent call failed: %s", s)
			}
		case <-time.After(wait.Deadline):
			t.Fatal("concurrent calls did not all answer")
		}
	}
	if n := r.repairs(); n != 1 {
		t.Fatalf("%d repairs after concurrent runs, want 1", n)
	}
	var h struct {
		Status string `json:"status"`
	}
	ok(t, cs, "get_health", map[string]any{}, &h)
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("an argument or a draft reached a shell: %s exists", canary)
	}
}
