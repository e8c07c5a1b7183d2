// Package serve is `contractd serve`: a daemon that runs every contract of a
// directory on its schedule and on demand, never two runs of one contract at
// once, backs off when runs fail and holds a contract down after repeated
// failures, reloads edited contracts, answers an HTTP API with Prometheus
// metrics, and reports its own liveness to systemd.
//
// The daemon decides when to run; the engine (a Runner) decides what a run
// does. A sick agent is a finished run; only an engine failure (a Run error,
// a deadline, a panic) counts toward backoff and hold-down.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/fsnotify/fsnotify"
)

// Defaults used when a Config field is zero.
const (
	DefaultListen        = "127.0.0.1:9464"
	DefaultEvery         = 15 * time.Minute
	DefaultStagger       = 30 * time.Second // the CLI's --stagger default; a zero Config.Stagger means none
	DefaultShutdownGrace = 30 * time.Second
	DefaultRunTimeout    = 10 * time.Minute
	DefaultDebounce      = 250 * time.Millisecond
	DefaultHeldPoll      = 5 * time.Second
	DefaultHeartbeat     = time.Second
	DefaultStuckAfter    = 30 * time.Second
)

// Runner runs one contract once. *engine.Engine satisfies it. A non-nil
// error means the engine itself failed (store, lock, deadline); a report
// with Skipped set means another process held the contract's run lock.
type Runner interface {
	Run(ctx context.Context, c *contracts.Contract) (*engine.Report, error)
}

// LoadFunc reads one contract file, as contracts.LoadFile does. The daemon
// keeps the file out (and reports every diagnostic) when the contract is nil
// or the diagnostics hold an error; warnings are logged.
type LoadFunc func(path string) (*contracts.Contract, contracts.Diagnostics)

// ContractLoader returns the LoadFunc that lints and compiles contracts with
// contracts.LoadFile and opts (inventory, --var overrides).
func ContractLoader(opts contracts.Options) LoadFunc {
	return func(path string) (*contracts.Contract, contracts.Diagnostics) {
		return contracts.LoadFile(path, opts)
	}
}

// Config configures a Daemon. Dir, StateDir and Runner are required.
type Config struct {
	Dir       string // contract files: every *.md directly inside
	StateDir  string // NAME.scheduler.json files live here
	Listen    string // HTTP address; "" means DefaultListen
	TokenFile string // bearer token for POST endpoints; "" disables them
	Runner    Runner
	Load      LoadFunc // nil means ContractLoader(contracts.Options{})
	// Notify delivers the daemon's own alert about contract c: one per
	// hold-down. Nil means c's own notify routes, built with NotifyDeps
	// (a contract without routes gets the alert in the log only).
	Notify func(ctx context.Context, c *contracts.Contract, text string) error
	// NotifyDeps builds the contract's notifiers for the default Notify.
	// With neither Logger nor Log, the log notifier's messages go to the
	// daemon's log (Log, below), one record each; a nil Getenv
	// is os.Getenv (notifiers read their API keys from the environment).
	NotifyDeps notify.Deps
	Clock      clock.Clock // the scheduler's time and timers; nil means clock.Real{}
	// Log receives the daemon's events, one record each at its level with
	// its fields ("contract", "path", "error", …): start and stop, contracts
	// loaded and rejected, runs failed, hold-downs. Nil means Logf, or
	// slog.Default().
	Log *slog.Logger
	// Logf, when Log is nil, receives each record as one line
	// (engine.LogfLogger).
	Logf    func(string, ...any)
	Reload  <-chan os.Signal // each receive reloads the directory (wire SIGHUP here)
	Systemd Systemd          // sd_notify target; see SystemdFromEnv
	// DisableWatch turns off the fsnotify watch of Dir (e.g. on network
	// file systems); reloads then happen only on Reload.
	DisableWatch bool
	// Socket is a Unix socket the HTTP API also answers on (SocketPath of
	// the state dir, usually), so that `contractd NAME` and `contractd run
	// NAME` on this host are answered by the daemon. It is created mode
	// 0600 and admits POSTs without the token from a client running as the
	// daemon's user or as root (SO_PEERCRED). "" means none.
	Socket string
	// ResidentSessions reports how many resident sessions the transport
	// pool holds, for /metrics; nil leaves the gauge out.
	ResidentSessions func() int
	// PageAuth makes the status page (GET /, /c/NAME, and GET /contracts
	// and /contracts/NAME, which carry the same findings) ask for the
	// bearer token of TokenFile, as the on-demand endpoints do; by default
	// it is read-only and open to whoever reaches Listen.
	PageAuth bool
	// Build names the running build for contractd_build_info and the
	// status page; a zero Version reads "dev".
	Build BuildInfo
	// HA shares the contracts with other instances through etcd: each
	// contract runs only on the instance that owns it (see ha.go). Nil
	// means this instance runs every contract.
	HA *HA
	// Store is the contracts' state as the engine keeps it, for the API's
	// history, maintenance and reset, and for a new owner's schedule. Nil
	// means the files in StateDir.
	Store store.Backend
	// MCP, when set, builds the handler served at /mcp (the MCP tools over
	// streamable HTTP) once the daemon exists; the handler checks the
	// bearer token itself (CheckToken).
	MCP func(*Daemon) http.Handler

	// DepPoll is how often the judgements of dependencies another node
	// runs are read (--etcd); 0 means DefaultDepPoll.
	DepPoll time.Duration

	Stagger       time.Duration // max random phase per contract; 0 means none
	ShutdownGrace time.Duration // how long running runs may finish after ctx is cancelled
	RunTimeout    time.Duration // deadline of one run
	Debounce      time.Duration // quiet time after a file event before reloading
	HeldPoll      time.Duration // how often a held contract looks for a Reset
	Heartbeat     time.Duration // scheduler loop tick
	StuckAfter    time.Duration // /healthz fails when the last tick is older
}

