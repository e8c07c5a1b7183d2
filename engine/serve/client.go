package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/contractd/contractd/engine"
)

// Client asks a running daemon, over its HTTP API (Handler), to run a
// contract now: the CLI's `contractd NAME` and `contractd run NAME` ask it
// first, so a run goes through the daemon's warm connections and resident
// sessions.
type Client struct {
	// Where names the daemon in messages: its address or its socket.
	Where string
	base  string // the API's URL, without a trailing slash
	http  *http.Client
	token string
}

// NewClient returns a client of the daemon whose --listen is addr
// ("127.0.0.1:7070", or a URL), sending token as the bearer token when it
// is not "".
func NewClient(addr, token string) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{Where: base, base: base, http: &http.Client{}, token: token}
}

// SocketClient returns a client of the daemon serving its API on the unix
// socket of stateDir (SocketPath), or nil when there is no such socket.
// The socket needs no token: the daemon trusts its own user there.
func SocketClient(stateDir string) *Client {
	sock := SocketPath(stateDir)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
	return &Client{Where: sock, base: "http://contractd", http: &http.Client{Transport: &http.Transport{DialContext: dial}}}
}

// Answer is what asking a daemon to run came to.
type Answer int

const (
	NotRun    Answer = iota // nobody answered, or not for this contract: run here
	Ran                     // the daemon ran it: a report to print
	RunFailed               // the daemon's engine failed (a report may come with it)
)

// RunAnswer is a daemon's answer to a request to run.
type RunAnswer struct {
	Answer Answer
	Report *engine.Report
	// Msg says why the daemon did not run it, or how its run failed; ""
	// when no daemon listens or it does not serve the contract.
	Msg string
}

// busyPoll is how often Run asks again while a run of the contract is
// already going.
const busyPoll = 100 * time.Millisecond

// RunRequest names what a daemon is asked to run: the contract Contract
// (POST /contracts/NAME/run), or the contract that declares Command (POST
// /commands/COMMAND/run).
type RunRequest struct {
	Contract string
	Command  string
	// By names who asks, when a caller named itself (an MCP client); the
	// daemon records it with the run (RequestedByHeader).
	By string
}

// RequestedByHeader carries RunRequest.By to the daemon, which trusts it
// only from a request its token or socket admitted.
const RequestedByHeader = "Contractd-Requested-By"

func (r RunRequest) path() string {
	if r.Command != "" {
		return "/commands/" + url.PathEscape(r.Command) + "/run"
	}
	return "/contracts/" + url.PathEscape(r.Contract) + "/run"
}

// Run asks the daemon to run what req names now. While a run of the
// contract is already going, it asks again until wait has passed. It never
// returns an error: whatever keeps the daemon from running it is an answer
// of NotRun, with Msg saying why.
func (c *Client) Run(ctx context.Context, req RunRequest, wait time.Duration) RunAnswer {
	path := req.path()
	deadline := time.Now().Add(wait)
	for {
		ans, busy := c.post(ctx, path, req.By)
		if ans.Answer != NotRun || !busy || !time.Now().Before(deadline) {
			return ans
		}
		select {
		case <-time.After(busyPoll):
		case <-ctx.Done():
			return ans
		}
	}
}

// post makes one request. busy is set when a run of the contract was
// already going (409 Conflict).
func (c *Client) post(ctx context.Context, path, by string) (ans RunAnswer, busy bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, nil)
	if err != nil {
		return RunAnswer{Msg: err.Error()}, false
	}
	if by != "" {
		req.Header.Set(RequestedByHeader, by)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ctx.Err() == nil {
			// No daemon listens (refused, no such socket): not worth a word.
			return RunAnswer{}, false
		}
		return RunAnswer{Msg: err.Error()}, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return RunAnswer{Msg: err.Error()}, false
	}
	switch resp.StatusCode {
	case http.StatusOK:
		rep := &engine.Report{}
		if err := json.Unmarshal(body, rep); err != nil {
			return RunAnswer{Msg: "unreadable report: " + err.Error()}, false
		}
		return RunAnswer{Answer: Ran, Report: rep}, false
	case http.StatusNotFound:
		return RunAnswer{}, false // it does not serve this contract
	}
	var apiErr apiError
	if err := json.Unmarshal(body, &apiErr); err != nil {
		apiErr.Error = strings.TrimSpace(string(bytes.ToValidUTF8(body[:min(len(body), 200)], nil)))
	}
	switch resp.StatusCode {
	case http.StatusConflict:
		return RunAnswer{Msg: apiErr.Error}, true
	case http.StatusInternalServerError:
		return RunAnswer{Answer: RunFailed, Report: apiErr.Report, Msg: apiErr.Error}, false
	}
	return RunAnswer{Msg: fmt.Sprintf("%s: %s", resp.Status, apiErr.Error)}, false
}

// Health asks the daemon for GET /healthz. It fails when no daemon
// answers or the answer is not a health report; a stuck daemon's report
// (503) is returned, with Status "stuck".
func (c *Client) Health(ctx context.Context) (*Health, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var h Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil || h.Status == "" {
		return nil, fmt.Errorf("%s: GET /healthz: %s, not a health report", c.Where, resp.Status)
	}
	return &h, nil
}
