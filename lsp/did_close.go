package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// didClose forgets the document and clears its diagnostics.
func didClose(ctx context.Context, s *Server, p *protocol.DidCloseTextDocumentParams) (any, error) {
	s.mu.Lock()
	delete(s.docs, p.TextDocument.URI)
	s.mu.Unlock()
	s.notify(ctx, "textDocument/publishDiagnostics", &protocol.PublishDiagnosticsParams{URI: p.TextDocument.URI, Diagnostics: []protocol.Diagnostic{}})
	return nil, nil
}