// Errors callers branch on.
var (
	ErrUnknownContract = errors.New("unknown contract")
	ErrOverlap         = errors.New("a run of this contract is already going")
	ErrStopping        = errors.New("the daemon is shutting down")
	ErrNotOwner        = errors.New("this instance does not own the contract; owner:")
)

// Daemon is a running `contractd serve`. Create it with New, drive it with Run.
type Daemon struct {
	cfg   Config
	store store.Backend
	// view is the store the page, the API and the metrics read (see
	// viewStore): with --etcd the group's state, the same on every node.
	view store.Backend
	// stateLock releases the flock on STATE_DIR/.contractd-serve.lock: one
	// daemon per state dir, since two would overwrite each other's
	// scheduler state.
	stateLock func()
	clock     clock.Clock
	started   time.Time // when Run began: schedule.start_delay counts from it
	log       *slog.Logger
	ln        net.Listener
	srv       *http.Server
	sock      net.Listener // nil without Config.Socket
	sockSrv   *http.Server
	metrics   *metrics

	mu      sync.Mutex
	entries map[string]*entry     // by contract name
	files   map[string]*fileState // by path

	hbMu sync.Mutex
	hb   heartbeat

	runs       sync.WaitGroup
	runCtx     context.Context // outlives Run's ctx by up to ShutdownGrace
	cancelRuns context.CancelFunc
	loopCtx    context.Context
	stopLoops  context.CancelFunc
	stopping   atomic.Bool
	reloadReq  chan struct{}
	mcp        http.Handler // Config.MCP's, or nil
	stateWatch stateWatch
	deps       deps // the fleet of the loaded contracts, and who waits for whom (depends.go)
}

