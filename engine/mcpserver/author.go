package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/replay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Diagnostic is one problem of a draft, as lint prints it.
type Diagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
	Severity string `json:"severity" jsonschema:"error (the contract does not load), warning (lint --strict fails), or note"`
	Message  string `json:"message"`
	Text     string `json:"text" jsonschema:"file:line:col: severity: message, as contractd lint prints it"`
}

func diagnostics(ds contracts.Diagnostics) []Diagnostic {
	out := make([]Diagnostic, 0, len(ds))
	for _, d := range ds {
		out = append(out, Diagnostic{File: d.Pos.File, Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Message: d.Msg, Text: d.String()})
	}
	return out
}

// DraftInput is a contract draft given as text.
type DraftInput struct {
	Text string `json:"text" jsonschema:"the contract's Markdown, front matter included"`
	File string `json:"file,omitempty" jsonschema:"the file name diagnostics name (default draft.md); a name only, no directory"`
}

// draftName is the name a draft's diagnostics give it: the caller's file
// name without any directory, or draft.md.
func draftName(file string) string {
	name := filepath.Base(strings.TrimSpace(file))
	if name == "." || name == "/" || name == "" {
		return "draft.md"
	}
	return name
}

// checkSize refuses a text over the contract size cap before anything
// parses it, so the caller learns the limit, not a parser's trouble.
func (s *server) checkSize(what, text string) error {
	limit := s.Source.LoadOptions().MaxFileSize
	if limit <= 0 {
		limit = contracts.DefaultMaxFileSize
	}
	if int64(len(text)) > limit {
		return fmt.Errorf("%s is %s, larger than the %s limit of a contract file: split it, or the operator raises --max-file-size", what, contracts.FormatSize(int64(len(text))), contracts.FormatSize(limit))
	}
	return nil
}

// parseDraft loads a draft as contractd lint loads a file (contracts.Parse,
// with the size caps), without its inventory or vars.
func (s *server) parseDraft(in DraftInput) (*contracts.Contract, contracts.Diagnostics, error) {
	if err := s.checkSize("the draft", in.Text); err != nil {
		return nil, nil, err
	}
	opts := s.Source.LoadOptions()
	opts.Inventory, opts.Vars = "", nil
	c, ds := contracts.Parse(draftName(in.File), []byte(in.Text), opts)
	return c, ds, nil
}

// LintInput is a draft and whether warnings fail it.
type LintInput struct {
	Text   string `json:"text" jsonschema:"the contract's Markdown, front matter included"`
	File   string `json:"file,omitempty" jsonschema:"the file name diagnostics name (default draft.md)"`
	Strict bool   `json:"strict,omitempty" jsonschema:"warnings fail the draft too, as lint --strict"`
}

// LintOut is lint_draft's output.
type LintOut struct {
	OK          bool         `json:"ok" jsonschema:"true when lint would exit 0: no error (and no warning with strict)"`
	Errors      int          `json:"errors"`
	Warnings    int          `json:"warnings"`
	Diagnostics []Diagnostic `json:"diagnostics"`
}

func (s *server) lintDraft(ctx context.Context, req *mcp.CallToolRequest, in LintInput) (*mcp.CallToolResult, LintOut, error) {
	s.logCall(ctx, req, "lint_draft", false, "bytes", len(in.Text))
	_, ds, err := s.parseDraft(DraftInput{Text: in.Text, File: in.File})
	if err != nil {
		return nil, LintOut{}, err
	}
	out := LintOut{Diagnostics: diagnostics(ds)}
	for _, d := range ds {
		switch d.Severity {
		case contracts.DiagError:
			out.Errors++
		case contracts.DiagWarning:
			out.Warnings++
		}
	}
	out.OK = out.Errors == 0 && !(in.Strict && out.Warnings > 0)
	var b strings.Builder
	for _, d := range out.Diagnostics {
		b.WriteString(d.Text + "\n")
	}
	switch {
	case len(ds) == 0:
		fmt.Fprintf(&b, "%s: no problems\n", draftName(in.File))
	case out.OK:
		fmt.Fprintf(&b, "%s loads: %d warnings\n", draftName(in.File), out.Warnings)
	default:
		fmt.Fprintf(&b, "%s fails lint: %d errors, %d warnings\n", draftName(in.File), out.Errors, out.Warnings)
	}
	return textResult(b.String()), out, nil
}

