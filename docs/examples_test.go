// Package docs holds the project's documentation. Its test executes every
// contract example the documentation shows, so an example that stops
// working fails CI.
package docs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/lintrun"
)

// The pages whose contract examples are executed.
var pages = []string{"../README.md", "contract-format.md", "operations.md", "transports.md"}

// An example is one fenced block (or, in transports.md, one inline target
// like `{via: pve, pct: 112}`) and what the test does with it, decided by
// its form alone:
//
//   - a complete contract: a block starting with a `---` line (yaml: front
//     matter only; markdown: front matter and body). It is linted as it is,
//     and run once (see runComplete).
//   - an inventory: a yaml block whose first line is a comment naming a
//     .yaml file (`# mesh.yaml`). It is loaded with the page's context
//     contract as --inventory.
//   - a front-matter fragment: a yaml block whose top-level keys are all
//     front-matter keys. It is wrapped as `---`, `name: example`,
//     `runtime_contract: 2`, the block, `---`.
//   - a body fragment: any other markdown block. It is wrapped in the
//     page's context (the front matter every front-matter example on the
//     page makes, merged key by key) under `## Execution`; unless it
//     brings its own stages (H3 with {#id}) or is a `## Maintains` block,
//     inside a stage `### Example {#example}` whose first step is
//     `bash {id=probe as=json}`. A name its expressions read that only the
//     rest of a real contract would define is supplied: a step of that id
//     (`pm2.restarts`), a row naming that field.
//   - not a contract: a yaml block of other keys (a Prometheus config);
//     text, sh, go, json blocks (output, commands, code).
//
// A deliberately bad example is followed by a paragraph starting
// "Lint refuses this:" whose backticked text is the error lint must print.
type example struct {
	page, form string
	line       int
	src        string
	refuses    string // the documented error of a bad example
	warns      string // the documented warning of an example lint warns about
}

const (
	formComplete  = "complete contract"
	formInventory = "inventory"
	formFront     = "front-matter fragment"
	formBody      = "body fragment"
	formTarget    = "inline target"
)

// TestDocExamples lints every example of every page, runs the complete
// ones, and checks the documented error of every bad one.
func TestDocExamples(t *testing.T) {
	sink := lintrun.NewSink()
	defer sink.Close()
	counts := map[string]int{}
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		exs := extract(t, page, src)
		ctx := pageContext(t, page, exs)
		for _, ex := range exs {
			counts[ex.form]++
			if ex.refuses != "" {
				counts["refused"]++
			}
			name := fmt.Sprintf("%s:%d %s", filepath.Base(page), ex.line, ex.form)
			t.Run(name, func(t *testing.T) {
				contract, opts := wrap(t, ex, ctx)
				_, ds := contracts.Parse("example.md", []byte(contract), opts)
				if ex.refuses != "" {
					if !ds.HasErrors() || !strings.Contains(ds.String(), ex.refuses) {
						t.Fatalf("a bad example must be refused with %q; lint said:\n%s\nfor:\n%s", ex.refuses, ds, contract)
					}
					return
				}
				if ds.HasErrors() {
					t.Fatalf("lint refused the example:\n%s\nas wrapped:\n%s", ds, numbered(contract))
				}
				if ex.warns != "" {
					if !strings.Contains(ds.String(), ex.warns) {
						t.Fatalf("the example must be warned about with %q; lint said:\n%s\nfor:\n%s", ex.warns, ds, numbered(contract))
					}
				} else if w := warnings(ds, ex.form); len(w) > 0 {
					// The docs' examples lint clean under --strict.
					t.Fatalf("lint warned about the example (lint --strict would refuse it):\n%s\nas wrapped:\n%s", w, numbered(contract))
				}
				if ex.form == formComplete {
					runComplete(t, ex, sink)
				}
			})
		}
	}
	// The pages do hold examples of every form; a test that found none
	// would pass for nothing.
	for _, form := range []string{formComplete, formInventory, formFront, formBody, formTarget, "refused"} {
		if counts[form] == 0 {
			t.Errorf("no %s found in %v", form, pages)
		}
	}
	t.Logf("examples by form: %v", counts)
}

// warnings are the warnings lint --strict would refuse an example for. A
// fragment is linted inside a contract it did not write: the steps its
// table or conditions would judge or read may be the wrapper's, so what
// that leaves unjudged or unchecked is the wrapper's, not the page's.
func warnings(ds contracts.Diagnostics, form string) contracts.Diagnostics {
	var out contracts.Diagnostics
	for _, d := range ds.Problems() {
		if d.Severity != contracts.DiagWarning {
			continue
		}
		if form != formComplete && (strings.Contains(d.Msg, ": nothing judges it:") || strings.Contains(d.Msg, "whose fields are not declared") ||
			strings.Contains(d.Msg, "is filled by nothing")) {
			continue
		}
		out = append(out, d)
	}
	return out
}

