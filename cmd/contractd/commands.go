package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/transports"
)

// loadFlags are the flags every command that loads contracts takes.
type loadFlags struct {
	inventory string
	vars      multiFlag
	maxSize   sizeFlag
}

// register adds --inventory, --var and --max-file-size to fs.
func (l *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.inventory, "inventory", "", "inventory `FILE` overriding targets and vars")
	fs.Var(&l.vars, "var", "override a var (`key=value`, repeatable)")
	fs.Var(&l.maxSize, "max-file-size", "refuse contracts and inventories larger than `SIZE` (e.g. 4MiB; default 1MiB)")
}

// sizeFlag is a byte size given as 4MiB, 512KiB or a number of bytes; zero
// means the default.
type sizeFlag int64

func (f *sizeFlag) String() string {
	if *f == 0 {
		return ""
	}
	return contracts.FormatSize(int64(*f))
}

func (f *sizeFlag) Set(v string) error {
	n, err := contracts.ParseSize(v)
	if err != nil {
		return err
	}
	*f = sizeFlag(n)
	return nil
}

// loadWith loads files with the flags' overrides; it prints every
// diagnostic and returns exitOK, or exitUsage when anything did not load or
// a --var names a var none of them declares.
func (m *Main) loadWith(files []string, l loadFlags) ([]*contracts.Contract, int) {
	opts, err := l.options()
	if err != nil {
		m.errorf("%v", err)
		return nil, exitUsage
	}
	cs, ok := m.load(files, opts)
	if !ok {
		return nil, exitUsage
	}
	if err := contracts.CheckVarOverrides(cs, opts.Vars); err != nil {
		m.errorf("%v", err)
		return nil, exitUsage
	}
	return cs, exitOK
}

func (l *loadFlags) options() (contracts.Options, error) {
	opts := contracts.Options{Inventory: l.inventory, Vars: map[string]string{}, MaxFileSize: int64(l.maxSize)}
	for _, kv := range l.vars {
		k, v, err := contracts.ParseVarFlag(kv)
		if err != nil {
			return opts, err
		}
		opts.Vars[k] = v
	}
	return opts, nil
}

// load loads contracts, printing every error and warning (notes are
// lint's alone); it fails when any has errors.
func (m *Main) load(paths []string, opts contracts.Options) ([]*contracts.Contract, bool) {
	var out []*contracts.Contract
	ok := true
	for _, p := range paths {
		c, diags := contracts.LoadFile(p, opts)
		for _, d := range diags.Problems() {
			fmt.Fprintln(m.Stderr, d.String())
		}
		if diags.HasErrors() || c == nil {
			ok = false
			continue
		}
		out = append(out, c)
	}
	return out, ok
}

func defaultStateDir(getenv func(string) string) string {
	if d := getenv("CONTRACTD_STATE_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "contractd")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "contractd")
	}
	return "/var/lib/contractd"
}

func (m *Main) cmdLint(ctx context.Context, args []string) int {
	fs := m.flags("lint")
	strict := fs.Bool("strict", false, "fail on warnings too (never on notes)")
	var lf loadFlags
	lf.register(fs)
	files, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(files) == 0 {
		m.errorf("lint: no contract files given")
		return exitUsage
	}
	opts, err := lf.options()
	if err != nil {
		m.errorf("%v", err)
		return exitUsage
	}
	files, err = contractArgs(files)
	if err != nil {
		m.errorf("lint: %v", err)
		return exitUsage
	}
	code := exitOK
	say := func(d contracts.Diagnostic) {
		fmt.Fprintln(m.Stdout, d.String())
		if d.Severity == contracts.DiagError || *strict && d.Severity == contracts.DiagWarning {
			code = exitFailed
		}
	}
	var loaded, read []*contracts.Contract
	for _, f := range files {
		c, diags := contracts.LoadFile(f, opts)
		for _, d := range diags {
			say(d)
		}
		if c != nil {
			loaded = append(loaded, c)
			read = append(read, c)
		} else if d := contracts.DraftFile(f, opts); d != nil {
			// As far as it was read: its name answers the contracts
			// that depend on it, and its own depends_on is checked.
			read = append(read, d)
		}
	}
	// depends_on names other contracts: those of the same directory,
	// which run beside these under `serve --dir`.
	for _, d := range contracts.CheckFleet(contracts.DraftFleet(read, opts)) {
		for _, c := range read {
			if d.Pos.File == c.Path {
				say(d)
			}
		}
	}
	// Which contract a --var is for is known once they all loaded.
	if len(loaded) == len(files) {
		if err := contracts.CheckVarOverrides(loaded, opts.Vars); err != nil {
			m.errorf("%v", err)
			return exitUsage
		}
	}
	return code
}

