package steps

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expr-lang/expr"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
)

func cell(t *testing.T, sev contracts.Severity, src, code string) *contracts.Cell {
	t.Helper()
	p, err := expr.Compile(code, expr.AllowUndefinedVariables(), expr.AsBool())
	if err != nil {
		t.Fatalf("compile %q: %v", code, err)
	}
	return &contracts.Cell{Severity: sev, Source: src, Expr: code, Program: p}
}

func TestEvaluateRow(t *testing.T) {
	idle := &contracts.HealthRow{Field: "idle_seconds", Cells: []*contracts.Cell{
		cell(t, contracts.SeverityHealthy, "< 1800", "it < 1800"),
		cell(t, contracts.SeverityCritical, "≥ 1800", "it >= 1800"),
	}}
	pending := &contracts.HealthRow{Field: "pending_count", Cells: []*contracts.Cell{
		cell(t, contracts.SeverityHealthy, "0", "it == 0"),
		cell(t, contracts.SeverityCritical, "> 0 with `response_pipeline: blocked`", `it > 0 && response_pipeline == "blocked"`),
	}}
	nested := &contracts.HealthRow{Field: "health.connected", Cells: []*contracts.Cell{
		cell(t, contracts.SeverityHealthy, "true", "it == true"),
		cell(t, contracts.SeverityCritical, "false", "it == false"),
	}}
	label := &contracts.HealthRow{Field: `labels["app.kubernetes.io/name"]`, Cells: []*contracts.Cell{
		cell(t, contracts.SeverityHealthy, "web", `it == "web"`),
		cell(t, contracts.SeverityCritical, "!= web", `it != "web"`),
	}}
	tests := []struct {
		name    string
		row     *contracts.HealthRow
		env     map[string]any
		want    contracts.Severity
		finding string
	}{
		{"healthy value has no finding", idle, map[string]any{"idle_seconds": 10}, contracts.SeverityHealthy, ""},
		{"critical shows actual and expected", idle, map[string]any{"idle_seconds": 2400}, contracts.SeverityCritical, "idle_seconds (2400) ≥ 1800 → critical"},
		{"missing field is unknown, never healthy", idle, map[string]any{}, contracts.SeverityUnknown, "idle_seconds (missing): no column matched → unknown"},
		{"pending without blocked pipeline matches no column", pending, map[string]any{"pending_count": 2, "response_pipeline": "healthy"}, contracts.SeverityUnknown, "pending_count (2): no column matched → unknown"},
		{"pending with blocked pipeline is critical", pending, map[string]any{"pending_count": 2, "response_pipeline": "blocked"}, contracts.SeverityCritical, "pending_count (2) > 0 with `response_pipeline: blocked` → critical"},
		{"a bracketed key is one key, dots and all", label, map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "db", "app": map[string]any{"kubernetes": "web"}}}, contracts.SeverityCritical, `labels["app.kubernetes.io/name"] (db) != web → critical`},
		{"dotted field reads an earlier step", nested, map[string]any{"health": map[string]any{"connected": false}}, contracts.SeverityCritical, "health.connected (false) false → critical"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, finding := EvaluateRow(tc.row, tc.env)
			if got != tc.want || finding != tc.finding {
				t.Fatalf("got %v %q, want %v %q", got, finding, tc.want, tc.finding)
			}
			if _, leaked := tc.env["it"]; leaked {
				t.Fatal("evaluation left `it` in the environment")
			}
		})
	}
}

func TestWorstRowWins(t *testing.T) {
	step := &contracts.Step{ID: "health", Kind: "http", Health: []*contracts.HealthRow{
		{Field: "a", Cells: []*contracts.Cell{cell(t, contracts.SeverityHealthy, "0", "it == 0"), cell(t, contracts.SeverityDegraded, "1", "it == 1")}},
		{Field: "b", Cells: []*contracts.Cell{cell(t, contracts.SeverityHealthy, "0", "it == 0"), cell(t, contracts.SeverityCritical, "1", "it == 1")}},
	}}
	o := &Observation{Values: map[string]any{"a": 1, "b": 1}}
	Evaluate(step, o, o.Values)
	if o.Severity != contracts.SeverityCritical || len(o.Findings) != 2 {
		t.Fatalf("severity %v findings %q, want critical with two findings", o.Severity, o.Findings)
	}
}

func TestUnreachableStepIsNeverHealthy(t *testing.T) {
	step := &contracts.Step{ID: "svc", Kind: "bash", Health: []*contracts.HealthRow{{Field: "stdout", Cells: []*contracts.Cell{cell(t, contracts.SeverityHealthy, "active", `it == "active"`)}}}}
	o := FromResult(step, transports.Result{}, transports.ErrUnreachable)
	Evaluate(step, o, o.Values)
	if o.Severity != contracts.SeverityUnreachable {
		t.Fatalf("severity %v, want unreachable", o.Severity)
	}
}