var mdParser = goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()

// frontMatterKeys are the keys a yaml block must have to be a front-matter
// fragment; contracts.Parse is the judge of whether they are valid.
var frontMatterKeys = map[string]bool{
	"kind": true, "name": true, "title": true, "description": true, "version": true, "runtime_contract": true,
	"agent": true, "report_only_agents": true, "schedule": true, "commands": true, "guards": true, "targets": true,
	"notify": true, "vars": true, "secrets": true, "for_each": true, "alert_on": true, "log": true, "messages": true,
	"depends_on": true, "maintenance": true,
}

var inventoryComment = regexp.MustCompile(`^#\s*\S+\.ya?ml\s*$`)

// inlineTarget is an inline code span that is one target: a flow mapping
// with a transport key.
var inlineTarget = regexp.MustCompile(`^\{.*\b(ssh|pct|docker|local):.*\}$`)

// extract returns the page's examples in order.
func extract(t *testing.T, page string, src []byte) []example {
	doc := mdParser.Parse(text.NewReader(src))
	var out []example
	lineOf := func(off int) int { return bytes.Count(src[:off], []byte("\n")) + 1 }
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch b := n.(type) {
		case *ast.FencedCodeBlock:
			lang := ""
			if b.Info != nil {
				lang = strings.Fields(string(b.Info.Segment.Value(src)) + " x")[0]
			}
			var body bytes.Buffer
			for i := 0; i < b.Lines().Len(); i++ {
				seg := b.Lines().At(i)
				body.Write(seg.Value(src))
			}
			line := lineOf(b.Lines().At(0).Start) - 1
			ex := example{page: page, line: line, src: body.String(), refuses: said(b, src, "Lint refuses this:"), warns: said(b, src, "Lint warns about this:")}
			ex.form = classify(lang, ex.src)
			if ex.form != "" {
				out = append(out, ex)
			}
			return ast.WalkSkipChildren, nil
		case *ast.CodeSpan:
			if filepath.Base(page) != "transports.md" {
				return ast.WalkContinue, nil
			}
			var s strings.Builder
			for c := b.FirstChild(); c != nil; c = c.NextSibling() {
				if tx, ok := c.(*ast.Text); ok {
					s.Write(tx.Segment.Value(src))
				}
			}
			if inlineTarget.MatchString(s.String()) {
				seg := b.FirstChild().(*ast.Text).Segment
				out = append(out, example{page: page, line: lineOf(seg.Start), src: s.String(), form: formTarget})
			}
		}
		return ast.WalkContinue, nil
	})
	return out
}

// said returns what lint documentedly says of an example: the backticked
// text of a paragraph right after the block that starts with lead ("Lint
// refuses this:", "Lint warns about this:").
func said(b ast.Node, src []byte, lead string) string {
	p, ok := b.NextSibling().(*ast.Paragraph)
	if !ok || p.Lines().Len() == 0 {
		return ""
	}
	var s strings.Builder
	for i := 0; i < p.Lines().Len(); i++ {
		seg := p.Lines().At(i)
		s.Write(seg.Value(src))
	}
	rest, ok := strings.CutPrefix(s.String(), lead)
	if !ok {
		return ""
	}
	rest = strings.ReplaceAll(strings.TrimSpace(rest), "\n", " ")
	if r, ok := strings.CutPrefix(rest, "``"); ok {
		// A double-backtick span holds an error with backticks in it.
		quoted, _, _ := strings.Cut(r, "``")
		return strings.TrimSuffix(strings.TrimPrefix(quoted, " "), " ")
	}
	_, quoted, _ := strings.Cut(rest, "`")
	quoted, _, _ = strings.Cut(quoted, "`")
	return quoted
}

func classify(lang, src string) string {
	switch lang {
	case "yaml":
		first, _, _ := strings.Cut(src, "\n")
		switch {
		case strings.TrimSpace(first) == "---":
			// A whole front matter: a contract with no body, which a
			// yaml block cannot hold; linted with the page's stages.
			return formFront
		case inventoryComment.MatchString(first):
			return formInventory
		}
		var m yaml.MapSlice
		if err := yaml.Unmarshal([]byte(src), &m); err != nil || len(m) == 0 {
			return formFront // let lint say what is wrong with it
		}
		for _, kv := range m {
			if !frontMatterKeys[fmt.Sprint(kv.Key)] {
				return "" // not a contract: a Prometheus config
			}
		}
		return formFront
	case "markdown":
		if strings.HasPrefix(src, "---\n") {
			return formComplete
		}
		return formBody
	}
	return ""
}

