package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/expr-lang/expr"
)

const zulipFixture = "../fixtures/contracts/zulip-health.md"

func loadZulip(t *testing.T, opts Options) *Contract {
	t.Helper()
	c, ds := LoadFile(zulipFixture, opts)
	if ds.HasErrors() || c == nil {
		t.Fatalf("zulip-health must load:\n%s", ds)
	}
	return c
}

// The flagship contract lints with no errors and no warnings; its only
// diagnostic is the note on the report-only koby stage whose actions never
// run.
func TestZulipHealthLintsClean(t *testing.T) {
	_, ds := LoadFile(zulipFixture, Options{})
	if ds.HasErrors() {
		t.Fatalf("errors:\n%s", ds)
	}
	if len(ds) != 1 || ds[0].Severity != DiagNote || ds[0].Msg != "actions for report-only agent koby are logged, never executed (report_only_agents)" {
		t.Fatalf("want exactly the koby note, got:\n%s", ds)
	}
}

// Changing `< 1800` to `< 18OO` gives exactly one error naming the file, the
// row's line and the cell's column.
func TestZulipHealthTypoInCellPointsAtCell(t *testing.T) {
	src, err := os.ReadFile(zulipFixture)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	row, col := 0, 0
	for i, l := range lines {
		if strings.HasPrefix(l, "| `idle_seconds` |") {
			j := strings.Index(l, "< 1800")
			row, col = i+1, utf8.RuneCountInString(l[:j])+1
			lines[i] = l[:j] + "< 18OO" + l[j+len("< 1800"):]
			break
		}
	}
	if row == 0 {
		t.Fatal("fixture has no idle_seconds row")
	}
	c, ds := Parse("zulip-health.md", []byte(strings.Join(lines, "\n")), Options{})
	errs := ds.Errors()
	if c != nil || len(errs) != 1 {
		t.Fatalf("want exactly one error and no contract, got %d errors:\n%s", len(errs), ds)
	}
	want := fmt.Sprintf("zulip-health.md:%d:%d: error: ", row, col)
	if !strings.HasPrefix(errs[0].String(), want) || !strings.Contains(errs[0].Msg, "18OO") {
		t.Fatalf("want %s…18OO…, got %s", want, errs[0])
	}
}

// A problem in the body is reported at its line in the original file, front
// matter included, however long the front matter is.
func TestBodyDiagnosticsUseAbsoluteLines(t *testing.T) {
	body := "\n## Execution\n\n### S {#s}\n\n```bash {id=x}\ntrue\n```\n\n| Field | Healthy |\n|---|---|\n| `stdout` | about right |\n"
	for _, extra := range []int{0, 1, 25} {
		t.Run(fmt.Sprintf("%d_extra_lines", extra), func(t *testing.T) {
			fm := "---\nname: lines\nruntime_contract: 2\n" + strings.Repeat("# padding\n", extra) + "---\n"
			_, ds := Parse("f.md", []byte(fm+body), Options{})
			if len(ds) != 1 {
				t.Fatalf("want one diagnostic, got:\n%s", ds)
			}
			wantLine := strings.Count(fm, "\n") + 12
			if ds[0].Pos.Line != wantLine || ds[0].Pos.Col != 14 {
				t.Fatalf("want line %d col 14, got %s", wantLine, ds[0])
			}
		})
	}
}

func evalCell(t *testing.T, exprText string, env map[string]any) (bool, error) {
	t.Helper()
	p, err := Compile(exprText)
	if err != nil {
		t.Fatalf("compile %q: %v", exprText, err)
	}
	out, err := expr.Run(p, env)
	if err != nil {
		return false, err
	}
	return out.(bool), nil
}

