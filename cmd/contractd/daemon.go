package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/serve"
)

// A declared command (`contractd zulip-status`) and `contractd run NAME` ask
// a running local daemon first: it runs the contract now through its warm
// connections and resident sessions, and its report is printed exactly as a
// one-shot run's would be. When no daemon answers, or it does not serve
// the contract, the command runs one-shot as it always did.

// daemonFlags choose how the CLI reaches a daemon.
type daemonFlags struct {
	oneShot   bool
	addr      string
	tokenFile string
}

func (d *daemonFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&d.oneShot, "one-shot", false, "run here even when a daemon serves the contract")
	fs.StringVar(&d.addr, "daemon", getenv("CONTRACTD_DAEMON"), "ask the daemon at this HTTP `ADDR` (its --listen) first; the daemon's socket in --state-dir is always tried")
	fs.StringVar(&d.tokenFile, "token-file", getenv("CONTRACTD_TOKEN_FILE"), "bearer token `FILE` for --daemon")
}

// runChanging lists the flags whose run a daemon cannot make: it runs its
// own contract with its own inventory, state and guards, and it repairs
// (a --nagios check does not).
var runChanging = []string{"dry-run", "inventory", "var", "verify-grace", "parallel", "nagios"}

// daemonAnswer is what asking the daemon came to.
type daemonAnswer int

const (
	daemonNone   daemonAnswer = iota // nobody answered, or not for this contract: run here
	daemonReport                     // a report to print
	daemonFailed                     // the daemon's engine failed (a report may come with it)
)

// askDaemon asks the daemon to run path ("/commands/NAME/run" or
// "/contracts/NAME/run") now. It tries --daemon first, then the socket in
// the state dir, and retries a run that overlaps another for up to
// --lock-wait. It returns daemonNone, with the reason logged, whenever the
// command should run one-shot instead.
func (m *Main) askDaemon(ctx context.Context, fs *flag.FlagSet, rf runFlags, path string) (daemonAnswer, *engine.Report, string) {
	if rf.daemon.oneShot {
		return daemonNone, nil, ""
	}
	changed := ""
	fs.Visit(func(f *flag.Flag) {
		for _, n := range runChanging {
			if f.Name == n {
				changed = f.Name
			}
		}
	})
	if changed != "" {
		return daemonNone, nil, ""
	}
	type endpoint struct {
		where  string
		base   string
		client *http.Client
		token  string
	}
	var eps []endpoint
	if rf.daemon.addr != "" {
		base := rf.daemon.addr
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		tok := ""
		if rf.daemon.tokenFile != "" {
			b, err := os.ReadFile(rf.daemon.tokenFile)
			if err != nil {
				m.logInfo(rf, "token file unreadable; asking the daemon without a token", "error", err)
			}
			tok = strings.TrimSpace(string(b))
		}
		eps = append(eps, endpoint{where: base, base: base, client: &http.Client{}, token: tok})
	}
	sock := serve.SocketPath(rf.stateDir)
	if fi, err := os.Stat(sock); err == nil && fi.Mode().Type() == os.ModeSocket {
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
		eps = append(eps, endpoint{where: sock, base: "http://contractd", client: &http.Client{Transport: &http.Transport{DialContext: dial}}})
	}
	ctx, cancel := context.WithTimeout(ctx, rf.timeout)
	defer cancel()
	for _, ep := range eps {
		deadline := time.Now().Add(rf.lockWait)
		for {
			ans, rep, msg, retry := m.post(ctx, ep.client, ep.base+path, ep.token)
			if ans != daemonNone {
				m.logInfo(rf, "answered by the daemon", "daemon", ep.where)
				return ans, rep, msg
			}
			if retry && time.Now().Before(deadline) {
				select {
				case <-time.After(100 * time.Millisecond):
					continue
				case <-ctx.Done():
				}
			}
			if msg != "" {
				m.logInfo(rf, "the daemon did not run it; running here", "daemon", ep.where, "reason", msg)
			}
			break
		}
	}
	return daemonNone, nil, ""
}

// post makes one on-demand request. retry is set when a run of the contract
// was already going; msg says why a request got no report.
func (m *Main) post(ctx context.Context, c *http.Client, u, token string) (ans daemonAnswer, rep *engine.Report, msg string, retry bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return daemonNone, nil, err.Error(), false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ctx.Err() == nil {
			// No daemon listens (refused, no such socket): not worth a word.
			return daemonNone, nil, "", false
		}
		return daemonNone, nil, err.Error(), false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return daemonNone, nil, err.Error(), false
	}
	var apiErr struct {
		Error  string         `json:"error"`
		Report *engine.Report `json:"report"`
	}
	switch resp.StatusCode {
	case http.StatusOK:
		rep = &engine.Report{}
		if err := json.Unmarshal(body, rep); err != nil {
			return daemonNone, nil, "unreadable report: " + err.Error(), false
		}
		return daemonReport, rep, "", false
	case http.StatusNotFound:
		return daemonNone, nil, "", false // it does not serve this contract
	}
	if err := json.Unmarshal(body, &apiErr); err != nil {
		apiErr.Error = strings.TrimSpace(string(bytes.ToValidUTF8(body[:min(len(body), 200)], nil)))
	}
	switch resp.StatusCode {
	case http.StatusConflict:
		return daemonNone, nil, apiErr.Error, true
	case http.StatusInternalServerError:
		return daemonFailed, apiErr.Report, apiErr.Error, false
	}
	return daemonNone, nil, fmt.Sprintf("%s: %s", resp.Status, apiErr.Error), false
}

// logInfo logs a record at info, as a run's are, unless --quiet.
func (m *Main) logInfo(rf runFlags, msg string, args ...any) {
	if !rf.quiet {
		m.logger(rf.log).Info(msg, args...)
	}
}
