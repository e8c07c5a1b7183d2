package lsp

import (
	"context"
	"fmt"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/contractd/contractd/contracts"
)

// hover answers with what explain says of the line (a stage, step, health
// row, action row with the guards in force on it, escalation row, target
// or route: contracts.ExplainAt), with a front-matter key's doc and the
// setting in force, or with what a step's value, a var or a step id is.
// Nothing is an empty answer.
func hover(ctx context.Context, s *Server, p *protocol.HoverParams) (any, error) {
	d := s.doc(p.TextDocument.URI)
	if d == nil || d.kind != contractDoc {
		return nil, nil
	}
	pl := placeAt(d, p.Position)
	text := hoverText(pl)
	if text == "" {
		return nil, nil
	}
	r := d.rangeAt(pl.line, pl.start)
	return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: text}, Range: &r}, nil
}

func hoverText(pl *place) string {
	c := pl.d.draft
	if pl.front {
		var parts []string
		path := pl.keys
		if pl.onKey && pl.word != "" {
			path = append(append([]string{}, pl.keys...), pl.word)
		}
		if k, ok := frontKey(path); ok && len(path) > 0 {
			parts = append(parts, keyDoc(path, k))
		}
		if c != nil {
			if len(path) > 0 {
				if e := contracts.ExplainKey(c, path[0]); e != "" {
					parts = append(parts, block(e))
				}
			}
			if e := contracts.ExplainAt(c, pl.line+1); e != "" {
				parts = append(parts, block(e))
			}
		}
		return strings.Join(parts, "\n\n")
	}
	if c == nil {
		return ""
	}
	if pl.inRef || strings.HasPrefix(pl.text[pl.start:], pl.word+"}") && strings.HasSuffix(pl.text[:pl.start], "${") {
		if v, ok := c.Vars[pl.word]; ok {
			return fmt.Sprintf("var **%s** = `%s`", pl.word, v)
		}
	}
	if e := contracts.ExplainAt(c, pl.line+1); e != "" {
		if doc := valueDoc(pl); doc != "" {
			return doc + "\n\n" + block(e)
		}
		return block(e)
	}
	return valueDoc(pl)
}

// valueDoc says what the word at the cursor is, when it is a value a step
// of the stage produces (`stdout`: standard output, …), a step's id or a
// var read as vars.NAME.
func valueDoc(pl *place) string {
	if pl.stage == nil || pl.word == "" {
		return ""
	}
	head, rest, dotted := strings.Cut(pl.word, ".")
	if head == "vars" && dotted {
		if v, ok := pl.d.draft.Vars[rest]; ok {
			return fmt.Sprintf("var **%s** = `%s`", rest, v)
		}
	}
	for _, st := range pl.visibleSteps() {
		if st.ID == head {
			if !dotted {
				return fmt.Sprintf("step **%s** (%s), line %d", st.ID, st.Kind, st.Pos.Line)
			}
			for _, v := range st.Values() {
				if v.Name == rest {
					return fmt.Sprintf("**%s.%s** (%s): %s", st.ID, v.Name, v.Type, v.Doc)
				}
			}
		}
	}
	if pl.step != nil {
		for _, v := range pl.step.Values() {
			if v.Name == pl.word {
				doc := v.Doc
				if doc == "" {
					doc = "a field of its JSON output"
				}
				return fmt.Sprintf("**%s** (%s) of step %s: %s", v.Name, v.Type, pl.step.ID, doc)
			}
		}
	}
	return ""
}

// visibleSteps are the steps an expression at the cursor may read by id:
// those of its stage (lint says which are seen where).
func (pl *place) visibleSteps() []*contracts.Step {
	if pl.stage == nil {
		return nil
	}
	return pl.stage.Steps
}

func block(s string) string { return "```text\n" + strings.TrimRight(s, "\n") + "\n```" }
