package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// didOpen reads the document as lint would and publishes its diagnostics.
func didOpen(ctx context.Context, s *Server, p *protocol.DidOpenTextDocumentParams) (any, error) {
	s.put(ctx, newDocument(p.TextDocument.URI, p.TextDocument.Version, p.TextDocument.Text, s.opts))
	return nil, nil
}

// put keeps d as the open document at its URI, in place of any before,
// and publishes its diagnostics.
func (s *Server) put(ctx context.Context, d *document) {
	s.mu.Lock()
	s.docs[d.uri] = d
	s.mu.Unlock()
	s.publish(ctx, d)
}