// Cells mean what an operator reading the table means: each case lists
// field values that must match and values that must not.
func TestCompileCellSemantics(t *testing.T) {
	type env = map[string]any
	cases := []struct {
		name, src, field string
		match, miss      []env
	}{
		{"backticked true is equality, not the constant", "`true`", "connected", []env{{"it": true}}, []env{{"it": false}, {"it": nil}}},
		{"bare false", "false", "stuck", []env{{"it": false}}, []env{{"it": true}}},
		{"null", "`null`", "last_error", []env{{"it": nil}}, []env{{"it": "boom"}}},
		{"non-null string", "non-null string", "last_error", []env{{"it": "boom"}}, []env{{"it": nil}, {"it": 3.0}}},
		{"non-null", "non-null", "owner", []env{{"it": 0.0}}, []env{{"it": nil}}},
		{"zero against JSON float", "0", "pending_count", []env{{"it": 0.0}}, []env{{"it": 2.0}}},
		{"less than", "< 1800", "idle_seconds", []env{{"it": 1799.0}}, []env{{"it": 1800.0}}},
		{"unicode at least", "≥ 1800", "idle_seconds", []env{{"it": 1800.0}}, []env{{"it": 1799.5}}},
		{"ascii at least", ">= 3", "retry_count", []env{{"it": 3}}, []env{{"it": 2}}},
		{"at most", "≤ 50", "n", []env{{"it": 50}}, []env{{"it": 51}}},
		{"en dash range", "0–2", "retry_count", []env{{"it": 0.0}, {"it": 2.0}}, []env{{"it": 3.0}, {"it": -1.0}}},
		{"hyphen range", "1.5-4", "load", []env{{"it": 3.9}}, []env{{"it": 4.1}}},
		{"plus", "3+", "retry_count", []env{{"it": 3.0}, {"it": 40.0}}, []env{{"it": 2.0}}},
		{"bare word", "healthy", "response_pipeline", []env{{"it": "healthy"}}, []env{{"it": "blocked"}}},
		{"backticked word", "`blocked`", "response_pipeline", []env{{"it": "blocked"}}, []env{{"it": "healthy"}}},
		{"quoted string keeps zeros", `"000"`, "stdout", []env{{"it": "000"}}, []env{{"it": "200"}}},
		{"not equal word", "!= online", "status", []env{{"it": "stopped"}}, []env{{"it": "online"}}},
		{"with sibling field", "> 0 with `response_pipeline: blocked`", "pending_count",
			[]env{{"it": 2.0, "response_pipeline": "blocked"}}, []env{{"it": 2.0, "response_pipeline": "healthy"}, {"it": 0.0, "response_pipeline": "blocked"}}},
		{"or of forms", "stopped or crashed", "phase", []env{{"it": "stopped"}, {"it": "crashed"}}, []env{{"it": "running"}}},
		{"full expression with it", "`len(it) > 3`", "queue", []env{{"it": []any{1, 2, 3, 4}}}, []env{{"it": []any{1}}}},
		{"full expression naming the field", "`retry_count >= 3 && stuck`", "retry_count",
			[]env{{"retry_count": 3, "stuck": true}}, []env{{"retry_count": 3, "stuck": false}}},
		{"earlier step by id", "`it && health.connected`", "ok", []env{{"it": true, "health": env{"connected": true}}}, []env{{"it": true, "health": env{"connected": false}}}},
		{"duration is the step's seconds", "`duration < 2.5 && it`", "ok", []env{{"it": true, "duration": 1.0}}, []env{{"it": true, "duration": 3.0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := CompileCell(tc.src, tc.field)
			if err != nil {
				t.Fatalf("CompileCell(%q): %v", tc.src, err)
			}
			for _, v := range tc.match {
				if ok, err := evalCell(t, e, v); err != nil || !ok {
					t.Errorf("%q (%s) with %v: want true, got %v %v", tc.src, e, v, ok, err)
				}
			}
			for _, v := range tc.miss {
				if ok, err := evalCell(t, e, v); err != nil || ok {
					t.Errorf("%q (%s) with %v: want false, got %v %v", tc.src, e, v, ok, err)
				}
			}
		})
	}
}

// A cell that is none of the forms is an error, never a silent false.
func TestCompileCellRejectsUnknownForms(t *testing.T) {
	for _, src := range []string{"< 18OO", "about an hour", "0 to 2", ">=", "`true && false`", "", "== ", "yes maybe"} {
		t.Run(src, func(t *testing.T) {
			e, err := CompileCell(src, "field")
			if !errors.Is(err, ErrUnknownShorthand) {
				t.Fatalf("want ErrUnknownShorthand, got %q, %v", e, err)
			}
		})
	}
}

// The engine passes restarts() in the env map; that implementation is the
// one an expression calls.
func TestEngineFunctionFromEnvWins(t *testing.T) {
	c := loadZulip(t, Options{})
	var crash *ActionRow
	for _, a := range c.Stages[1].Actions {
		if strings.Contains(a.Expr, "restarts(") {
			crash = a
		}
	}
	if crash == nil {
		t.Fatal("pi stage has no crash-loop row")
	}
	for _, tc := range []struct {
		name  string
		count int
		want  bool
	}{{"eleven restarts alerts", 11, true}, {"three restarts does not", 3, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var gotAgent, gotWindow string
			env := map[string]any{"restarts": RestartsFunc(func(agent, window string) int {
				gotAgent, gotWindow = agent, window
				return tc.count
			})}
			out, err := expr.Run(crash.Program, env)
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want || gotAgent != "abiba" || gotWindow != "1h" {
				t.Fatalf("got %v (agent %q window %q), want %v for abiba/1h", out, gotAgent, gotWindow, tc.want)
			}
		})
	}
}

