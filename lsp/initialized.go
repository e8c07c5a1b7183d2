package lsp

import (
	"context"

	"go.lsp.dev/protocol"
)

// initialized needs nothing: the server has said what it does.
func initialized(ctx context.Context, s *Server, p *protocol.InitializedParams) (any, error) {
	return nil, nil
}
