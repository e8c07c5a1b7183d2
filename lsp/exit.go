package lsp

import (
	"context"
	"encoding/json"
)

// exit ends Serve.
func exit(ctx context.Context, s *Server, _ json.RawMessage) (any, error) {
	s.exitOnce.Do(func() { close(s.exit) })
	return nil, nil
}
