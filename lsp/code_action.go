package lsp

import (
	"context"
	"fmt"

	"go.lsp.dev/protocol"
)

// codeAction offers, for each diagnostic on the lines asked about whose
// message suggests a word (lint's did-you-mean), the quick fix that
// writes it: the diagnostic's Suggestion, kept by the server with the
// document, so it does not depend on what the client sends back.
func codeAction(ctx context.Context, s *Server, p *protocol.CodeActionParams) (any, error) {
	d := s.doc(p.TextDocument.URI)
	if d == nil {
		return nil, nil
	}
	actions := []protocol.CodeAction{}
	for _, diag := range d.diags {
		if diag.Suggestion == nil || diag.Pos.File != d.path {
			continue
		}
		line := uint32(diag.Pos.Line - 1)
		if line < p.Range.Start.Line || line > p.Range.End.Line {
			continue
		}
		r, ok := d.suggestionRange(diag)
		if !ok {
			continue
		}
		actions = append(actions, protocol.CodeAction{
			Title:       fmt.Sprintf("Change %q to %q", diag.Suggestion.Wrong, diag.Suggestion.Right),
			Kind:        protocol.QuickFix,
			Diagnostics: []protocol.Diagnostic{d.protocolDiagnostic(diag)},
			IsPreferred: true,
			Edit: &protocol.WorkspaceEdit{Changes: map[protocol.DocumentURI][]protocol.TextEdit{
				d.uri: {{Range: r, NewText: diag.Suggestion.Right}},
			}},
		})
	}
	return actions, nil
}