func TestFromResultParsesJSON(t *testing.T) {
	step := &contracts.Step{ID: "pm2", Kind: "bash", As: "json"}
	o := FromResult(step, transports.Result{Stdout: `{"status":"online","restarts":3,"ratio":0.5}` + "\n"}, nil)
	if o.Values["status"] != "online" || o.Values["restarts"] != 3 || o.Values["ratio"] != 0.5 {
		t.Fatalf("values %v", o.Values)
	}
	bad := FromResult(step, transports.Result{Stdout: "not json"}, nil)
	if _, ok := bad.Values["status"]; ok || len(bad.Findings) != 1 {
		t.Fatalf("non-JSON output: values %v findings %q", bad.Values, bad.Findings)
	}
}

func TestExecCommandSetsVarsAndKeepsSecretsOutOfTheScript(t *testing.T) {
	step := &contracts.Step{ID: "s", Kind: "bash", Script: `echo "$pi_url"`}
	cmd := ExecCommand(step, map[string]string{"pi_url": "http://x:1/a b", "bad-name": "x"}, map[string]string{"ZULIP_API_KEY": "s3cret"}, time.Second)
	if !strings.Contains(cmd.Script, "pi_url='http://x:1/a b'\n") {
		t.Fatalf("script does not set the var: %q", cmd.Script)
	}
	if strings.Contains(cmd.Script, "s3cret") || strings.Contains(cmd.Script, "bad-name") {
		t.Fatalf("script leaks a secret or an invalid name: %q", cmd.Script)
	}
	if cmd.Env["ZULIP_API_KEY"] != "s3cret" || cmd.Shell != "bash" {
		t.Fatalf("command %+v", cmd)
	}
}