// contractArgs expands the directories among args to the contract files
// they hold (contracts.ContractFiles); files stay as given.
func contractArgs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			out = append(out, a)
			continue
		}
		paths, err := contracts.ContractFiles(a)
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%s holds no contract files (*.md)", a)
		}
		out = append(out, paths...)
	}
	return out, nil
}

func (m *Main) cmdExplain(ctx context.Context, args []string) int {
	fs := m.flags("explain")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	var lf loadFlags
	lf.register(fs)
	files, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(files) != 1 {
		m.errorf("usage: contractd explain [--json] FILE")
		return exitUsage
	}
	cs, code := m.loadWith(files, lf)
	if code != exitOK {
		return code
	}
	now := time.Now()
	if *asJSON {
		return m.writeJSON(contracts.ExplainAsOf(cs[0], now))
	}
	if err := contracts.WriteExplainTextAt(m.Stdout, cs[0], now); err != nil {
		m.errorf("%v", err)
		return exitFailed
	}
	return exitOK
}

func (m *Main) writeJSON(v any) int {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		m.errorf("%v", err)
		return exitFailed
	}
	return exitOK
}

// runFlags are the flags of `run` and of declared commands.
type runFlags struct {
	loadFlags
	dryRun   bool
	asJSON   bool
	nagios   bool
	repair   bool // with --nagios: repair as a run would
	stateDir string
	parallel int
	lockWait time.Duration
	timeout  time.Duration
	grace    time.Duration
	quiet    bool
	dir      string
	daemon   daemonFlags
	log      logFlags
}

func (m *Main) runFlagSet(name string, rf *runFlags) *flag.FlagSet {
	fs := m.flags(name)
	fs.BoolVar(&rf.dryRun, "dry-run", false, "evaluate every guard; run no repair, send no alert, write no state")
	fs.BoolVar(&rf.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&rf.nagios, "nagios", false, "Nagios plugin output; exit 0/1/2/3 (OK/WARNING/CRITICAL/UNKNOWN); a check repairs nothing unless --repair")
	fs.BoolVar(&rf.repair, "repair", false, "with --nagios: let the check run repairs as a run does")
	fs.StringVar(&rf.stateDir, "state-dir", defaultStateDir(m.Getenv), "state `DIR` (snapshots, ledgers, history)")
	fs.IntVar(&rf.parallel, "parallel", 8, "stages in flight at once")
	durationVar(fs, &rf.lockWait, "lock-wait", 0, "wait this long (`DURATION`) for another run of the same contract")
	durationVar(fs, &rf.timeout, "timeout", 10*time.Minute, "deadline (`DURATION`) for the whole run")
	durationVar(fs, &rf.grace, "verify-grace", 0, "replace every verify-after-repair grace period (`DURATION`; 0 = as the contract says)")
	fs.BoolVar(&rf.quiet, "quiet", false, "no live progress and no log lines")
	fs.StringVar(&rf.dir, "dir", m.Getenv("CONTRACTD_DIR"), "directory of contracts to search for a command or contract NAME")
	rf.register(fs)
	rf.daemon.register(fs, m.Getenv)
	rf.log.register(fs)
	return fs
}

// cmdRun runs contract files one-shot. A single NAME that is not a file is
// a contract's name: a running daemon is asked first, and without one the
// contract of that name is found in --dir or /etc/contractd and run here.
func (m *Main) cmdRun(ctx context.Context, args []string) int {
	var rf runFlags
	fs := m.runFlagSet("run", &rf)
	files, err := m.parse(fs, args)
	if err != nil {
		return m.runUsageExit(err, args)
	}
	if len(files) == 0 {
		m.errorf("usage: contractd run [flags] FILE... | NAME")
		return exitUsage
	}
	if len(files) == 1 && isName(files[0]) {
		name := files[0]
		if ans := m.askDaemon(ctx, fs, rf, serve.RunRequest{Contract: name}); ans.Answer != serve.NotRun {
			return m.daemonReport(name, ans, rf)
		}
		path, err := findContract(rf.dir, func(c *contracts.Contract) bool { return c.Name == name })
		if err != nil {
			why := fmt.Sprintf("%s is neither a file nor a contract in %v%s", name, err, contracts.Suggest(name, contractFileNames(rf.dir)))
			if rf.nagios {
				return m.nagiosUnknown(name, why)
			}
			m.errorf("%s", why)
			return exitUsage
		}
		files = []string{path}
	}
	return m.runContracts(ctx, files, rf)
}

