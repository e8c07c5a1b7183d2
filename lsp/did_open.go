package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// didOpen reads the document as lint would and publishes its diagnostics.
func didOpen(ctx context.Context, s *Server, p *protocol.DidOpenTextDocumentParams) (any, error) {
	d := newDocument(p.TextDocument.URI, p.TextDocument.Version, p.TextDocument.Text, s.opts)
	s.mu.Lock()
	s.docs[d.uri] = d
	s.mu.Unlock()
	s.publish(ctx, d)
	return nil, nil
}
