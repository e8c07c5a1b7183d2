package contracts

import (
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// MessageData is what a message template sees: `{{.Unit}}`, `{{.Seen}}`,
// `{{.Command}}` and the rest. Templates come from an action row's Message
// column or the front matter's `messages:`; docs/contract-format.md
// ("Alerts") lists the fields.
type MessageData struct {
	Contract  string         // the contract's name
	Kind      string         // open, reminder, resolved, repair
	Agent     string         // the agent ("" for a gate or the whole contract)
	Unit      string         // the unit: the agent, the for_each item (lab[sol]), the gate, or "*"
	Condition string         // the condition as written in the table
	Severity  string         // the unit's severity the message carries
	Was       string         // the unit's severity before this run's repairs
	Seen      string         // the values the condition read, e.g. "response_pipeline=blocked"
	Findings  string         // what the unit's steps found, "; "-separated
	Values    map[string]any // the unit's step fields, by name and by step id
	Command   string         // the repair command, for repair messages
	Verify    string         // "remediated", "undecided", "remediation failed" or ""
	Grace     string         // how long the engine waited before verifying, e.g. "30s"
	Text      string         // the engine's own text for this message
}

// messageKinds are the kinds `messages:` may shape.
var messageKinds = []string{"open", "reminder", "resolved", "repair"}

// sampleMessage is what a template is tried on at load, so a misspelt field
// is a lint error with its position, not a message that fails at 3 a.m.
var sampleMessage = MessageData{
	Contract: "c", Kind: "repair", Agent: "a", Unit: "a", Condition: "x: y", Severity: "healthy", Was: "critical",
	Seen: "x=y", Findings: "x (y) → critical", Values: map[string]any{}, Command: "true", Verify: "remediated", Grace: "30s", Text: "t",
}

// parseMessage compiles a message template and tries it on sample data.
func parseMessage(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("message template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	if err := t.Execute(new(strings.Builder), sampleMessage); err != nil {
		return nil, fmt.Errorf("message template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	return t, nil
}

// Render executes a message template; it returns the engine's own text
// (data.Text) with the error when the template fails at run time.
func Render(t *template.Template, data MessageData) (string, error) {
	if t == nil {
		return data.Text, nil
	}
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return data.Text, err
	}
	return strings.TrimSpace(b.String()), nil
}

// readsOutcome reports whether t reads a repair's outcome: {{.Verify}}, or
// the engine's {{.Text}}, which says it. A repair template that reads
// neither is sent as written whether the repair helped or not, and lint
// says so in a note.
func readsOutcome(t *template.Template) bool {
	for _, tt := range t.Templates() {
		if tt.Tree != nil && readsField(tt.Tree.Root, "Verify", "Text") {
			return true
		}
	}
	return false
}

// readsField reports whether the parse tree under n reads one of the
// top-level fields names: `.Name`, `$.Name`, or a chain starting there.
func readsField(n parse.Node, names ...string) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if readsField(c, names...) {
				return true
			}
		}
	case *parse.ActionNode:
		return readsField(n.Pipe, names...)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if readsField(c, names...) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if readsField(a, names...) {
				return true
			}
		}
	case *parse.FieldNode:
		return len(n.Ident) > 0 && slices.Contains(names, n.Ident[0])
	case *parse.VariableNode:
		return len(n.Ident) > 1 && n.Ident[0] == "$" && slices.Contains(names, n.Ident[1])
	case *parse.ChainNode:
		return readsField(n.Node, names...)
	case *parse.IfNode:
		return readsField(n.Pipe, names...) || readsField(n.List, names...) || readsField(n.ElseList, names...)
	case *parse.RangeNode:
		return readsField(n.Pipe, names...) || readsField(n.List, names...) || readsField(n.ElseList, names...)
	case *parse.WithNode:
		return readsField(n.Pipe, names...) || readsField(n.List, names...) || readsField(n.ElseList, names...)
	case *parse.TemplateNode:
		return readsField(n.Pipe, names...)
	}
	return false
}

// outcomeNote is lint's note on a repair template that reads neither
// {{.Verify}} nor {{.Text}}.
const outcomeNote = "message template does not read {{.Verify}}: a repair that did not help is sent in these words too (say the outcome with {{.Verify}})"