func (s *server) explainDraft(ctx context.Context, req *mcp.CallToolRequest, in DraftInput) (*mcp.CallToolResult, ExplainOut, error) {
	s.logCall(ctx, req, "explain_draft", false, "bytes", len(in.Text))
	c, ds, err := s.parseDraft(in)
	if err != nil {
		return nil, ExplainOut{}, err
	}
	if c == nil || ds.HasErrors() {
		out := ExplainOut{Diagnostics: diagnostics(ds)}
		var b strings.Builder
		for _, d := range out.Diagnostics {
			b.WriteString(d.Text + "\n")
		}
		b.WriteString("the draft does not load: nothing to explain\n")
		res := textResult(b.String())
		res.IsError = true
		return res, out, nil
	}
	return explain(c, diagnostics(ds))
}

// TestInput is a draft and a test file, both as text.
type TestInput struct {
	Contract string `json:"contract" jsonschema:"the contract draft's Markdown"`
	Test     string `json:"test" jsonschema:"the test file's YAML (NAME.test.yaml): runs with recorded step outputs and expected verdicts; its contract: names the draft by a file name alone (default draft.md)"`
}

// TestOut is test_draft's output.
type TestOut struct {
	Passed bool         `json:"passed"`
	Runs   []TestRunOut `json:"runs"`
	Errors []string     `json:"errors,omitempty" jsonschema:"why the test file or the draft did not load"`
	Lint   []Diagnostic `json:"diagnostics,omitempty"`
}

// TestRunOut is one run of a test file.
type TestRunOut struct {
	Label    string   `json:"label"`
	Severity string   `json:"severity" jsonschema:"the run's overall severity"`
	Passed   bool     `json:"passed"`
	Diffs    []string `json:"diffs" jsonschema:"each expectation the run missed"`
}