// pageCtx is what fragments of a page are wrapped in: the merged front
// matter of the page's front-matter examples.
type pageCtx struct {
	front string // YAML, without the --- lines
	// stages make the agents report_only_agents names, which lint
	// requires of a contract: a stage each.
	stages string
}

// pageContext merges every front-matter example of the page (complete
// contracts' front matter included), later keys inside earlier maps, lists
// of notify routes and secrets concatenated, and checks the result loads.
func pageContext(t *testing.T, page string, exs []example) pageCtx {
	merged := map[string]any{"name": "example", "runtime_contract": 2}
	for _, ex := range exs {
		var fm string
		switch {
		case ex.form == formFront && ex.refuses == "":
			fm = strings.TrimSuffix(strings.TrimPrefix(ex.src, "---\n"), "---\n")
		case ex.form == formComplete:
			fm = strings.SplitN(strings.TrimPrefix(ex.src, "---\n"), "\n---", 2)[0]
		default:
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(fm), &m); err != nil {
			continue // the example's own test reports it
		}
		for k, v := range m {
			switch k {
			case "name", "runtime_contract", "log":
				continue
			}
			merged[k] = mergeValue(k, merged[k], v)
		}
	}
	out, err := yaml.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	ctx := pageCtx{front: string(out)}
	// The agents report_only_agents and maintenance windows name.
	agents, _ := merged["report_only_agents"].([]any)
	if ws, ok := merged["maintenance"].([]any); ok {
		for _, w := range ws {
			if wm, ok := w.(map[string]any); ok {
				as, _ := wm["agents"].([]any)
				agents = append(agents, as...)
			}
		}
	}
	seen := map[string]bool{}
	for i, a := range agents {
		if name := fmt.Sprint(a); !seen[name] {
			seen[name] = true
			ctx.stages += fmt.Sprintf("\n\n### Agent %v {#ro%d agent=%v}\n\n```bash {id=ro%d}\necho ok\n```\n\nExpected: `ok`\n", a, i, a, i)
		}
	}
	if _, ds := contracts.Parse(page+" (context)", []byte("---\n"+ctx.front+"---\n\n## Execution"+ctx.stages), contracts.Options{}); ds.HasErrors() {
		t.Fatalf("%s: the page's front-matter examples do not make one contract:\n%s\n%s", page, ds, ctx.front)
	}
	return ctx
}

func mergeValue(key string, a, b any) any {
	switch bv := b.(type) {
	case map[string]any:
		am, ok := a.(map[string]any)
		if !ok {
			return bv
		}
		for k, v := range bv {
			am[k] = mergeValue(k, am[k], v)
		}
		return am
	case []any:
		if al, ok := a.([]any); ok && (key == "notify" || key == "secrets") {
			for _, v := range bv {
				if !containsValue(al, v) {
					al = append(al, v)
				}
			}
			return al
		}
	}
	return b
}

func containsValue(list []any, v any) bool {
	for _, x := range list {
		if fmt.Sprint(x) == fmt.Sprint(v) {
			return true
		}
	}
	return false
}

var undefinedName = regexp.MustCompile(`undefined (variable|step) (\w+)`)