// runUsageExit is the exit of a run whose flags did not parse: with
// --nagios among them, an UNKNOWN status line and exit 3 as the plugin
// guidelines ask (Nagios reads stdout only, and 2 is CRITICAL); otherwise
// the usage exit.
func (m *Main) runUsageExit(err error, args []string) int {
	if errors.Is(err, errHelp) {
		return exitOK
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--nagios" || a == "-nagios" || strings.HasPrefix(a, "--nagios=") || strings.HasPrefix(a, "-nagios=") {
			return m.nagiosUnknown("contractd", "bad usage: "+err.Error())
		}
	}
	return exitUsage
}

// needsFleet reports whether a run of cs reads other contracts: one
// depends on something, or reaches a target through another.
func needsFleet(cs []*contracts.Contract) bool {
	for _, c := range cs {
		if len(c.DependsOn) > 0 {
			return true
		}
		for _, t := range c.Targets {
			if t.Via != "" {
				return true
			}
		}
	}
	return false
}

// isName reports whether arg names a contract rather than a file: no such
// file, no path separator, no .md suffix.
func isName(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return false
	}
	return !strings.ContainsRune(arg, os.PathSeparator) && !strings.HasSuffix(arg, ".md")
}

// cmdDeclared runs the contract that declares name in its `commands`: a
// running daemon is asked first, and without one it runs here.
func (m *Main) cmdDeclared(ctx context.Context, name string, args []string) int {
	var rf runFlags
	fs := m.runFlagSet(name, &rf)
	if _, err := m.parse(fs, args); err != nil {
		return m.runUsageExit(err, args)
	}
	if ans := m.askDaemon(ctx, fs, rf, serve.RunRequest{Command: name}); ans.Answer != serve.NotRun {
		c := name
		if ans.Report != nil {
			c = ans.Report.Contract
		}
		return m.daemonReport(c, ans, rf)
	}
	path, err := findContract(rf.dir, func(c *contracts.Contract) bool { return slices.Contains(c.Commands, name) })
	if err != nil {
		cands := commandNames()
		for _, c := range contractFiles(contractDirs(rf.dir)) {
			cands = append(cands, c.Commands...)
		}
		m.errorf("unknown command %q: not a contractd command, and no contract in %v declares it%s (see contractd --help)", name, err, contracts.Suggest(name, cands))
		return exitUsage
	}
	return m.runContracts(ctx, []string{path}, rf)
}

// findContract returns the first contract file that loads and matches, in
// dir, then /etc/contractd and /etc/contractd/contracts. Its error lists
// the directories searched.
func findContract(dir string, match func(*contracts.Contract) bool) (string, error) {
	dirs := contractDirs(dir)
	for _, d := range dirs {
		files, _ := contracts.ContractFiles(d)
		for _, f := range files {
			c, diags := contracts.LoadFile(f, contracts.Options{})
			if c != nil && !diags.HasErrors() && match(c) {
				return f, nil
			}
		}
	}
	return "", errors.New(strings.Join(dirs, ", "))
}

// daemonReport prints what a daemon answered, as runContracts prints a run.
func (m *Main) daemonReport(name string, ans serve.RunAnswer, rf runFlags) int {
	var t tally
	var runErr error
	if ans.Answer == serve.RunFailed {
		runErr = fmt.Errorf("the daemon's run failed: %s", ans.Msg)
	}
	m.show(&t, name, ans.Report, runErr, rf)
	return t.exit(rf)
}

