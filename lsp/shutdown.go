package lsp

import (
	"context"
	"encoding/json"
)

// shutdown stops answering anything but exit, and forgets the open
// documents.
func shutdown(ctx context.Context, s *Server, _ json.RawMessage) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown = true
	s.docs = nil
	return nil, nil
}