// wrap makes the contract an example is linted as, and the options (an
// inventory) it is loaded with.
func wrap(t *testing.T, ex example, ctx pageCtx) (string, contracts.Options) {
	switch ex.form {
	case formComplete:
		return ex.src, contracts.Options{}
	case formInventory:
		inv := filepath.Join(t.TempDir(), "inventory.yaml")
		if err := os.WriteFile(inv, []byte(ex.src), 0o600); err != nil {
			t.Fatal(err)
		}
		return "---\n" + ctx.front + "---\n\n## Execution" + ctx.stages, contracts.Options{Inventory: inv}
	case formFront:
		fm := strings.TrimSuffix(strings.TrimPrefix(ex.src, "---\n"), "---\n")
		if !regexp.MustCompile(`(?m)^name:`).MatchString(fm) {
			fm = "name: example\n" + fm
		}
		if !regexp.MustCompile(`(?m)^runtime_contract:`).MatchString(fm) {
			fm = "runtime_contract: 2\n" + fm
		}
		return "---\n" + fm + "---\n\n## Execution" + ctx.stages, contracts.Options{}
	case formTarget:
		fm := "---\nname: example\nruntime_contract: 2\ntargets:\n  t: " + ex.src + "\n"
		if m := regexp.MustCompile(`via: (\w[\w-]*)`).FindStringSubmatch(ex.src); m != nil {
			fm += "  " + m[1] + ": {ssh: root@" + m[1] + "}\n"
		}
		return fm + "---\n", contracts.Options{}
	}
	// A body fragment, in the page's context; a name the rest of a real
	// contract would define is supplied, once, and logged.
	body := ex.src
	if strings.HasPrefix(body, "| Key | Value |") {
		// A per-agent Key | Value table follows the per-agent schema's
		// JSON example, whose keys are the table's keys.
		var keys []string
		for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(body, -1) {
			keys = append(keys, fmt.Sprintf("%q: null", m[1]))
		}
		body = "## Maintains\n\n- agents: map of per-agent snapshots\n\n### Per-Agent Snapshot Schema\n\n```json\n{\"example\": {" +
			strings.Join(keys, ", ") + "}}\n```\n\n" + body
	}
	maintains := strings.HasPrefix(body, "## Maintains")
	if !maintains && !regexp.MustCompile(`(?m)^### .*\{#`).MatchString(body) {
		body = "### Example {#example}\n\n```bash {id=probe as=json}\necho '{}'\n```\n\n" + body
	}
	contract := "---\n" + ctx.front + "---\n\n"
	if maintains {
		contract += body + "\n\n## Execution" + ctx.stages
	} else {
		contract += "## Execution\n\n" + body + ctx.stages
	}
	_, ds := contracts.Parse("example.md", []byte(contract), contracts.Options{})
	var steps, fields []string
	for _, d := range ds.Errors() {
		m := undefinedName.FindStringSubmatch(d.Msg)
		switch {
		case m == nil:
		case m[1] == "step":
			steps = appendNew(steps, m[2])
		default:
			fields = appendNew(fields, m[2])
		}
	}
	if len(steps)+len(fields) == 0 {
		return contract, contracts.Options{}
	}
	t.Logf("supplied for the fragment: steps %v, fields %v", steps, fields)
	var sup strings.Builder
	sup.WriteString("\n\n### Supplied {#supplied agent=example}\n\n")
	for _, s := range steps {
		fmt.Fprintf(&sup, "```bash {id=%s as=json}\necho '{}'\n```\n\n", s)
	}
	sup.WriteString("```bash {id=supplied_fields as=json}\necho '{}'\n```\n\n| Field | Healthy |\n|---|---|\n")
	for _, f := range fields {
		fmt.Fprintf(&sup, "| `%s` | non-null |\n", f)
	}
	if len(fields) == 0 {
		sup.WriteString("| `stdout` | non-null |\n")
	}
	return contract + sup.String(), contracts.Options{}
}

func appendNew(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

// runComplete runs a complete example once on this host (every target is
// reached here once its transport spec is built, see lintrun) with the
// documented substitutions that make it local: every var holding an http
// or https URL points at a loopback server (path kept), every var holding
// a loopback host:port at that server's address, every path under
// /var/log/contractd/ into a temporary directory, every secret and *_env
// option set. The run must meet no configuration error, and no stage may
// end unknown, unreachable or skipped: each of those says the example
// cannot be evaluated as written.
func runComplete(t *testing.T, ex example, sink *lintrun.Sink) {
	dir := t.TempDir()
	src := strings.ReplaceAll(ex.src, "/var/log/contractd/", dir+"/")
	c, ds := contracts.Parse("example.md", []byte(src), contracts.Options{})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	vars := lintrun.LocalVars(c, sink.URL)
	c, ds = contracts.Parse("example.md", []byte(src), contracts.Options{Vars: vars})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	secrets := map[string]string{}
	for _, s := range c.Secrets {
		secrets[s] = "example-secret"
	}
	for _, r := range c.Notify {
		switch o := r.Options.(type) {
		case *contracts.WebhookOptions:
			secrets[o.BearerEnv] = "example-token"
		case *contracts.ZulipOptions:
			secrets[o.BotEmailEnv], secrets[o.APIKeyEnv] = "bot@example.test", "example-key"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := lintrun.Run(ctx, c, lintrun.Options{StateDir: filepath.Join(dir, "state"), Secrets: secrets})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(res.ConfigErrors) > 0 {
		t.Fatalf("the run met configuration errors:\n  %s", strings.Join(res.ConfigErrors, "\n  "))
	}
	var bad []string
	for _, st := range res.Report.Stages {
		switch st.Severity {
		case contracts.SeverityUnknown, contracts.SeverityUnreachable, contracts.SeveritySkipped:
			bad = append(bad, st.ID)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("stages %v could not be evaluated:\n%s", bad, strings.Join(lintrun.Unhealthy(res.Report), "\n"))
	}
	var ids []string
	for _, st := range res.Report.Stages {
		ids = append(ids, st.ID+"="+st.Severity.String())
	}
	sort.Strings(ids)
	t.Logf("ran: %v; the loopback server saw %v", ids, sink.Paths())
}

func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}