func (m *Main) runContracts(ctx context.Context, files []string, rf runFlags) int {
	cs, code := m.loadWith(files, rf.loadFlags)
	if code != exitOK {
		if rf.nagios {
			return m.nagiosLoadError(files, rf.loadFlags)
		}
		return code
	}
	// A host key that accept-new records is said even with --quiet: the
	// run trusted a key nobody had checked. So are the lines of a log
	// route: they are the contract's deliveries, not the run's chatter.
	log := m.logger(rf.log)
	pool := transports.NewPool(transports.PoolOptions{HostKeys: log})
	defer pool.Close()
	eopts := m.engineOptions(rf, pool, log)
	if rf.nagios && !rf.repair {
		eopts.CheckOnly = "a --nagios check repairs nothing unless --repair is given"
	}
	if !rf.quiet && !rf.asJSON && !rf.nagios && m.IsTerminal(m.Stdout) {
		eopts.Progress = progressPrinter(m.Stderr)
	}
	eng, err := engine.New(eopts)
	if err != nil {
		m.errorf("%v", err)
		return exitFailed
	}
	if needsFleet(cs) {
		// What these depend on, and who watches the hosts they reach
		// through, are the contracts of their directories.
		opts, _ := rf.loadFlags.options()
		ctx = engine.WithFleet(ctx, engine.NewFleet(contracts.Fleet(cs, opts)))
	}
	var t tally
	for _, c := range cs {
		if ctx.Err() != nil {
			m.errorf("%s: not run: %v", c.Name, context.Cause(ctx))
			t.failed = true
			continue
		}
		// The run records what it did before anything is printed, so a
		// reader that goes away early (| head) never costs the record.
		rep, runErr := eng.Run(ctx, c)
		m.show(&t, c.Name, rep, runErr, rf)
	}
	if code, ok := interruptedExit(ctx); ok {
		return code
	}
	return t.exit(rf)
}

// engineOptions are the options of a one-shot run as rf asks, through
// pool, logging to log (nothing of the run's own with --quiet).
func (m *Main) engineOptions(rf runFlags, pool *transports.Pool, log *slog.Logger) engine.Options {
	runLog := log
	if rf.quiet {
		runLog = slog.New(slog.DiscardHandler)
	}
	return engine.Options{
		StateDir: rf.stateDir, Parallel: rf.parallel, DryRun: rf.dryRun,
		RunTimeout: rf.timeout, LockWait: rf.lockWait, GraceOverride: rf.grace,
		Opener: engine.PoolOpener{Pool: pool}, Getenv: m.Getenv, Log: runLog, ReleaseTargets: true,
		NotifyDeps: notify.Deps{Logger: log, Getenv: m.Getenv},
	}
}

// tally is the exit code of reports printed so far.
type tally struct {
	failed bool
	worst  int // Nagios code
}

// show prints one run's report as rf asks and counts it into t.
func (m *Main) show(t *tally, name string, rep *engine.Report, runErr error, rf runFlags) {
	if rep != nil {
		switch {
		case rf.asJSON:
			m.writeJSON(rep)
		case rf.nagios && runErr != nil:
			m.nagiosUnknown(name, "the engine failed: "+runErr.Error())
		case rf.nagios && rep.Skipped != "":
			m.nagiosUnknown(name, "not checked: "+rep.Skipped)
		case rf.nagios:
			engine.WriteNagios(m.Stdout, rep)
		default:
			engine.WriteText(m.Stdout, rep)
			if rf.dryRun {
				fmt.Fprintln(m.Stdout, "\nguards:")
				engine.WriteTrace(m.Stdout, rep)
			}
		}
		t.worst = worseNagios(t.worst, engine.NagiosStatus(rep))
	}
	if rep != nil && rep.StateUnwritable != "" {
		// Nothing was recorded and nothing repaired: a timer's unit must
		// fail so that a person sees it (the daemon pages instead).
		m.errorf("%s: %s: nothing repaired or recorded", name, rep.StateUnwritable)
		t.failed = true
	}
	if runErr != nil {
		if rep == nil && rf.nagios {
			m.nagiosUnknown(name, "the engine failed: "+runErr.Error())
		}
		m.fail(name, runErr)
		t.failed = true
	}
}

// exit is the process exit code for the reports shown.
func (t tally) exit(rf runFlags) int {
	switch {
	case rf.nagios && t.failed:
		return 3
	case rf.nagios:
		return t.worst
	case t.failed:
		return exitFailed
	}
	return exitOK
}