func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"connected":true,"retry_count":0}`))
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/auth":
			if r.Header.Get("Authorization") != "Bearer tok" {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}
	}))
	defer srv.Close()
	refused := freeAddr(t)
	vars := map[string]string{"base": srv.URL}
	tests := []struct {
		name, script string
		timeout      time.Duration
		status       string
		check        func(*testing.T, *Observation)
	}{
		{"json body is merged", "GET ${base}/health", time.Second, "200", func(t *testing.T, o *Observation) {
			if o.Values["connected"] != true || o.Values["retry_count"] != 0 {
				t.Fatalf("values %v", o.Values)
			}
		}},
		{"redirect is observed, not followed", "GET ${base}/redirect", time.Second, "302", nil},
		{"headers are sent", "GET ${base}/auth\nAuthorization: Bearer tok", time.Second, "200", nil},
		{"refused is 000", "GET http://" + refused + "/", time.Second, "000", func(t *testing.T, o *Observation) {
			if o.Err != nil {
				t.Fatalf("refused port made the step unreachable: %v", o.Err)
			}
		}},
		{"timeout is 000 and timed out", "GET ${base}/slow", 100 * time.Millisecond, "000", func(t *testing.T, o *Observation) {
			if o.Values["timed_out"] != true {
				t.Fatalf("timed_out not set: %v", o.Values)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			o := Kinds["http"].Probe(ctx, parsedStep(t, "http", tc.script, vars), vars, nil)
			if o.HTTPStatus != tc.status || o.Values["http_status"] != tc.status {
				t.Fatalf("status %q (values %v), want %q", o.HTTPStatus, o.Values["http_status"], tc.status)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	open := Kinds["tcp"].Probe(ctx, &contracts.Step{ID: "t", Kind: "tcp", Script: "${addr}"}, map[string]string{"addr": ln.Addr().String()}, nil)
	closed := Kinds["tcp"].Probe(ctx, &contracts.Step{ID: "t", Kind: "tcp", Script: freeAddr(t)}, nil, nil)
	if open.Values["open"] != true || closed.Values["open"] != false || closed.Err != nil {
		t.Fatalf("open %v closed %v (%v)", open.Values, closed.Values, closed.Err)
	}
}

// freeAddr returns a loopback address nothing listens on.
// parsedStep is the one step of a contract whose block is kind's, holding
// script, read by the contract parser as a run reads it, with vars declared.
func parsedStep(t *testing.T, kind, script string, vars map[string]string) *contracts.Step {
	t.Helper()
	src := "---\nname: t\nruntime_contract: 2\n"
	if len(vars) > 0 {
		src += "vars:\n"
		for k, v := range vars {
			src += "  " + k + ": " + strconv.Quote(v) + "\n"
		}
	}
	src += "---\n\n## Execution\n\n### Step {#s}\n\n```" + kind + " {id=h}\n" + script + "\n```\n"
	c, diags := contracts.Parse("t.md", []byte(src), contracts.Options{})
	if diags.HasErrors() {
		t.Fatalf("%s", diags.Errors())
	}
	return c.Stages[0].Steps[0]
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A finding names what was seen and why it was judged so, once: an
// unreachable target says "unreachable" once, and an `Expected:` line's
// finding says the value was expected.
func TestFindingWording(t *testing.T) {
	step := &contracts.Step{ID: "svc", Kind: "bash"}
	err := fmt.Errorf("ssh root@127.0.0.1:2222: dial: connect: connection refused: %w", transports.ErrUnreachable)
	o := FromResult(step, transports.Result{}, err)
	Evaluate(step, o, o.Values)
	if want := "ssh root@127.0.0.1:2222: dial: connect: connection refused: unreachable"; len(o.Findings) != 1 || o.Findings[0] != want {
		t.Errorf("unreachable findings %q, want [%q]", o.Findings, want)
	}

	src := "---\nname: e\nruntime_contract: 2\n---\n\n## Execution\n\n### S {#s}\n\n```sh {id=svc}\necho down\n```\n\nExpected: `up` or `starting`\n"
	c, ds := contracts.Parse("e.md", []byte(src), contracts.Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	st := c.Stages[0].Steps[0]
	o = FromResult(st, transports.Result{Stdout: "down\n"}, nil)
	Evaluate(st, o, o.Values)
	if want := "stdout (down) expected `up` or `starting` → critical"; len(o.Findings) != 1 || o.Findings[0] != want {
		t.Errorf("Expected: findings %q, want [%q]", o.Findings, want)
	}
}

// A var reaches a command as a shell variable, so the shell's own
// expansions of it work as in any script: a default for an empty value,
// an alternative, a suffix removed.
func TestScriptShellExpansions(t *testing.T) {
	script := Script(`printf '%s|%s|%s\n' "${unit:-web}" "${empty:-none}" "${file%.conf}"`, map[string]string{"unit": "api", "empty": "", "file": "x; rm -rf /.conf"})
	for _, shell := range []string{"bash", "sh"} {
		res, err := (&transports.Local{}).Exec(context.Background(), transports.Command{Script: script, Shell: shell, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if want := "api|none|x; rm -rf /\n"; res.Stdout != want || res.ExitCode != 0 {
			t.Errorf("%s: stdout %q exit %d (stderr %q), want %q", shell, res.Stdout, res.ExitCode, res.Stderr, want)
		}
	}
}

// TestComparisonOnNullIsNoValue: `< 26` on a null field became "unknown
// (invalid operation: <nil> < int)". Null is no value: a comparison does
// not hold on it, a cell that names null (`null`, `!= X`) does, and a row
// no cell holds on is unknown with a finding that says the field is null.
func TestComparisonOnNullIsNoValue(t *testing.T) {
	row := func(field string, cells ...string) *contracts.HealthRow {
		r := &contracts.HealthRow{Field: field}
		for i, src := range cells {
			if src == "" {
				continue
			}
			text, err := contracts.CompileCell(src, field)
			if err != nil {
				t.Fatal(err)
			}
			p, err := contracts.Compile(text)
			if err != nil {
				t.Fatal(err)
			}
			sev := []contracts.Severity{contracts.SeverityHealthy, contracts.SeverityDegraded, contracts.SeverityCritical}[i]
			r.Cells = append(r.Cells, &contracts.Cell{Severity: sev, Source: src, Expr: text, Program: p})
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		row     *contracts.HealthRow
		value   any
		want    contracts.Severity
		finding string
	}{
		{"< N on null", row("disk_pct", "< 90", "", ">= 90"), nil, contracts.SeverityUnknown, "disk_pct is null: no column matched → unknown"},
		{"a range and N+ on null", row("age_h", "0–25", "26-47", "48+"), nil, contracts.SeverityUnknown, "age_h is null: no column matched → unknown"},
		{"a null cell judges null", row("disk_pct", "< 90", "null", ">= 90"), nil, contracts.SeverityDegraded, "disk_pct (null) null → degraded"},
		{"null or < N", row("disk_pct", "null or < 90", "", ">= 90"), nil, contracts.SeverityHealthy, ""},
		{"!= X holds on null", row("state", "ok", "", "!= ok"), nil, contracts.SeverityCritical, "state (null) != ok → critical"},
		{"a number still compares", row("disk_pct", "< 90", "", ">= 90"), 95.0, contracts.SeverityCritical, "disk_pct (95) >= 90 → critical"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, finding := EvaluateRow(tc.row, map[string]any{tc.row.Field: tc.value})
			if got != tc.want || finding != tc.finding {
				t.Fatalf("got %v %q, want %v %q", got, finding, tc.want, tc.finding)
			}
		})
	}
}
