package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// Result is what a test file came to.
type Result struct {
	File     string
	Contract string
	Runs     []RunResult
}

// RunResult is one run's verdict: the differences between what was
// expected and what the engine reported, none when it passed.
type RunResult struct {
	Label    string
	Severity contracts.Severity
	Diffs    []string
	Report   *engine.Report
}

// Failed reports whether any run differs from its expectations.
func (r *Result) Failed() bool {
	for _, run := range r.Runs {
		if len(run.Diffs) > 0 {
			return true
		}
	}
	return false
}

// Test runs the test file at path. It returns an error wrapping ErrFile
// when the test file or its contract does not load (with the contract's
// diagnostics), and an error when the engine itself fails; differences
// are in the Result.
func Test(ctx context.Context, path string) (*Result, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	c, diags := contracts.LoadFile(f.ContractPath(), contracts.Options{Inventory: inventoryPath(f), Vars: f.Vars})
	if diags.HasErrors() || c == nil {
		return nil, fmt.Errorf("%w: %s: contract %s does not load:\n%v", ErrFile, path, f.ContractPath(), diags.Err())
	}
	// Nothing leaves the machine: the contract's routes and log file are
	// replaced by one that records, so alerts[] says what a run would send.
	c.Notify, c.Log = nil, ""
	state, err := os.MkdirTemp("", "contractd-test-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)
	start, _ := f.start()
	clk := clock.NewFake(start)
	rp := &replayer{}
	secrets := map[string]string{}
	for _, s := range c.Secrets {
		secrets[s] = "test-secret-" + s
	}
	eng, err := engine.New(engine.Options{
		StateDir: state, Opener: &opener{rp}, Recordings: rp, Clock: clk, Sleep: sleeper(clk),
		Getenv:    func(k string) string { return secrets[k] },
		Notifiers: []notify.Notifier{recorder{}},
	})
	if err != nil {
		return nil, err
	}
	res := &Result{File: path, Contract: c.Name}
	for i, run := range f.Runs {
		if i > 0 {
			d := c.Schedule.Every
			if run.After != "" {
				d, _ = contracts.ParseDuration(run.After)
			}
			clk.Advance(d)
		}
		rp.next(run)
		rep, err := eng.Run(ctx, c)
		if err != nil {
			return res, fmt.Errorf("%s: %s: the engine failed: %w", path, f.label(i), err)
		}
		rr := RunResult{Label: f.label(i), Report: rep, Severity: rep.OverallSeverity}
		rr.Diffs = append(rr.Diffs, rp.missing()...)
		rr.Diffs = append(rr.Diffs, compare(run.Expect, rep)...)
		res.Runs = append(res.Runs, rr)
	}
	return res, nil
}

func inventoryPath(f *File) string {
	if f.Inventory == "" || filepath.IsAbs(f.Inventory) {
		return f.Inventory
	}
	return filepath.Join(filepath.Dir(f.path), f.Inventory)
}

// sleeper makes the engine's waits for a verify grace take no time: the
// fake clock moves to d past when the wait began, so units verifying at
// once wait the longest grace, not the sum of them.
func sleeper(clk *clock.Fake) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		clk.AdvanceTo(clk.Now().Add(d))
		return ctx.Err()
	}
}

// replayer holds the outputs of the current run and what was asked of it
// that the recording lacks.
type replayer struct {
	mu      sync.Mutex
	steps   map[string]*Output
	after   map[string]*Output
	repairs map[string]*Output
	lacking map[string]bool
}

// next makes run the current one: its steps over the last run's.
func (r *replayer) next(run *Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.steps == nil {
		r.steps = map[string]*Output{}
	}
	for k, o := range run.Steps {
		r.steps[k] = o
	}
	r.after, r.repairs, r.lacking = run.AfterRepair, run.Repairs, map[string]bool{}
}

// Recording is the recorded answer of stage/step (engine.Recordings):
// after a repair, after_repair's before steps'; nil, and noted as
// missing, when there is none.
func (r *replayer) Recording(p engine.Probe, step string) *steps.Recording {
	key := p.Stage + "/" + step
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Verify {
		if o, ok := r.after[key]; ok {
			return o
		}
	}
	if o, ok := r.steps[key]; ok {
		return o
	}
	r.lacking[key] = true
	return nil
}

func (r *replayer) repair(action string) *Output {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.repairs[action]; ok {
		return o
	}
	return &Output{}
}

// missing names the steps the engine probed that the recording lacks.
func (r *replayer) missing() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.lacking {
		out = append(out, fmt.Sprintf("step %s: no recorded output (add it under steps:); it ran as unreachable", k))
	}
	sort.Strings(out)
	return out
}

// opener hands the engine a transport that answers repairs from the
// recording. Steps never reach it: the engine replays them through their
// kinds (engine.Options.Recordings), so nothing dials and nothing runs.
type opener struct{ r *replayer }

var _ engine.Opener = (*opener)(nil)

func (o *opener) Open(c *contracts.Contract, target string) (transports.Transport, error) {
	return &transport{r: o.r, target: target}, nil
}

func (o *opener) Dialer(c *contracts.Contract, target string) (steps.Dialer, error) {
	return nil, fmt.Errorf("replay: %s: a test dials nothing (its steps are replayed)", target)
}

// transport answers repairs from the recording, and refuses anything
// else: a step is replayed by its kind, never run.
type transport struct {
	r      *replayer
	target string
}

var _ transports.Transport = (*transport)(nil)

func (t *transport) String() string { return "replay " + t.target }

func (t *transport) Exec(ctx context.Context, cmd transports.Command) (transports.Result, error) {
	p, ok := engine.ProbeFrom(ctx)
	if !ok || p.Action == "" {
		return transports.Result{}, fmt.Errorf("%w: replay: only a repair runs in a test", transports.ErrUnreachable)
	}
	o := t.r.repair(p.Action)
	res := transports.Result{Stdout: o.Stdout, Stderr: o.Stderr, ExitCode: o.Exit, TimedOut: o.Timeout,
		StdoutBytes: int64(len(o.Stdout)), StderrBytes: int64(len(o.Stderr))}
	if o.Timeout && o.Exit == 0 {
		res.ExitCode = transports.ExitTimedOut
	}
	if o.Unreachable {
		return transports.Result{}, fmt.Errorf("%w: recorded unreachable", transports.ErrUnreachable)
	}
	return res, nil
}

// ExecBatch refuses: only steps travel in batches, and steps are replayed.
func (t *transport) ExecBatch(ctx context.Context, cmds []transports.Command) ([]transports.Result, error) {
	return nil, fmt.Errorf("%w: replay: a batch of steps reached a transport", transports.ErrUnreachable)
}

// recorder stands in for the contract's notify routes: every message is
// delivered to it, and nowhere else.
type recorder struct{}

func (recorder) Name() string                                       { return "test" }
func (recorder) Notify(ctx context.Context, m notify.Message) error { return nil }
