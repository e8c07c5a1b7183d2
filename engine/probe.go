package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// probed is what the probe phase saw: every stage with what its steps
// observed and its severity, and the gates' verdict.
type probed struct {
	stages   []*stageRun
	gateOK   bool   // every gate was healthy or degraded
	downGate string // else the first gate that was not: every stage after it is skipped
}

// reports lists the stages' reports in contract order.
func (p probed) reports() []*StageReport {
	out := make([]*StageReport, 0, len(p.stages))
	for _, sr := range p.stages {
		out = append(out, sr.report)
	}
	return out
}

// probe is the first phase: gate stages first, in order, then every other
// stage concurrently (at most Parallel at once). A gate that is not healthy
// or degraded skips every stage after it in the contract; one stage
// failing, hanging or unreachable never blocks another. The gates' steps
// go into r.gateValues before any other stage starts, so every later
// expression sees them.
//
// The stage goroutines share nothing but the run's context: each writes
// its own stageRun only, and reads the ledger through restarts(), which
// takes r.mu for verify's sake.
func (r *run) probe(ctx context.Context, stages []*stageRun) probed {
	r.enter("probe", nil)
	p := probed{stages: stages, gateOK: true}
	gateIndex := -1
	for i, sr := range stages {
		if !sr.stage.Gate {
			continue
		}
		if !p.gateOK {
			sr.skip("gate: " + p.downGate)
			continue
		}
		r.probeStage(ctx, sr)
		for _, o := range sr.obs {
			r.gateValues[o.StepID] = o.Values
		}
		if s := sr.report.Severity; s != contracts.SeverityHealthy && s != contracts.SeverityDegraded {
			p.gateOK, p.downGate, gateIndex = false, sr.id, i
		}
	}
	release := r.releaser(stages)
	sem := make(chan struct{}, r.e.opts.Parallel)
	var wg sync.WaitGroup
	for i, sr := range stages {
		if sr.stage.Gate {
			continue
		}
		if !p.gateOK && i > gateIndex {
			sr.skip("gate: " + p.downGate)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.catch("stage " + sr.id)
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				sr.skip("run deadline")
				return
			}
			defer func() { <-sem }()
			r.probeStage(ctx, sr)
			release(sr)
		}()
	}
	wg.Wait()
	r.rethrow()
	return p
}

// probeStage runs a stage's steps in order. Consecutive exec steps on one
// target travel as one batch; once a target is unreachable, later steps on
// it are unreachable too without another attempt.
func (r *run) probeStage(ctx context.Context, sr *stageRun) {
	sr.report.Target = r.c.Chain(sr.target)
	if r.e.opts.Recordings != nil {
		r.replayStage(ctx, sr)
		return
	}
	unreachable := map[string]error{}
	list := sr.stage.Steps
	for i := 0; i < len(list); {
		step := list[i]
		if !steps.IsExec(step.Kind) {
			sr.record(r, step, r.probeNative(ctx, sr, step))
			i++
			continue
		}
		tgt := sr.targetName(step)
		j := i + 1
		for j < len(list) && steps.IsExec(list[j].Kind) && sr.targetName(list[j]) == tgt {
			j++
		}
		batch := list[i:j]
		for k, o := range r.execBatch(ctx, sr, tgt, batch, unreachable) {
			sr.record(r, batch[k], o)
		}
		i = j
	}
	sr.finish(r)
}

