package lsp

import (
	"context"
	"fmt"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// didChange replaces the document's text with the last full text sent
// (the server asks for full sync) and publishes its diagnostics afresh:
// nothing of the text before is kept.
func didChange(ctx context.Context, s *Server, p *protocol.DidChangeTextDocumentParams) (any, error) {
	if len(p.ContentChanges) == 0 {
		return nil, nil
	}
	if s.doc(p.TextDocument.URI) == nil {
		return nil, fmt.Errorf("%w: %s is not open", jsonrpc2.ErrInvalidParams, p.TextDocument.URI)
	}
	text := p.ContentChanges[len(p.ContentChanges)-1].Text
	s.put(ctx, newDocument(p.TextDocument.URI, p.TextDocument.Version, text, s.opts))
	return nil, nil
}