// New checks cfg, fills defaults and opens the HTTP listener, so a mistyped
// directory or an address already in use fails here rather than later. It
// returns an error naming the missing field, the contract directory that is
// not one, the state dir that cannot be created, or the listen failure.
// Nothing runs until Run; ctx bounds only the wait for the state dir's lock.
func New(ctx context.Context, cfg Config) (*Daemon, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("serve: Config.Dir is required")
	case cfg.StateDir == "":
		return nil, errors.New("serve: Config.StateDir is required")
	case cfg.Runner == nil:
		return nil, errors.New("serve: Config.Runner is required")
	}
	if fi, err := os.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("serve: contract dir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("serve: contract dir %s: not a directory", cfg.Dir)
	}
	if cfg.Load == nil {
		cfg.Load = ContractLoader(contracts.Options{})
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.NotifyDeps.Clock == nil {
		cfg.NotifyDeps.Clock = cfg.Clock
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
		if cfg.Logf != nil {
			cfg.Log = engine.LogfLogger(cfg.Logf)
		}
	}
	if cfg.TokenFile != "" {
		// A mistyped --token-file fails now, not at the first on-demand run.
		fi, err := os.Stat(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("serve: token file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			cfg.Log.Warn("token file is readable by others; chmod 600 it", "path", cfg.TokenFile, "mode", fi.Mode().Perm().String())
		}
	}
	if cfg.NotifyDeps.Log == nil && cfg.NotifyDeps.Logger == nil {
		cfg.NotifyDeps.Logger = cfg.Log
	}
	if cfg.NotifyDeps.Getenv == nil {
		cfg.NotifyDeps.Getenv = os.Getenv
	}
	setDefault(&cfg.ShutdownGrace, DefaultShutdownGrace)
	setDefault(&cfg.RunTimeout, DefaultRunTimeout)
	setDefault(&cfg.Debounce, DefaultDebounce)
	setDefault(&cfg.HeldPoll, DefaultHeldPoll)
	setDefault(&cfg.Heartbeat, DefaultHeartbeat)
	setDefault(&cfg.StuckAfter, DefaultStuckAfter)
	files, err := store.Open(cfg.StateDir) // scheduler state and the lock live here in any case
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	var st store.Backend = files
	if cfg.Store != nil {
		st = cfg.Store
	}
	view := viewStore(st)
	lock, err := lockStateDir(ctx, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		lock()
		return nil, fmt.Errorf("serve: listen %s: %w", cfg.Listen, err)
	}
	d := &Daemon{
		cfg:       cfg,
		store:     st,
		view:      view,
		stateLock: lock,
		clock:     cfg.Clock,
		log:       cfg.Log,
		ln:        ln,
		entries:   map[string]*entry{},
		files:     map[string]*fileState{},
		reloadReq: make(chan struct{}, 1),
		hb:        heartbeat{stuckAfter: cfg.StuckAfter},
	}
	d.metrics = newMetrics(d.tickAgeSeconds, cfg.ResidentSessions, cfg.Build)
	d.metrics.reg.MustRegister(newScheduleSeries(d))
	if cfg.HA != nil {
		d.metrics.enableHA(cfg.HA)
		cfg.HA.mu.Lock()
		cfg.HA.changed, cfg.HA.busy = d.ownershipChanged, d.isRunning
		cfg.HA.mu.Unlock()
	}
	if d.cfg.Notify == nil {
		d.cfg.Notify = d.notifyRoutes
	}
	if cfg.MCP != nil {
		d.mcp = cfg.MCP(d)
	}
	d.srv = &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if cfg.Socket != "" {
		sock, err := listenSocket(cfg.Socket)
		if err != nil {
			// The TCP API still works; the CLI then runs one-shot.
			cfg.Log.Warn("no socket: `contractd NAME` will run without the daemon", "error", err)
		} else {
			d.sock = sock
			d.sockSrv = &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second, ConnContext: peerContext}
		}
	}
	return d, nil
}

// ErrStateDirInUse is wrapped when another daemon already serves the state dir.
var ErrStateDirInUse = errors.New("another contractd serve uses this state dir")

// stateDirLockWait is how long a starting daemon waits for the state dir's
// lock: a daemon being restarted may still be exiting, and a process that
// forks (any exec from the same program) holds a copy of the descriptor
// until its child execs.
const stateDirLockWait = 2 * time.Second

