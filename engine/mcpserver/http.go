package mcpserver

import (
	"context"
	"fmt"
	"net/http"

	"github.com/contractd/contractd/contracts"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// remoteKey is where a token's TokenInfo keeps the caller's address.
const remoteKey = "remote_addr"

// HTTPHandler serves srv over MCP's streamable HTTP transport, behind the
// bearer token that check accepts (serve's CheckToken: the --token-file
// token): a request without it, or with another, is refused with 401
// before any tool sees it. It runs stateless, so the newest protocol
// revision works and no session outlives its request; a request body over
// the transport's limit is refused by the transport, and the tools refuse
// drafts over the contract size cap (maxDraft) well below that limit, as
// an error result rather than a dropped session.
func HTTPHandler(srv *mcp.Server, check func(token string) error, maxDraft int64) http.Handler {
	if maxDraft <= 0 {
		maxDraft = contracts.DefaultMaxFileSize
	}
	// test_draft carries two texts; JSON escaping can double a text.
	limit := max(mcp.DefaultMaxRequestBodyBytes, 4*maxDraft+64<<10)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, MaxRequestBodyBytes: limit,
	})
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if err := check(token); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		// A static token carries no expiry: AllowMissingExpiration below.
		return &auth.TokenInfo{UserID: "api-token", Extra: map[string]any{remoteKey: r.RemoteAddr}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}
