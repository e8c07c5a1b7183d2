package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/mcpserver"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/transports"
)

func (m *Main) cmdServe(ctx context.Context, args []string) int {
	fs := m.flags("serve")
	dir := fs.String("dir", "/etc/contractd", "directory of contracts (every *.md)")
	stateDir := fs.String("state-dir", defaultStateDir(m.Getenv), "state `DIR`")
	listen := fs.String("listen", serve.DefaultListen, "HTTP address (status, metrics, on-demand runs)")
	tokenFile := fs.String("token-file", "", "bearer token `FILE` for POST /contracts/NAME/run")
	pageAuth := fs.Bool("page-auth", false, "ask for the --token-file token on the status page (GET /) too")
	parallel := fs.Int("parallel", 8, "stages in flight at once, per run")
	var stagger, grace time.Duration
	durationVar(fs, &stagger, "stagger", 30*time.Second, "largest random delay (`DURATION`) before a contract's first run")
	durationVar(fs, &grace, "shutdown-grace", 30*time.Second, "how long (`DURATION`) running runs may finish on SIGTERM")
	resident := fs.Bool("resident", true, "keep a resident session per target chain, so later runs start no login shell (see docs/transports.md)")
	perHost := fs.Int("resident-per-host", transports.DefaultResidentPerHost, "most resident sessions open at once per host")
	mcpOn := fs.Bool("mcp", false, "serve the MCP tools at /mcp (streamable HTTP), behind the --token-file token")
	mcpAct := fs.Bool("mcp-allow-actions", false, "with --mcp: turn on the acting tools (run now, maintenance, release a hold-down)")
	socket := fs.String("socket", "", "Unix socket `PATH` for `contractd NAME` on this host (default STATE_DIR/"+serve.SocketName+"; \"none\" for no socket)")
	var lf loadFlags
	lf.register(fs)
	var hf haFlags
	hf.register(fs, m.Getenv)
	var logf logFlags
	logf.register(fs)
	rest, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(rest) != 0 {
		m.errorf("usage: contractd serve --dir DIR [--state-dir DIR] [--listen ADDR] [--token-file FILE]")
		return exitUsage
	}
	opts, err := lf.options()
	if err != nil {
		m.errorf("%v", err)
		return exitUsage
	}
	if *mcpOn && *tokenFile == "" {
		m.errorf("serve: --mcp needs --token-file: every MCP call over HTTP carries the API token")
		return exitUsage
	}
	if *mcpAct && !*mcpOn {
		m.errorf("serve: --mcp-allow-actions needs --mcp")
		return exitUsage
	}
	if len(opts.Vars) > 0 {
		// A --var must be one some contract of the directory reads.
		cs, _, err := contracts.LoadDir(*dir, opts)
		if err != nil {
			m.errorf("serve: %v", err)
			return exitFailed
		}
		if err := contracts.CheckVarOverrides(cs, opts.Vars); err != nil {
			m.errorf("%v", err)
			return exitUsage
		}
	}
	// A daemon holds a connection and a resident session per host for
	// hours while it allocates in bursts (one run's report at a time):
	// collect sooner than Go's default, a little CPU per run for memory
	// that stays near what is live. GOGC in the environment still wins.
	if m.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	log := m.logger(logf)
	// One pool for the daemon's life: ssh connections are kept alive
	// between runs, and with resident sessions so is a shell per target.
	popts := transports.PoolOptions{KeepAlive: 30 * time.Second, Log: log}
	if *resident {
		popts.Resident = &transports.ResidentOptions{MaxPerHost: *perHost}
	}
	pool := transports.NewPool(popts)
	defer pool.Close()
	sock := *socket
	switch sock {
	case "":
		sock = serve.SocketPath(*stateDir)
	case "none":
		sock = ""
	}
	var ha *serve.HA
	var shared store.Backend
	if hf.on() {
		cli, h, st, err := hf.connect(ctx, m.Getenv, log)
		if err != nil {
			m.errorf("serve: %v", err)
			return exitUsage
		}
		defer cli.Close()
		ha, shared = h, st
		log.Info("contracts are shared with the other instances through etcd", "node", hf.node, "etcd", hf.endpoints, "lease_ttl", hf.ttl)
	}
	eng, err := engine.New(engine.Options{
		StateDir: *stateDir, Store: shared, Parallel: *parallel, Opener: engine.PoolOpener{Pool: pool},
		Getenv: m.Getenv, Log: log, NotifyDeps: notify.Deps{Logger: log, Getenv: m.Getenv, PageURL: serve.PageURL(*listen)},
	})
	if err != nil {
		m.errorf("%v", err)
		return exitFailed
	}
	var mcpHandler func(*serve.Daemon) http.Handler
	if *mcpOn {
		// A dry run asks every guard and runs nothing: its own engine, on
		// the daemon's pool and state, writing nothing.
		dry, err := engine.New(engine.Options{
			StateDir: *stateDir, Store: shared, Parallel: *parallel, Opener: engine.PoolOpener{Pool: pool},
			Getenv: m.Getenv, Log: log, DryRun: true, NotifyDeps: notify.Deps{Logger: log, Getenv: m.Getenv},
		})
		if err != nil {
			m.errorf("%v", err)
			return exitFailed
		}
		mcpHandler = func(d *serve.Daemon) http.Handler {
			src := &mcpserver.Daemon{D: d, Dry: dry, Load: opts, Listen: *listen}
			srv := mcpserver.New(mcpserver.Options{Source: src, AllowActions: *mcpAct, Transport: "http", Version: version, Log: log})
			return mcpserver.HTTPHandler(srv, d.CheckToken, opts.MaxFileSize)
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	err = serve.Serve(ctx, serve.Config{
		Dir: *dir, StateDir: *stateDir, Listen: *listen, TokenFile: *tokenFile,
		Runner: eng, Load: withoutNotes(serve.ContractLoader(opts)),
		NotifyDeps: notify.Deps{Logger: log, Getenv: m.Getenv, PageURL: serve.PageURL(*listen)},
		Log:        log, Reload: hup, Systemd: serve.SystemdFromEnv(m.Getenv, os.Getpid()),
		Stagger: stagger, ShutdownGrace: grace, Socket: sock, Build: buildInfo(), PageAuth: *pageAuth,
		HA: ha, Store: shared, MCP: mcpHandler,
		ResidentSessions: func() int {
			n := 0
			for _, k := range pool.ResidentSessions() {
				n += k
			}
			return n
		},
	})
	if err != nil {
		// The daemon's last record: a journal or a JSON reader has it
		// with the rest.
		log.Error("daemon failed", "error", err)
		return exitFailed
	}
	return exitOK
}

// withoutNotes drops the notes from what load returns: a note says what a
// deliberate choice does (a report-only agent's actions never run), which
// lint says once; the daemon's log would repeat it at every load.
func withoutNotes(load serve.LoadFunc) serve.LoadFunc {
	return func(path string) (*contracts.Contract, contracts.Diagnostics) {
		c, ds := load(path)
		return c, ds.Problems()
	}
}
