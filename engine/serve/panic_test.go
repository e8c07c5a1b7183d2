package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/wait"
	"github.com/contractd/contractd/transports"
	"github.com/prometheus/client_golang/prometheus"
)

// panicOpener is the engine's opener with a fault: opening a target for
// the named contract panics, inside the goroutine the engine starts for
// the stage — the kind of panic no recover in the daemon's own goroutines
// could catch.
type panicOpener struct {
	engine.Opener
	contract string
}

func (o panicOpener) Open(c *contracts.Contract, target string) (transports.Transport, error) {
	if c.Name == o.contract {
		panic("injected fault: opening " + target + " for " + c.Name)
	}
	return o.Opener.Open(c, target)
}

// A panic in one contract's run is that run's engine failure: logged with
// its stack, counted, in its status and its history. The daemon keeps
// answering and the other contract keeps its schedule.
func TestAPanicInOneContractsRunNeverStopsTheDaemon(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "steady", "1", "1s", true)
	writeContract(t, dir, "boom", "1", "1h", true)
	pool := transports.NewPool(transports.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	logs := &logBuf{}
	eng, err := engine.New(engine.Options{StateDir: state, Opener: panicOpener{Opener: engine.PoolOpener{Pool: pool}, contract: "boom"}, Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: eng, Logf: logs.logf})

	wait.For(h.t, "boom's on_start run to fail", func() bool { return h.status("boom").LastResult == ResultFailed })
	okRuns := func() float64 { v, _ := h.metric(`contractd_runs_total{contract="steady",result="ok"}`); return v }
	after := okRuns()
	wait.For(h.t, "3 more runs of steady after boom's panic", func() bool { return okRuns() >= after+3 })

	if v, ok := h.metric(`contractd_run_panics_total{contract="boom"}`); !ok || v != 1 {
		t.Errorf("contractd_run_panics_total{boom} = %v (present %t), want 1", v, ok)
	}
	if v, ok := h.metric(`contractd_run_panics_total{contract="steady"}`); !ok || v != 0 {
		t.Errorf("contractd_run_panics_total{steady} = %v (present %t), want 0 from the start, so rate() works", v, ok)
	}
	st := h.status("boom")
	if st.LastResult != ResultFailed || st.ConsecutiveFailures != 1 || !strings.Contains(st.LastError, "engine panic in stage local: injected fault") {
		t.Errorf("boom's status %+v; want one failed run naming the panic", st)
	}
	if st := h.status("steady"); st.LastResult != ResultOK || st.ConsecutiveFailures != 0 {
		t.Errorf("steady's status %+v; want ok", st)
	}
	hist, err := openStore(t, state).History("boom", 0)
	if err != nil || len(hist) != 1 || !strings.HasPrefix(hist[0].Interrupted, "engine panic in stage local") {
		t.Errorf("boom's history %+v (%v); want its run, interrupted by the panic", hist, err)
	}
	if !logs.contains("injected fault") || !logs.contains("goroutine ") {
		t.Errorf("the log has no panic with its stack:\n%s", strings.Join(logs.lines, "\n"))
	}
	resp, err := http.Get(h.base + "/healthz")
	if err != nil {
		t.Fatalf("the daemon stopped answering: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d after a run panicked", resp.StatusCode)
	}
}

// A contract file that makes the loader panic is kept out, with a
// diagnostic; the daemon loads the rest and keeps running them.
func TestALoaderPanicKeepsTheFileOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeContract(t, dir, "fine", "1", "1s", true)
	bad := writeContract(t, dir, "crasher", "1", "1h", true)
	log := newRunLog()
	load := ContractLoader(contracts.Options{})
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(),
		Load: func(path string) (*contracts.Contract, contracts.Diagnostics) {
			if path == bad {
				panic("injected fault in the parser")
			}
			return load(path)
		},
		Runner: &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
			log.begin(c)
			defer log.end(c)
			return report(c), nil
		}}})
	wait.For(h.t, "2 runs of fine", func() bool { return log.count("fine") >= 2 })
	list := h.list()
	var kept []string
	for _, r := range list.Rejected {
		if r.Path == bad {
			kept = r.Diagnostics
		}
	}
	if len(kept) != 1 || !strings.Contains(kept[0], "the loader panicked") || !strings.Contains(kept[0], "injected fault in the parser") {
		t.Errorf("rejected %+v; want %s kept out, saying the loader panicked", list.Rejected, bad)
	}
	if !h.logs.contains("goroutine ") {
		t.Error("the loader's panic is not in the log with its stack")
	}
}

// The probe values a contract exports carry labels from the contract; one
// that is not valid UTF-8 leaves its series out instead of panicking in
// the scrape's goroutine.
func TestProbeValuesWithALabelThatIsNotUTF8(t *testing.T) {
	p := &probeValues{last: map[string]*engine.Report{}}
	p.set("c", &engine.Report{Stages: []*engine.StageReport{
		{ID: "lanes[\xff]", Agent: "a", Steps: []*engine.StepReport{{ID: "s", Metrics: map[string]float64{"disk": 1}}}},
		{ID: "fine", Agent: "a", Steps: []*engine.StepReport{{ID: "s", Metrics: map[string]float64{"disk": 2}}}},
	}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got = append(got, m.GetGauge().GetValue())
		}
	}
	if len(got) != 1 || got[0] != 2 {
		t.Errorf("gathered values %v; want the valid series' only", got)
	}
}