// lockStateDir takes the daemon's flock on STATE_DIR/.contractd-serve.lock
// (store.LockFile, which writes the daemon's pid there) and returns the
// function that releases it. The kernel releases the lock when the process
// dies. It fails with ErrStateDirInUse (naming the holder's pid) when
// another live daemon still holds it after stateDirLockWait.
func lockStateDir(ctx context.Context, dir string) (unlock func(), err error) {
	// A leading dot: no contract name can make this file name.
	path := filepath.Join(dir, ".contractd-serve.lock")
	unlock, err = store.LockFile(ctx, path, stateDirLockWait)
	var held *store.HeldError
	var open *os.PathError
	switch {
	case errors.As(err, &held):
		return nil, fmt.Errorf("serve: %s: %w (pid %s)", dir, ErrStateDirInUse, held.PID)
	case store.CannotWrite(err):
		// A state dir that cannot be written, and has no lock file yet:
		// the daemon still probes and reports (it writes nothing, so a
		// second daemon could not overwrite it), and says so at every run.
		return func() {}, nil
	case errors.As(err, &open):
		return nil, fmt.Errorf("serve: %w", err)
	case err != nil:
		return nil, fmt.Errorf("serve: lock %s: %w", path, err)
	}
	return unlock, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Addr returns the address the HTTP API listens on.
func (d *Daemon) Addr() net.Addr { return d.ln.Addr() }

// Reload asks the daemon to re-read its contract directory, as SIGHUP does.
// It never blocks; requests made while one is pending coalesce.
func (d *Daemon) Reload() {
	select {
	case d.reloadReq <- struct{}{}:
	default:
	}
}

// Serve runs a daemon until ctx is cancelled; it is New followed by Run.
// It returns nil on a clean stop and the first error otherwise.
func Serve(ctx context.Context, cfg Config) error {
	d, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// Run loads the contracts, starts their schedules and the HTTP API, tells
// systemd it is ready, and runs until ctx is cancelled. Then it stops
// scheduling, lets running runs finish within ShutdownGrace, cancels the
// rest, and returns nil. It returns an error when the HTTP server fails or
// runs ignore cancellation past a second grace period.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.stateLock() // releases the state dir for the next daemon
	runCtx, cancelRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	// The cause is what a run cut off at shutdown records as its reason.
	d.runCtx, d.cancelRuns = runCtx, func() { cancelRuns(ErrStopping) }
	defer d.cancelRuns()
	d.loopCtx, d.stopLoops = context.WithCancel(ctx)
	defer d.stopLoops()

	d.started = d.clock.Now()
	d.beat()
	var watcher *fsnotify.Watcher
	var werr error
	if !d.cfg.DisableWatch {
		watcher, werr = fsnotify.NewWatcher()
	}
	if watcher != nil && werr == nil {
		if err := watcher.Add(d.cfg.Dir); err != nil {
			werr = err
			watcher.Close()
		}
	}
	switch {
	case werr != nil:
		d.log.Warn("watching the contract directory failed, reload only on SIGHUP", "dir", d.cfg.Dir, "error", werr)
		watcher = nil
	case watcher != nil:
		defer watcher.Close()
	}

	var haDone chan struct{}
	if d.cfg.HA != nil {
		// Ownership outlives the scheduling loops: it is given up only
		// after the runs have ended, so no run of ours is cut off by a
		// takeover we caused ourselves.
		haCtx, stopHA := context.WithCancel(context.WithoutCancel(ctx))
		haDone = make(chan struct{})
		go func() { defer close(haDone); d.cfg.HA.run(haCtx) }()
		defer func() { stopHA(); <-haDone }()
	}
	d.reload()
	// The dependency poll stops with the scheduling loops, and Run returns
	// only once it has: it reads the store, which the caller closes next.
	pollDone := make(chan struct{})
	go func() { defer close(pollDone); d.pollDeps(d.loopCtx) }()
	srvErr := make(chan error, 2)
	go func() { srvErr <- d.srv.Serve(d.ln) }()
	if d.sock != nil {
		defer os.Remove(d.cfg.Socket)
		go func() { srvErr <- d.sockSrv.Serve(d.sock) }()
	}

	loaded, rejected := d.counts()
	version := d.cfg.Build.Version
	if version == "" {
		version = "dev"
	}
	d.log.Info("daemon started", "version", version, "node", d.node(), "contracts", loaded, "rejected", rejected,
		"listen", d.Addr().String(), "dir", d.cfg.Dir, "state_dir", d.cfg.StateDir)
	if err := d.cfg.Systemd.Notify(fmt.Sprintf("READY=1\nSTATUS=%d contracts loaded, %d rejected", loaded, rejected)); err != nil {
		d.log.Warn("sd_notify failed", "error", err)
	}

	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if watcher != nil {
		events, watchErrs = watcher.Events, watcher.Errors
	}
	var wdTick <-chan time.Time
	if d.cfg.Systemd.Watchdog > 0 {
		wdTick = d.clock.After(d.cfg.Systemd.Watchdog / 2)
	}
	hbTick := d.clock.After(d.cfg.Heartbeat)
	var debounce <-chan time.Time
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			args := []any{"reason", context.Cause(ctx)}
			if running := d.runningNames(); len(running) > 0 {
				args = append(args, "running", strings.Join(running, ", "), "grace", d.cfg.ShutdownGrace)
			}
			d.log.Info("stopping: no new runs", args...)
			break loop
		case err := <-srvErr:
			runErr = fmt.Errorf("serve: http: %w", err)
			break loop
		case <-hbTick:
			d.beat()
			hbTick = d.clock.After(d.cfg.Heartbeat)
		case <-wdTick:
			if age, ok := d.health(); ok {
				if err := d.cfg.Systemd.Notify("WATCHDOG=1"); err != nil {
					d.log.Warn("sd_notify failed", "error", err)
				}
			} else {
				d.log.Error("scheduler stuck; withholding the watchdog ping", "stuck_for", age.Round(time.Second))
			}
			wdTick = d.clock.After(d.cfg.Systemd.Watchdog / 2)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if contracts.IsContractFile(ev.Name) {
				debounce = d.clock.After(d.cfg.Debounce)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			// An overflowed event queue may have dropped an edit: re-read it all.
			d.log.Warn("watching the contract directory: events may be lost; reloading", "dir", d.cfg.Dir, "error", err)
			debounce = d.clock.After(d.cfg.Debounce)
		case <-debounce:
			debounce = nil
			d.reloadAndReport()
		case _, ok := <-d.cfg.Reload:
			if ok {
				d.log.Info("reload requested")
				d.reloadAndReport()
			}
		case <-d.reloadReq:
			d.reloadAndReport()
		}
	}
	if err := d.shutdown(); err != nil && runErr == nil {
		runErr = err
	}
	<-pollDone
	if runErr == nil {
		d.log.Info("daemon stopped")
	}
	return runErr
}

