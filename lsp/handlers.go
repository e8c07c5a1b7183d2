package lsp

import (
	"context"
	"encoding/json"
	"fmt"

	"go.lsp.dev/jsonrpc2"
)

// handler answers one method: params as sent, the result to reply with
// (nil for a notification).
type handler func(ctx context.Context, s *Server, params json.RawMessage) (any, error)

// handlers are the methods the server answers, one file each.
var handlers = map[string]handler{
	"initialize":              typed(initialize),
	"initialized":             typed(initialized),
	"shutdown":                shutdown,
	"exit":                    exit,
	"textDocument/didOpen":    typed(didOpen),
	"textDocument/didChange":  typed(didChange),
	"textDocument/didClose":   typed(didClose),
	"textDocument/didSave":    typed(didSave),
	"textDocument/hover":      typed(hover),
	"textDocument/completion": typed(completion),
	"textDocument/definition": typed(definition),
	"textDocument/codeAction": typed(codeAction),
}

// typed decodes a method's params into P for f.
func typed[P any](f func(ctx context.Context, s *Server, p *P) (any, error)) handler {
	return func(ctx context.Context, s *Server, raw json.RawMessage) (any, error) {
		p := new(P)
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, p); err != nil {
				return nil, fmt.Errorf("%w: %v", jsonrpc2.ErrInvalidParams, err)
			}
		}
		return f(ctx, s, p)
	}
}
