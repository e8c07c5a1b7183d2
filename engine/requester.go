package engine

import "context"

type requesterKey struct{}

// WithRequester returns ctx carrying who asks for a run (an MCP client:
// "mcp claude-code 1.2 (stdio)"). A run under it records the name in its
// report and history record (RequestedBy) and in its log records, so
// `history` and `why` say who asked for it.
func WithRequester(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, requesterKey{}, who)
}

// Requester returns who asked for the run ctx is for, "" when no caller
// named itself (a scheduled run, the CLI).
func Requester(ctx context.Context) string {
	who, _ := ctx.Value(requesterKey{}).(string)
	return who
}