func (s *server) testDraft(ctx context.Context, req *mcp.CallToolRequest, in TestInput) (*mcp.CallToolResult, TestOut, error) {
	s.logCall(ctx, req, "test_draft", false, "bytes", len(in.Contract)+len(in.Test))
	if err := s.checkSize("the draft", in.Contract); err != nil {
		return nil, TestOut{}, err
	}
	if err := s.checkSize("the test file", in.Test); err != nil {
		return nil, TestOut{}, err
	}
	// replay.Test reads files: both go into a directory of their own,
	// removed afterwards, the draft under the name the test file gives it.
	dir, err := os.MkdirTemp("", "contractd-mcp-test-")
	if err != nil {
		return nil, TestOut{}, err
	}
	defer os.RemoveAll(dir)
	testPath := filepath.Join(dir, "draft.test.yaml")
	if err := os.WriteFile(testPath, []byte(in.Test), 0o600); err != nil {
		return nil, TestOut{}, err
	}
	f, err := replay.Load(testPath)
	if err != nil {
		return testFailed(fmt.Errorf("test file: %s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), replay.ErrFile.Error()+": "), testPath, "test")))
	}
	name := draftName(f.Contract)
	if rel, _ := filepath.Rel(dir, f.ContractPath()); rel != name || !contracts.IsContractFile(name) {
		return testFailed(fmt.Errorf("test file: contract: %q: give a file name alone, such as %s: the draft is put beside the test file under that name", f.Contract, name))
	}
	if f.Inventory != "" {
		return testFailed(errors.New("test file: inventory: a test of a draft cannot read an inventory file; give the values as vars: in the test file"))
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(in.Contract), 0o600); err != nil {
		return nil, TestOut{}, err
	}
	res, err := replay.Test(ctx, testPath)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
		msg = strings.TrimPrefix(msg, replay.ErrFile.Error()+": ")
		return testFailed(errors.New(msg))
	}
	out := TestOut{Passed: !res.Failed(), Runs: []TestRunOut{}}
	var b strings.Builder
	for _, r := range res.Runs {
		diffs := r.Diffs
		if diffs == nil {
			diffs = []string{}
		}
		out.Runs = append(out.Runs, TestRunOut{Label: r.Label, Severity: r.Severity.String(), Passed: len(r.Diffs) == 0, Diffs: diffs})
		verdict := "ok"
		if len(r.Diffs) > 0 {
			verdict = "differs"
		}
		fmt.Fprintf(&b, "%s: %s (overall %s)\n", r.Label, verdict, r.Severity)
		for _, d := range r.Diffs {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	if out.Passed {
		fmt.Fprintf(&b, "ok: %s, %d runs\n", res.Contract, len(res.Runs))
	} else {
		fmt.Fprintf(&b, "FAIL: %s\n", res.Contract)
	}
	return textResult(b.String()), out, nil
}

// testFailed is the answer of a test that could not run: an error result
// that says why, with the reason in the structured content too.
func testFailed(err error) (*mcp.CallToolResult, TestOut, error) {
	res := textResult(err.Error() + "\n")
	res.IsError = true
	return res, TestOut{Runs: []TestRunOut{}, Errors: []string{err.Error()}}, nil
}

// RunOut is the output of dry_run and run_contract: the report's verdicts
// and every action with each guard's answer.
type RunOut struct {
	Contract    string                 `json:"contract"`
	RunID       string                 `json:"run_id"`
	DryRun      bool                   `json:"dry_run"`
	Severity    string                 `json:"severity" jsonschema:"the run's overall severity"`
	Agents      map[string]string      `json:"agents,omitempty" jsonschema:"agent → severity"`
	RequestedBy string                 `json:"requested_by,omitempty"`
	Actions     []*engine.ActionReport `json:"actions" jsonschema:"every candidate action: status and the guard that decided; trace holds each guard's answer"`
	Messages    []MessageOut           `json:"messages"`
	Errors      []string               `json:"errors,omitempty" jsonschema:"engine-level problems (a sick agent is not one)"`
	Skipped     string                 `json:"skipped,omitempty" jsonschema:"why the whole run was skipped (another run holds the lock)"`
}

// runOut is the answer of dry_run and run_contract: the run's report as
// RunOut, with the report's text (and every guard's answer) for people,
// and the engine's error beside them in an error result. Without a report
// it fails with the error alone, as what (the run, "run NAME") did.
func runOut(what string, rep *engine.Report, err error) (*mcp.CallToolResult, RunOut, error) {
	if rep == nil {
		if err == nil {
			err = errors.New("the engine returned no report")
		}
		return nil, RunOut{}, fmt.Errorf("%s: %w", what, err)
	}
	out := RunOut{Contract: rep.Contract, RunID: rep.RunID, DryRun: rep.DryRun, Severity: rep.OverallSeverity.String(),
		Agents: map[string]string{}, RequestedBy: rep.RequestedBy, Actions: rep.Actions, Messages: messages(rep.Alerts), Errors: rep.Errors, Skipped: rep.Skipped}
	for name, a := range rep.Agents {
		out.Agents[name] = a.Severity.String()
	}
	if out.Actions == nil {
		out.Actions = []*engine.ActionReport{}
	}
	var b strings.Builder
	engine.WriteText(&b, rep)
	b.WriteString("\nguards:\n")
	engine.WriteTrace(&b, rep)
	res := textResult(b.String())
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
		res.IsError = true
	}
	return res, out, nil
}

func (s *server) dryRun(ctx context.Context, req *mcp.CallToolRequest, in ContractInput) (*mcp.CallToolResult, RunOut, error) {
	s.logCall(ctx, req, "dry_run", false, "contract", in.Contract)
	if err := checkName(in.Contract); err != nil {
		return nil, RunOut{}, err
	}
	c, err := s.Source.Contract(ctx, in.Contract)
	if err != nil {
		return nil, RunOut{}, err
	}
	rep, err := s.Source.DryRun(engine.WithRequester(ctx, s.caller(req)), c)
	return runOut("dry run of "+in.Contract, rep, err)
}
