package main

import (
	"context"
	"flag"
	"os"
	"strings"

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

// clients are the daemons to ask, in order: the one at --daemon (with the
// token of --token-file; unreadable is told to unreadable and asks without
// one), then, with socket, the one whose socket is in stateDir. None with
// --one-shot.
func (d daemonFlags) clients(stateDir string, socket bool, unreadable func(error)) []*serve.Client {
	if d.oneShot {
		return nil
	}
	var out []*serve.Client
	if d.addr != "" {
		tok := ""
		if d.tokenFile != "" {
			b, err := os.ReadFile(d.tokenFile)
			if err != nil {
				unreadable(err)
			}
			tok = strings.TrimSpace(string(b))
		}
		out = append(out, serve.NewClient(d.addr, tok))
	}
	if socket {
		if c := serve.SocketClient(stateDir); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// runChanging lists the flags whose run a daemon cannot make: it runs its
// own contract with its own inventory, state and guards, and it repairs
// (a --nagios check does not).
var runChanging = []string{"dry-run", "inventory", "var", "verify-grace", "parallel", "nagios"}

// askDaemon asks the daemon to run what req names now. It tries --daemon
// first, then the socket in the state dir; a run that overlaps another is
// asked again for up to --lock-wait. It returns an answer of serve.NotRun, with
// the reason logged, whenever the command should run one-shot instead.
func (m *Main) askDaemon(ctx context.Context, fs *flag.FlagSet, rf runFlags, req serve.RunRequest) serve.RunAnswer {
	if rf.daemon.oneShot {
		return serve.RunAnswer{}
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
		return serve.RunAnswer{}
	}
	clients := rf.daemon.clients(rf.stateDir, true, func(err error) {
		m.logInfo(rf, "token file unreadable; asking the daemon without a token", "error", err)
	})
	ctx, cancel := context.WithTimeout(ctx, rf.timeout)
	defer cancel()
	for _, c := range clients {
		ans := c.Run(ctx, req, rf.lockWait)
		if ans.Answer != serve.NotRun {
			m.logInfo(rf, "answered by the daemon", "daemon", c.Where)
			return ans
		}
		if ans.Msg != "" {
			m.logInfo(rf, "the daemon did not run it; running here", "daemon", c.Where, "reason", ans.Msg)
		}
	}
	return serve.RunAnswer{}
}

// logInfo logs a record at info, as a run's are, unless --quiet.
func (m *Main) logInfo(rf runFlags, msg string, args ...any) {
	if !rf.quiet {
		m.logger(rf.log).Info(msg, args...)
	}
}