// The zulip-health action rows do what the runbook says: retry_count 1–2
// never restarts, a blocked pipeline does.
func TestZulipHealthActions(t *testing.T) {
	c := loadZulip(t, Options{})
	pi := c.Stages[1]
	fire := func(env map[string]any) []string {
		var out []string
		for _, a := range pi.Actions {
			if a.Program == nil {
				continue
			}
			if ok, err := expr.Run(a.Program, env); err == nil && ok == true {
				out = append(out, a.Action)
			}
		}
		return out
	}
	base := func() map[string]any {
		return map[string]any{"connected": true, "queue_healthy": true, "stuck": false, "response_pipeline": "healthy",
			"retry_count": 0.0, "last_error": nil, "restarts": RestartsFunc(func(string, string) int { return 0 })}
	}
	cases := []struct {
		name string
		set  map[string]any
		want string
	}{
		{"healthy does nothing", nil, ""},
		{"retry_count 2 is self-healing", map[string]any{"retry_count": 2.0}, ""},
		{"retry_count 3 restarts", map[string]any{"retry_count": 3.0}, "pm2 restart abiba-zulip"},
		{"blocked pipeline restarts", map[string]any{"response_pipeline": "blocked"}, "pm2 restart abiba-zulip"},
		{"degraded pipeline only monitors", map[string]any{"response_pipeline": "degraded"}, "monitor"},
		{"last error is logged", map[string]any{"last_error": "429"}, "log"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := base()
			for k, v := range tc.set {
				env[k] = v
			}
			got := strings.Join(fire(env), ",")
			if got != tc.want {
				t.Fatalf("fired %q, want %q", got, tc.want)
			}
		})
	}
}

// explain --json lists every stage and all ten A1 rows as compiled
// expressions, with transport chains spelled out.
func TestExplainPlan(t *testing.T) {
	c := loadZulip(t, Options{})
	raw, err := json.Marshal(Explain(c))
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Stages []struct {
			ID, Agent, Target string
			Gate              bool
			Steps             []struct {
				ID, Kind string
				Health   []struct{ Field, Severity, Expr string }
			}
			Actions []struct {
				Condition, Action string
				Executed          bool
			}
		}
	}
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range plan.Stages {
		ids = append(ids, s.ID)
	}
	if got := strings.Join(ids, ","); got != "server,pi,tanko,agent0,koby,global" {
		t.Fatalf("stages %s", got)
	}
	if !plan.Stages[0].Gate || plan.Stages[1].Gate {
		t.Errorf("only server is a gate: %+v", plan.Stages[0])
	}
	if plan.Stages[2].Target != "ssh root@192.168.68.15 → pct 112" || plan.Stages[3].Target != "ssh root@192.168.68.14 → docker agent-zero" {
		t.Errorf("chains: %q, %q", plan.Stages[2].Target, plan.Stages[3].Target)
	}
	a1 := plan.Stages[1].Steps[0]
	fields := map[string]bool{}
	for _, h := range a1.Health {
		fields[h.Field] = true
		if h.Expr == "" || (h.Severity != "healthy" && h.Severity != "degraded" && h.Severity != "critical") {
			t.Errorf("A1 cell %+v", h)
		}
	}
	if a1.ID != "health" || a1.Kind != "http" || len(fields) != 10 || len(a1.Health) != 23 {
		t.Fatalf("A1 step %s/%s: %d fields, %d cells", a1.ID, a1.Kind, len(fields), len(a1.Health))
	}
	for _, a := range plan.Stages[4].Actions {
		if a.Executed {
			t.Errorf("koby action %q must be marked never executed", a.Action)
		}
	}
	for _, a := range plan.Stages[1].Actions {
		if !a.Executed {
			t.Errorf("abiba action %q must be executed", a.Action)
		}
	}
}