// replayStage answers each step of sr from its recording, through its
// kind's Replay: what its probe would have seen, with nothing sent to a
// target. As in a batch, once an exec step's target is unreachable the
// later steps on it are too.
func (r *run) replayStage(ctx context.Context, sr *stageRun) {
	unreachable := map[string]bool{}
	for _, step := range sr.stage.Steps {
		exec := steps.IsExec(step.Kind)
		p, _ := ProbeFrom(r.probeContext(ctx, sr, step))
		rec := r.e.opts.Recordings.Recording(p, step.ID)
		tgt := sr.targetName(step)
		var o *steps.Observation
		switch {
		case rec == nil:
			o = steps.FromResult(step, transports.Result{}, fmt.Errorf("%w: no recorded output", transports.ErrUnreachable))
		case exec && unreachable[tgt]:
			o = steps.FromResult(step, transports.Result{}, fmt.Errorf("%w: %s: the session ended before the step finished", transports.ErrUnreachable, tgt))
		default:
			o = steps.Replay(step, rec)
		}
		if o.Err != nil && exec {
			unreachable[tgt] = true
		}
		sr.record(r, step, o)
	}
	sr.finish(r)
}

// execBatch runs consecutive exec steps on one target as one batch. A
// transport error makes every step that did not finish unreachable, however
// many steps the batch holds; steps that finished before a session died
// keep their results.
func (r *run) execBatch(ctx context.Context, sr *stageRun, tgt string, batch []*contracts.Step, unreachable map[string]error) []*steps.Observation {
	out := make([]*steps.Observation, len(batch))
	fail := func(err error) []*steps.Observation {
		for k, st := range batch {
			out[k] = steps.FromResult(st, transports.Result{}, err)
		}
		return out
	}
	if err, ok := unreachable[tgt]; ok {
		return fail(err)
	}
	tr, err := r.e.opts.Opener.Open(r.c, tgt)
	if err != nil {
		unreachable[tgt] = fmt.Errorf("%w: %v", transports.ErrUnreachable, err)
		return fail(unreachable[tgt])
	}
	cmds := make([]transports.Command, len(batch))
	for k, st := range batch {
		cmds[k] = steps.ExecCommand(st, sr.vars, r.secrets, r.e.stepTimeout(st))
	}
	bctx, cancel := context.WithTimeout(ctx, batchDeadline(cmds))
	defer cancel()
	bctx = r.probeContext(bctx, sr, batch...)
	start := time.Now()
	var results []transports.Result
	if len(cmds) == 1 {
		var res transports.Result
		if res, err = tr.Exec(bctx, cmds[0]); err != nil {
			res.NotRun = true // one step: a transport error means it did not run
		}
		results = []transports.Result{res}
	} else {
		results, err = tr.ExecBatch(bctx, cmds)
	}
	if err != nil {
		if !errors.Is(err, transports.ErrUnreachable) {
			err = fmt.Errorf("%w: %v", transports.ErrUnreachable, err)
		}
		unreachable[tgt] = err
		if len(results) != len(batch) {
			return fail(err)
		}
		for k, st := range batch {
			if results[k].NotRun {
				out[k] = steps.FromResult(st, transports.Result{}, err)
			} else {
				out[k] = steps.FromResult(st, results[k], nil)
			}
		}
		return out
	}
	for k, st := range batch {
		var res transports.Result
		if k < len(results) {
			res = results[k]
		}
		if res.Duration == 0 && len(batch) == 1 {
			res.Duration = time.Since(start)
		}
		if res.NotRun && !res.TimedOut {
			// The session ended before this step did, or before it
			// started: nothing was observed of it, so it is unreachable,
			// never a failed step with exit -1.
			out[k] = steps.FromResult(st, transports.Result{Note: res.Note}, fmt.Errorf("%w: %s: the session ended before the step finished", transports.ErrUnreachable, tgt))
			continue
		}
		out[k] = steps.FromResult(st, res, nil)
	}
	return out
}