// node names this instance in its start line: its HA node name, else the
// host's name.
func (d *Daemon) node() string {
	if d.cfg.HA != nil {
		return d.cfg.HA.cfg.Node
	}
	host, _ := os.Hostname()
	return host
}

// reloadAndReport reloads Dir and updates the status line systemd shows.
func (d *Daemon) reloadAndReport() {
	d.reload()
	loaded, rejected := d.counts()
	if err := d.cfg.Systemd.Notify(fmt.Sprintf("STATUS=%d contracts loaded, %d rejected", loaded, rejected)); err != nil {
		d.log.Warn("sd_notify failed", "error", err)
	}
}

// shutdown stops scheduling, stops the HTTP server, waits up to
// ShutdownGrace for running runs, then cancels them and waits once more.
func (d *Daemon) shutdown() error {
	d.stopping.Store(true)
	if err := d.cfg.Systemd.Notify("STOPPING=1"); err != nil {
		d.log.Warn("sd_notify failed", "error", err)
	}
	d.stopLoops()
	d.mu.Lock()
	loops := make([]*entry, 0, len(d.entries))
	for _, e := range d.entries {
		loops = append(loops, e)
	}
	d.mu.Unlock()
	for _, e := range loops {
		<-e.done
	}

	runsDone := make(chan struct{})
	go func() { d.runs.Wait(); close(runsDone) }()
	httpDone := make(chan struct{})
	go func() {
		// In-flight on-demand runs are awaited below; the server only has
		// to drain handlers, which end when their run ends.
		sctx, cancel := context.WithTimeout(d.runCtx, d.cfg.ShutdownGrace+5*time.Second)
		defer cancel()
		if err := d.srv.Shutdown(sctx); err != nil {
			d.srv.Close()
		}
		if d.sockSrv != nil {
			if err := d.sockSrv.Shutdown(sctx); err != nil {
				d.sockSrv.Close()
			}
		}
		close(httpDone)
	}()

	var err error
	running := d.runningNames()
	select {
	case <-runsDone:
		if len(running) > 0 {
			d.log.Info("runs finished", "runs", strings.Join(running, ", "))
		}
	case <-d.clock.After(d.cfg.ShutdownGrace):
		d.log.Warn("cancelling runs still going after the shutdown grace", "runs", strings.Join(d.runningNames(), ", "), "grace", d.cfg.ShutdownGrace)
		d.cancelRuns()
		select {
		case <-runsDone:
		case <-d.clock.After(5 * time.Second):
			err = fmt.Errorf("serve: runs ignored cancellation: %v", d.runningNames())
		}
	}
	d.cancelRuns()
	<-httpDone
	return err
}

func (d *Daemon) beat() {
	now := d.clock.Now()
	d.hbMu.Lock()
	d.hb.last = now
	d.hbMu.Unlock()
}

// health returns how long the scheduler has not answered (the main loop's
// last tick, or a contract loop stuck in one tick) and whether it is alive.
func (d *Daemon) health() (time.Duration, bool) {
	d.hbMu.Lock()
	hb := d.hb
	d.hbMu.Unlock()
	var busy []time.Time
	d.mu.Lock()
	for _, e := range d.entries {
		if ns := e.busySince.Load(); ns != 0 {
			busy = append(busy, time.Unix(0, ns))
		}
	}
	d.mu.Unlock()
	return hb.check(d.clock.Now(), busy...)
}

func (d *Daemon) tickAgeSeconds() float64 {
	age, _ := d.health()
	return age.Seconds()
}

func (d *Daemon) runningNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name, e := range d.entries {
		e.mu.Lock()
		if e.running {
			out = append(out, name)
		}
		e.mu.Unlock()
	}
	return out
}