func TestWriteExplainTextIsInOrder(t *testing.T) {
	c := loadZulip(t, Options{})
	var buf bytes.Buffer
	if err := WriteExplainText(&buf, c); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	last := -1
	for _, want := range []string{"zulip_site   \"https://chat.sysloggh.net\"", "1. stage server", "[gate", "GET ${zulip_site}/api/v1/server_settings",
		"2. stage pi", "it >= 1800", "when response_pipeline == \"blocked\" → run `pm2 restart abiba-zulip` on local",
		"3. stage tanko", "on tanko (ssh root@192.168.68.15 → pct 112)", "5. stage koby", "never executed: report-only agent",
		"escalation:", "maintains:"} {
		i := strings.Index(out, want)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in:\n%s", want, out)
		}
		last = i
	}
}

// An inventory overrides the contract's targets and vars; --var wins over
// both; the http URL, notifier options and chains follow.
func TestInventoryAndVarOverrides(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(inv, []byte("vars:\n  zulip_site: http://127.0.0.1:4001\n  pi_url: http://127.0.0.1:4002\ntargets:\n  amdpve: {ssh: root@127.0.0.1:2222, known_hosts: /tmp/kh, host_key: accept-new}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadZulip(t, Options{Inventory: inv, Vars: map[string]string{"pi_url": "http://127.0.0.1:4999"}})
	if got := c.Vars["zulip_site"]; got != "http://127.0.0.1:4001" {
		t.Errorf("zulip_site %q, want the inventory's", got)
	}
	if got := c.Vars["pi_url"]; got != "http://127.0.0.1:4999" {
		t.Errorf("--var must win over the inventory: %q", got)
	}
	// The URL keeps its reference: the engine fills it at run time, as data.
	if got := c.Stages[1].Steps[0].HTTP.URL; got != "${pi_url}/health" {
		t.Errorf("pi URL %q, want the reference as written", got)
	}
	if got := c.Chain("tanko"); got != "ssh root@127.0.0.1:2222 → pct 112" {
		t.Errorf("tanko chain %q", got)
	}
	if got := c.Notify[1].Options.(*ZulipOptions).Site; got != "http://127.0.0.1:4001" {
		t.Errorf("notifier site %q", got)
	}
	if c.Targets["amdpve"].HostKey != "accept-new" {
		t.Errorf("inventory target options lost: %+v", c.Targets["amdpve"])
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("vars: {a: b}\nhosts: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ds := LoadFile(zulipFixture, Options{Inventory: bad})
	if !ds.HasErrors() || !strings.Contains(ds.String(), bad+":2:1: error: unknown key \"hosts\" in inventory") {
		t.Fatalf("inventory problems must name the inventory file:\n%s", ds)
	}
}

// LoadMany keeps the order of its paths, fails only the broken contract and
// shares one compiled program per distinct expression.
func TestLoadMany(t *testing.T) {
	paths := []string{zulipFixture, "testdata/bad/via_cycle.md", "testdata/good/minimal.md", zulipFixture, "testdata/no-such-file.md",
		"testdata/good/forms.md", "testdata/good/minimal.md", zulipFixture}
	cs, ds := LoadMany(paths, Options{})
	if len(cs) != len(paths) || len(ds) != len(paths) {
		t.Fatalf("got %d contracts, %d diagnostics", len(cs), len(ds))
	}
	if cs[0] == nil || cs[2] == nil || cs[3] == nil || cs[1] != nil || cs[4] != nil {
		t.Fatalf("wrong contracts loaded: %v", cs)
	}
	if cs[2].Name != "minimal" || cs[0].Name != "zulip-health" {
		t.Errorf("order lost: %s, %s", cs[0].Name, cs[2].Name)
	}
	if !strings.Contains(ds[4].String(), "no-such-file.md:1:1: error: read contract") {
		t.Errorf("missing file: %s", ds[4])
	}
	// Workers reuse their read buffer: every contract must still equal the
	// same file loaded on its own.
	for i, c := range cs {
		if c == nil {
			continue
		}
		solo, _ := LoadFile(paths[i], Options{})
		got, _ := json.Marshal(Explain(c))
		want, _ := json.Marshal(Explain(solo))
		if string(got) != string(want) {
			t.Errorf("%s loaded in a batch differs from loading it alone", paths[i])
		}
	}
	a := cs[0].Stages[1].Steps[0].Health[4].Cells[0]
	b := cs[3].Stages[1].Steps[0].Health[4].Cells[0]
	if a.Expr != "it != nil && it < 1800" || a.Program != b.Program {
		t.Errorf("identical cells must share one compiled program: %q %p %p", a.Expr, a.Program, b.Program)
	}
}

func TestLoadDir(t *testing.T) {
	cs, ds, err := LoadDir("testdata/good", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < 2 || cs[0].Name != "forms" || cs[1].Name != "minimal" {
		t.Fatalf("got %d contracts", len(cs))
	}
	for _, d := range ds {
		if len(d) > 0 {
			t.Errorf("unexpected diagnostics: %s", d)
		}
	}
	if _, _, err := LoadDir("testdata/nope", Options{}); err == nil {
		t.Error("a missing directory must be an error")
	}
}

func TestDiagnosticsErr(t *testing.T) {
	_, ds := LoadFile("testdata/bad/report_only.md", Options{})
	if ds.Err() != nil {
		t.Fatalf("warnings only must not be an error: %v", ds.Err())
	}
	_, ds = LoadFile("testdata/bad/via_cycle.md", Options{})
	err := ds.Err()
	if !errors.Is(err, ErrInvalidContract) || !strings.Contains(err.Error(), "via_cycle.md:5:3: error: targets.a: via cycle") {
		t.Fatalf("Err: %v", err)
	}
}

// The for_each keys and secrets stay as ${name} for the engine to fill.
func TestForEachAndSecretsStayForRunTime(t *testing.T) {
	c, ds := LoadFile("testdata/good/forms.md", Options{})
	if c == nil {
		t.Fatal(ds)
	}
	workers := c.Stages[1]
	if workers.ForEach != "workers" || len(c.ForEach["workers"]) != 2 || c.ForEach["workers"][1]["port"] != 9002 {
		t.Fatalf("for_each: %+v %+v", workers, c.ForEach)
	}
	if workers.Steps[0].Script != "127.0.0.1:${port}" || workers.Actions[0].Action != "systemctl restart worker@${port}" {
		t.Errorf("item keys must be left for run time: %q %q", workers.Steps[0].Script, workers.Actions[0].Action)
	}
	h := c.Stages[0].Steps[0].HTTP
	if h.Method != "POST" || h.URL != "${base}/check" || h.Headers["Authorization"] != "Bearer ${API_TOKEN}" || !strings.Contains(h.Body, `"probe": true`) {
		t.Errorf("http request: %+v", h)
	}
	if a := workers.Actions[1]; a.Action != workers.Actions[0].Action || a.Guard.EscalateAfter != 2 || a.Tier != 2 || a.Guard.RestartCountProgram == nil {
		t.Errorf("same-as-above row: %+v", a)
	}
	if g := workers.Actions[0].Guard; g.After != 2 || g.Budget == nil || g.Budget.Count != 1 || g.Grace.Seconds() != 20 {
		t.Errorf("row guards: %+v", g)
	}
}

// The Maintains bullets and the per-agent example become a typed schema: the
// union of every agent's fields, typed from the example values.
func TestMaintainsSchema(t *testing.T) {
	c := loadZulip(t, Options{})
	var keys []string
	for _, k := range c.Maintains.Keys {
		keys = append(keys, k.Name+":"+k.Type)
	}
	if got := strings.Join(keys, " "); got != "zulip_server_status:enum agents:map last_check:timestamp overall_severity:enum restart_debounce:timestamp" {
		t.Fatalf("keys: %s", got)
	}
	if e := c.Maintains.Keys[3].Enum; strings.Join(e, ",") != "healthy,degraded,critical" {
		t.Errorf("overall_severity enum %v", e)
	}
	if d := c.Maintains.Keys[2].Doc; d != "When the last full diagnostic ran" {
		t.Errorf("doc %q", d)
	}
	types := map[string]string{}
	for _, k := range c.Maintains.Agent {
		types[k.Name] = k.Type
	}
	want := map[string]string{"connected": "bool", "edit_fail_rate_pct": "int", "service_state": "string", "a2a_status": "int", "platform": "string"}
	for k, v := range want {
		if types[k] != v {
			t.Errorf("per-agent %s: got %q, want %q", k, types[k], v)
		}
	}
	if len(types) != 11 {
		t.Errorf("want the union of 11 per-agent keys, got %d: %v", len(types), types)
	}
}

func TestWholeTicks(t *testing.T) {
	for _, tc := range []struct {
		in, inner string
		ok        bool
	}{{"`x`", "x", true}, {"``a`b``", "a`b", true}, {"```", "", false}, {"``", "", false}, {"`", "", false}, {"`a` b `c`", "", false}, {"plain", "", false}} {
		t.Run(tc.in, func(t *testing.T) {
			inner, ok := wholeTicks(tc.in)
			if inner != tc.inner || ok != tc.ok {
				t.Fatalf("wholeTicks(%q) = %q, %v; want %q, %v", tc.in, inner, ok, tc.inner, tc.ok)
			}
		})
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

func TestWriteExplainTextReportsWriteErrors(t *testing.T) {
	c := loadZulip(t, Options{})
	if err := WriteExplainText(&failingWriter{after: 3}, c); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("want the writer's error, got %v", err)
	}
	if err := WriteExplainText(&bytes.Buffer{}, nil); err == nil {
		t.Fatal("a nil contract must be an error")
	}
}

// A contract saved with Windows line endings loads to the same plan.
func TestCRLFContractLoadsTheSame(t *testing.T) {
	src, err := os.ReadFile(zulipFixture)
	if err != nil {
		t.Fatal(err)
	}
	crlf := bytes.ReplaceAll(src, []byte("\n"), []byte("\r\n"))
	c, ds := Parse("crlf.md", crlf, Options{})
	if c == nil {
		t.Fatalf("CRLF contract did not load:\n%s", ds)
	}
	lf := loadZulip(t, Options{})
	a, _ := json.Marshal(Explain(lf))
	b, _ := json.Marshal(Explain(c))
	norm := func(s []byte) string {
		return strings.ReplaceAll(string(s), "crlf.md", zulipFixture)
	}
	if norm(a) != norm(b) {
		t.Fatalf("plans differ:\nLF:   %.400s\nCRLF: %.400s", a, b)
	}
}

// Each agent's snapshot keys come with the example's values, and the
// Key | Value table compiles the expressions that fill the rest.
func TestPerAgentSnapshotKeys(t *testing.T) {
	c := loadZulip(t, Options{})
	m := c.Maintains
	if strings.Join(m.Agents, ",") != "abiba,tanko,agent-zero,koby" {
		t.Fatalf("agents %v", m.Agents)
	}
	names := func(agent string) string {
		var out []string
		for _, k := range m.PerAgent[agent] {
			out = append(out, k.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names("tanko"); got != "platform,service_state,http_status,severity" {
		t.Errorf("tanko keys %s", got)
	}
	if got := names("agent-zero"); got != "platform,a2a_status,severity" {
		t.Errorf("agent-zero keys %s", got)
	}
	if got := len(m.KeysFor("koby")); got != 3 {
		t.Errorf("koby has 3 keys, got %d", got)
	}
	if got := len(m.KeysFor("not-in-the-example")); got != len(m.Agent) {
		t.Errorf("an agent without an example gets the union (%d keys), got %d", len(m.Agent), got)
	}
	env := map[string]any{"service": map[string]any{"stdout": "active"}, "http": map[string]any{"stdout": "302"}}
	for _, k := range m.PerAgent["tanko"] {
		switch k.Name {
		case "platform":
			// The contract binds it to its example's constant.
			v, ok := k.Fill(map[string]any{"example": map[string]any{"platform": k.Example}})
			if k.Example != "dsh" || !ok || v != "dsh" {
				t.Errorf("platform: example %v, filled %v %v", k.Example, v, ok)
			}
		case "http_status":
			if k.Example != int64(200) || k.Type != "int" {
				t.Errorf("http_status example %#v type %s", k.Example, k.Type)
			}
			if v, err := expr.Run(k.Program, env); err != nil || v != "302" {
				t.Errorf("http_status value %v %v", v, err)
			}
		case "service_state":
			if v, err := expr.Run(k.Program, env); err != nil || v != "active" {
				t.Errorf("service_state value %v %v", v, err)
			}
		}
	}
}