// probeNative runs a step the engine probes itself: an http or tcp step
// from an ssh target's vantage point when it has via=, an agent step's
// session with its stage's briefing (steps.WithSession).
func (r *run) probeNative(ctx context.Context, sr *stageRun, step *contracts.Step) *steps.Observation {
	probe := steps.Kinds[step.Kind].Probe
	if probe == nil {
		return steps.FromResult(step, transports.Result{ExitCode: 1, Stderr: "unknown step kind " + step.Kind}, nil)
	}
	// The opener answers for the engine's own host too ("local": nil, a
	// direct dial, from PoolOpener), so a replaying opener can answer
	// every native probe.
	via := "local"
	if step.Via != "" {
		via = contracts.ExpandAttr(step.Via, sr.vars)
	}
	d, err := r.e.opts.Opener.Dialer(r.c, via)
	if err != nil {
		return steps.FromResult(step, transports.Result{}, fmt.Errorf("%w: %v", transports.ErrUnreachable, err))
	}
	sctx, cancel := context.WithTimeout(ctx, r.e.stepTimeout(step))
	defer cancel()
	sctx = r.probeContext(sctx, sr, step)
	sctx = steps.WithSession(sctx, steps.Session{Contract: r.c.Name, Stage: sr.id, Agent: sr.agent, Secrets: r.secrets, Brief: r.briefer(sr, step)})
	return probe(sctx, step, steps.WithSecrets(sr.vars, r.secrets), d)
}

// briefer renders the briefing of sr's stage for a session of step whose
// report goes to a path of the session's: `contractd brief --stage` as of
// now, its report section narrowed to step (Briefing.ForReport). It is
// called only by the kinds that brief a session.
func (r *run) briefer(sr *stageRun, step *contracts.Step) func(string) ([]byte, error) {
	return func(reportPath string) ([]byte, error) {
		b, err := Brief(r.c, sr.stage.ID, r.st, r.e.opts.Clock.Now())
		if err != nil {
			return nil, err
		}
		b.ForReport(step.ID, reportPath)
		var out bytes.Buffer
		err = WriteBrief(&out, b)
		return out.Bytes(), err
	}
}

// probeContext names the stage and steps a probe is for in ctx (Probe),
// keeping the Verify mark verify set.
func (r *run) probeContext(ctx context.Context, sr *stageRun, list ...*contracts.Step) context.Context {
	p, _ := ProbeFrom(ctx)
	p.Contract, p.Stage, p.Agent, p.Steps = r.c.Name, sr.id, sr.agent, make([]string, len(list))
	for i, st := range list {
		p.Steps[i] = st.ID
	}
	return WithProbe(ctx, p)
}

// record judges a step with its table, in the environment of everything
// seen so far, and adds it to the stage report.
func (sr *stageRun) record(r *run, step *contracts.Step, o *steps.Observation) {
	redactObservation(o, r.redact)
	steps.Evaluate(step, o, r.env(scope{stage: sr, steps: sr.obs, own: o}))
	var hostKey *transports.HostKeyError
	if errors.As(o.Err, &hostKey) {
		// Not a blip to wait out under unreachable_after: the host is not
		// the one known_hosts vouches for. Critical at once.
		o.Severity = contracts.SeverityCritical
	}
	sr.obs = append(sr.obs, o)
	rep := &StepReport{
		ID: step.ID, Kind: step.Kind, Severity: o.Severity,
		DurationMS: o.Duration.Milliseconds(),
		Findings:   append([]string{}, o.Findings...),
		HTTPStatus: o.HTTPStatus,
		Values:     tableValues(step, o),
		Metrics:    exportedValues(step, o),
	}
	if code, ok := o.Values["exit_code"].(int); ok {
		rep.ExitCode = code
	}
	if to, ok := o.Values["timed_out"].(bool); ok {
		rep.TimedOut = to
	}
	if o.Err != nil {
		rep.Error = o.Err.Error()
	}
	rep.Note = o.Result.Note
	rep.Stdout = transports.Shorten(o.Result.Stdout, 2048)
	rep.Stderr = transports.Shorten(o.Result.Stderr, 2048)
	sr.report.Steps = append(sr.report.Steps, rep)
	if r.e.opts.Progress != nil {
		r.e.opts.Progress(Event{Stage: sr.id, Step: step.ID, Severity: o.Severity, Duration: o.Duration})
	}
}

