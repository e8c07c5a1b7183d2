package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/mcpserver"
	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cmdMCP serves the MCP tools over stdio, for an agent that starts
// contractd as its MCP server: the state of --state-dir (or the group's,
// with --etcd), the contract files of --dir and /etc/contractd. Runs go to
// the daemon first, as `contractd run NAME` does, and one-shot without
// one. stdout carries the protocol alone; logs go to stderr.
func (m *Main) cmdMCP(ctx context.Context, args []string) int {
	var rf runFlags
	fs := m.flags("mcp")
	allow := fs.Bool("allow-actions", false, "turn on the acting tools: run a contract now, maintenance, release a hold-down (off: they refuse every call)")
	fs.StringVar(&rf.stateDir, "state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	fs.StringVar(&rf.dir, "dir", m.Getenv("CONTRACTD_DIR"), "contract `DIR` besides /etc/contractd")
	fs.IntVar(&rf.parallel, "parallel", 8, "stages in flight at once, per run")
	durationVar(fs, &rf.timeout, "timeout", 10*time.Minute, "deadline (`DURATION`) of a run or a dry run")
	durationVar(fs, &rf.lockWait, "lock-wait", 0, "how long (`DURATION`) a run waits for another run of the same contract")
	rf.register(fs)
	rf.daemon.register(fs, m.Getenv)
	rf.log.register(fs)
	var ef etcdFlags
	ef.register(fs, m.Getenv, "read and change the state a group of instances (serve --etcd) keeps in etcd at `URL[,URL…]`")
	rest, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(rest) != 0 {
		m.errorf("usage: contractd mcp %s", commands["mcp"].args)
		return exitUsage
	}
	opts, err := rf.options()
	if err != nil {
		m.errorf("%v", err)
		return exitUsage
	}
	src, err := m.openState(ctx, stateFlags{stateDir: rf.stateDir, dir: rf.dir}, ef)
	if err != nil {
		m.fail("mcp", err)
		return exitFailed
	}
	defer src.close()
	log := m.logger(rf.log)
	pool := transports.NewPool(transports.PoolOptions{HostKeys: log})
	defer pool.Close()
	ls := &localSource{m: m, src: src, rf: rf, opts: opts, pool: pool, log: log}
	srv := mcpserver.New(mcpserver.Options{Source: ls, AllowActions: *allow, Transport: "stdio", Version: version, Log: log})
	log.Info("serving the MCP tools on stdio", "state", src.where, "actions", *allow)
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		m.fail("mcp", err)
		return exitFailed
	}
	return exitOK
}

// localSource is the MCP tools' Source for `contractd mcp`: the state
// the CLI's state commands read, the contract files `contractd run NAME`
// finds, the daemon it asks, and the CLI's engine for what runs here.
type localSource struct {
	m    *Main
	src  *stateSource
	rf   runFlags
	opts contracts.Options
	pool *transports.Pool
	log  *slog.Logger
}

var _ mcpserver.Source = (*localSource)(nil)

func (s *localSource) Where() string {
	if s.src.shared {
		return "the group's state in " + s.src.where
	}
	return "the state in " + s.src.where
}

func (s *localSource) Store() store.Backend { return s.src.st }

func (s *localSource) LoadOptions() contracts.Options { return s.opts }

