package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// fakeTarget is a transport made of function fields; the zero value
// answers every script with empty output.
type fakeTarget struct {
	name  string
	exec  func(ctx context.Context, cmd transports.Command) (transports.Result, error)
	mu    sync.Mutex
	calls []string // every script it was sent, in order
	batch int      // ExecBatch calls
}

var _ transports.Transport = (*fakeTarget)(nil)

func (f *fakeTarget) Exec(ctx context.Context, cmd transports.Command) (transports.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, cmd.Script)
	f.mu.Unlock()
	if f.exec == nil {
		return transports.Result{}, nil
	}
	return f.exec(ctx, cmd)
}

func (f *fakeTarget) ExecBatch(ctx context.Context, cmds []transports.Command) ([]transports.Result, error) {
	f.mu.Lock()
	f.batch++
	f.mu.Unlock()
	// Like a real batch whose session dies: the commands before the failure
	// keep their results, the rest are marked not run.
	out := make([]transports.Result, len(cmds))
	for i, c := range cmds {
		r, err := f.Exec(ctx, c)
		if err != nil {
			for j := i; j < len(cmds); j++ {
				out[j] = transports.Result{ExitCode: -1, NotRun: true}
			}
			return out, err
		}
		out[i] = r
	}
	return out, nil
}

func (f *fakeTarget) String() string { return "fake " + f.name }

// ran reports how many scripts sent to f contained s.
func (f *fakeTarget) ran(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.Contains(c, s) {
			n++
		}
	}
	return n
}

// fakeOpener hands out fake targets by name.
type fakeOpener struct {
	targets map[string]*fakeTarget
}

func (o *fakeOpener) Open(c *contracts.Contract, target string) (transports.Transport, error) {
	t, ok := o.targets[target]
	if !ok {
		return nil, fmt.Errorf("no fake target %q", target)
	}
	return t, nil
}

func (o *fakeOpener) Dialer(c *contracts.Contract, target string) (steps.Dialer, error) {
	return nil, nil
}

func parse(t *testing.T, src string) *contracts.Contract {
	t.Helper()
	c, diags := contracts.Parse("test.md", []byte(src), contracts.Options{})
	if diags.HasErrors() || c == nil {
		t.Fatalf("contract does not load:\n%v", diags.Err())
	}
	return c
}

// recorder is a notifier that keeps every message.
type recorder struct {
	mu   sync.Mutex
	msgs []string
	all  []notify.Message
	fail bool
	// before, when set, is called before each delivery.
	before func()
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Notify(ctx context.Context, m notifyMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.before != nil {
		r.before()
	}
	if r.fail {
		return fmt.Errorf("recorder is down")
	}
	r.msgs = append(r.msgs, m.Kind+": "+m.Text)
	r.all = append(r.all, m)
	return nil
}

// since returns the messages delivered after the first n.
func (r *recorder) since(n int) []notify.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Message(nil), r.all[n:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		k, _, _ := strings.Cut(m, ":")
		out = append(out, k)
	}
	return out
}

type notifyMessage = notify.Message

// dirStore opens the state dir dir as a store.
func dirStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runOnPool runs c once through the real transports of pool with a fresh
// engine (a state dir of its own, no wait for a grace), as a new process
// would; opts adds to the engine's options.
func runOnPool(t *testing.T, pool *transports.Pool, c *contracts.Contract, opts Options) *Report {
	t.Helper()
	opts.StateDir, opts.Opener = t.TempDir(), PoolOpener{Pool: pool}
	opts.Sleep = func(context.Context, time.Duration) error { return nil }
	eng, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := eng.Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// localPool is a transport pool closed when the test ends.
func localPool(t *testing.T, opts transports.PoolOptions) *transports.Pool {
	pool := transports.NewPool(opts)
	t.Cleanup(func() { pool.Close() })
	return pool
}