// finish settles the stage's severity and status and builds the environment
// its action conditions are evaluated in.
func (sr *stageRun) finish(r *run) {
	sev := contracts.SeverityHealthy
	allUnreachable := len(sr.obs) > 0
	for _, o := range sr.obs {
		sev = steps.Worst(sev, o.Severity)
		if o.Err == nil {
			allUnreachable = false
		}
	}
	if len(sr.obs) == 0 {
		sev = contracts.SeverityUnknown
	}
	sr.report.Severity = sev
	switch {
	case allUnreachable:
		sr.report.Status = StatusUnreachable
		sr.report.Reason = sr.obs[0].Err.Error()
	case sev == contracts.SeverityHealthy:
		sr.report.Status = StatusOK
	default:
		sr.report.Status = StatusFailed
	}
	sr.env = r.env(scope{stage: sr, steps: sr.obs, merged: true, severity: sev.String()})
}

// skip records a stage that did not run.
func (sr *stageRun) skip(reason string) {
	sr.report.Severity = contracts.SeveritySkipped
	sr.report.Status = StatusSkipped
	sr.report.Reason = reason
	sr.env = map[string]any{"severity": "skipped"}
}

// tableValues keeps the values the step's table read, for the report and `why`.
func tableValues(step *contracts.Step, o *steps.Observation) map[string]any {
	if len(step.Health) == 0 {
		return nil
	}
	m := map[string]any{}
	for _, row := range step.Health {
		if v, ok := steps.Lookup(o.Values, row.Field); ok {
			m[row.Field] = v
		}
	}
	return m
}

// exportedValues keeps the numeric values of the fields the step's table
// exports; a field that is not a number this run is left out.
func exportedValues(step *contracts.Step, o *steps.Observation) map[string]float64 {
	var m map[string]float64
	for _, row := range step.Health {
		if !row.Export {
			continue
		}
		v, ok := steps.Lookup(o.Values, row.Field)
		if !ok {
			continue
		}
		var f float64
		switch x := v.(type) {
		case int:
			f = float64(x)
		case int64:
			f = float64(x)
		case float64:
			f = x
		case bool:
			if x {
				f = 1
			}
		default:
			continue
		}
		if m == nil {
			m = map[string]float64{}
		}
		m[row.Field] = f
	}
	return m
}

// releaser returns what to call when a stage is done: with ReleaseTargets
// and an opener that can, it closes each target's connection after the
// last stage that uses it. The stages end concurrently: each target's
// count of the stages still to end is atomic, and the map of counts is
// complete before the first stage starts.
func (r *run) releaser(stages []*stageRun) func(*stageRun) {
	rel, ok := r.e.opts.Opener.(Releaser)
	if !r.e.opts.ReleaseTargets || !ok {
		return func(*stageRun) {}
	}
	uses := map[string]*atomic.Int32{}
	for _, sr := range stages {
		if sr.stage.Gate {
			continue
		}
		for _, t := range sr.targets() {
			if uses[t] == nil {
				uses[t] = new(atomic.Int32)
			}
			uses[t].Add(1)
		}
	}
	return func(sr *stageRun) {
		for _, t := range sr.targets() {
			if uses[t].Add(-1) == 0 {
				rel.Release(r.c, t)
			}
		}
	}
}

// redactObservation replaces secret values in everything a step kept:
// output, findings, why its answer was invalid and every string the
// tables read.
func redactObservation(o *steps.Observation, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	o.Result.Stdout = transports.Redact(o.Result.Stdout, secrets)
	o.Result.Stderr = transports.Redact(o.Result.Stderr, secrets)
	o.Invalid = transports.Redact(o.Invalid, secrets)
	for i, f := range o.Findings {
		o.Findings[i] = transports.Redact(f, secrets)
	}
	for k, v := range o.Values {
		o.Values[k] = redactValue(v, secrets)
	}
}

func redactValue(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		return transports.Redact(x, secrets)
	case map[string]any:
		for k, e := range x {
			x[k] = redactValue(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = redactValue(e, secrets)
		}
	}
	return v
}