// List is every contract with state or a contract file, summarized as
// `contractd status` does.
func (s *localSource) List(ctx context.Context) ([]mcpserver.ContractRow, error) {
	k := s.m.known(s.src, s.rf.dir)
	var owners map[string]string
	if s.src.owners != nil {
		var err error
		if owners, err = s.src.owners(); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	rows := []mcpserver.ContractRow{}
	for _, n := range k.names() {
		sum, err := engine.Summarize(s.src.st, n, now)
		if errors.Is(err, store.ErrName) {
			continue // a contract file whose name no state can have: lint says so
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if s.src.shared {
			sum.Owner = nonEmpty(owners[n], "none")
		}
		rows = append(rows, mcpserver.RowFromSummary(sum))
	}
	return rows, nil
}

// Contract loads the contract file of name, with --inventory and --var.
func (s *localSource) Contract(ctx context.Context, name string) (*contracts.Contract, error) {
	path, err := findContract(s.rf.dir, func(c *contracts.Contract) bool { return c.Name == name })
	if err != nil {
		return nil, fmt.Errorf("unknown contract %q: no contract file of that name in %v%s", name, err, contracts.Suggest(name, contractFileNames(s.rf.dir)))
	}
	c, diags := contracts.LoadFile(path, s.opts)
	if c == nil || diags.HasErrors() {
		return nil, fmt.Errorf("contract %s does not load:\n%s", name, diags.Errors().String())
	}
	return c, nil
}

// Health is the local daemon's health, when one answers.
func (s *localSource) Health(ctx context.Context) (mcpserver.HealthOut, error) {
	for _, c := range s.clients() {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		h, err := c.Health(hctx)
		cancel()
		if err != nil {
			continue
		}
		out := mcpserver.HealthOut{Status: h.Status, Source: "the daemon at " + c.Where, LastTick: h.LastTick.UTC().Format(time.RFC3339),
			TickAgeSeconds: h.TickAgeSeconds, Contracts: h.Contracts, Rejected: h.Rejected, Running: h.Running}
		if h.ETCD != nil {
			up := h.ETCD.Up
			out.Node, out.EtcdUp, out.Owned, out.Nodes = h.ETCD.Node, &up, h.ETCD.Owned, h.ETCD.Nodes
		}
		return out, nil
	}
	names, err := s.src.st.Contracts()
	if err != nil {
		return mcpserver.HealthOut{}, err
	}
	return mcpserver.HealthOut{Status: "no_daemon", Source: s.Where(), Contracts: len(names), Running: []string{},
		Note: "no daemon answers (its socket in the state dir, or --daemon): the tools read the state directly, and runs run here"}, nil
}

// clients are the daemons to ask: --daemon, then the state dir's socket.
func (s *localSource) clients() []*serve.Client {
	return s.rf.daemon.clients(s.rf.stateDir, !s.src.shared, func(err error) {
		s.log.Warn("token file unreadable; asking the daemon without a token", "error", err)
	})
}

// engine is a one-shot engine over the source's state, as `contractd run`
// makes one (a dry run's when dry).
func (s *localSource) engine(dry bool) (*engine.Engine, error) {
	rf := s.rf
	rf.dryRun, rf.quiet = dry, false
	eopts := s.m.engineOptions(rf, s.pool, s.log)
	if s.src.shared {
		eopts.Store = s.src.st
	}
	return engine.New(eopts)
}

func (s *localSource) DryRun(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
	eng, err := s.engine(true)
	if err != nil {
		return nil, err
	}
	return eng.Run(ctx, c)
}

// Run asks the daemon to run the contract (it records the caller), and
// runs it here, one-shot, when no daemon serves it; with --inventory or
// --var the run is this process's own, as `contractd run` decides.
func (s *localSource) Run(ctx context.Context, name string) (*engine.Report, error) {
	if s.opts.Inventory == "" && len(s.opts.Vars) == 0 {
		rctx, cancel := context.WithTimeout(ctx, s.rf.timeout)
		defer cancel()
		for _, cl := range s.clients() {
			ans := cl.Run(rctx, serve.RunRequest{Contract: name, By: engine.Requester(ctx)}, s.rf.lockWait)
			switch ans.Answer {
			case serve.Ran:
				return ans.Report, nil
			case serve.RunFailed:
				return ans.Report, fmt.Errorf("the daemon's run failed: %s", ans.Msg)
			}
			if ans.Msg != "" {
				s.log.Info("the daemon did not run it; running here", "daemon", cl.Where, "reason", ans.Msg)
			}
		}
	}
	c, err := s.Contract(ctx, name)
	if err != nil {
		return nil, err
	}
	eng, err := s.engine(false)
	if err != nil {
		return nil, err
	}
	return eng.Run(ctx, c)
}

func (s *localSource) Maintenance(ctx context.Context, name, agent string, d time.Duration, reason string) (map[string]*guard.Window, error) {
	if err := s.m.known(s.src, s.rf.dir).checkAgent(name, agent); err != nil {
		return nil, err
	}
	return engine.SetMaintenance(ctx, s.src.st, name, agent, d, reason, time.Now().UTC())
}

func (s *localSource) Release(ctx context.Context, name string) error {
	if err := engine.ReleaseLedger(ctx, s.src.st, name, "", time.Now()); err != nil {
		return err
	}
	return serve.ReleaseHoldDown(ctx, s.rf.stateDir, name)
}
