package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// initialize says what the server does: full-text sync (the documents are
// small, and a whole text keeps no state per keystroke), diagnostics,
// hover, completion, definition and quick fixes.
func initialize(ctx context.Context, s *Server, p *protocol.InitializeParams) (any, error) {
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			TextDocumentSync: &protocol.TextDocumentSyncOptions{
				OpenClose: true,
				Change:    protocol.TextDocumentSyncKindFull,
			},
			HoverProvider:      true,
			DefinitionProvider: true,
			CompletionProvider: &protocol.CompletionOptions{TriggerCharacters: []string{".", "=", "{", "$"}},
			CodeActionProvider: &protocol.CodeActionOptions{CodeActionKinds: []protocol.CodeActionKind{protocol.QuickFix}},
		},
		ServerInfo: &protocol.ServerInfo{Name: "contractd", Version: s.version},
	}, nil
}
