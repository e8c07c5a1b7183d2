package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// stageRun is one stage (or one for_each expansion of it) during a run.
type stageRun struct {
	stage   *contracts.Stage
	id      string
	agent   string
	target  string
	item    map[string]any
	vars    map[string]string
	varsEnv map[string]any // vars as expressions see them, built once per stage
	secrets []string       // values redacted from everything the stage keeps
	shared  map[string]any // engine functions, the previous snapshot, the gates' steps
	report  *StageReport
	obs     []*steps.Observation
	byID    map[string]*steps.Observation
	env     map[string]any // the stage environment actions are evaluated in
}

// expandStages turns the contract's stages into runs, one per for_each item.
func expandStages(c *contracts.Contract) []*stageRun {
	var out []*stageRun
	for _, st := range c.Stages {
		if st.ForEach == "" {
			out = append(out, newStageRun(c, st, st.ID, nil))
			continue
		}
		for i, item := range c.ForEach[st.ForEach] {
			out = append(out, newStageRun(c, st, fmt.Sprintf("%s[%s]", st.ID, itemName(item, i)), item))
		}
	}
	return out
}

func itemName(item map[string]any, i int) string {
	for _, k := range []string{"name", "id", "unit", "agent"} {
		if v, ok := item[k]; ok {
			return fmt.Sprint(v)
		}
	}
	return fmt.Sprint(i)
}

func newStageRun(c *contracts.Contract, st *contracts.Stage, id string, item map[string]any) *stageRun {
	vars := make(map[string]string, len(c.Vars)+len(item))
	for k, v := range c.Vars {
		vars[k] = v
	}
	for k, v := range item {
		vars[k] = fmt.Sprint(v)
		vars["item."+k] = fmt.Sprint(v)
	}
	target := expandAttr(st.On, vars)
	if target == "" {
		target = "local"
	}
	sr := &stageRun{
		stage: st, id: id, item: item, vars: vars, varsEnv: stringMap(vars), target: target,
		agent: expandAttr(st.Agent, vars),
		byID:  map[string]*steps.Observation{},
	}
	sr.report = &StageReport{ID: id, Title: st.Title, Agent: sr.agent, Gate: st.Gate, Item: item, Steps: []*StepReport{}}
	return sr
}

// expandAttr expands a stage attribute: ${key}, or $key, which heading
// attributes need because braces end them.
func expandAttr(s string, vars map[string]string) string {
	if rest, ok := strings.CutPrefix(s, "$"); ok && !strings.HasPrefix(rest, "{") {
		if v, ok := vars[rest]; ok {
			return v
		}
	}
	return steps.Expand(s, vars)
}

// targetName is the target a step runs on.
func (sr *stageRun) targetName(step *contracts.Step) string {
	if step.On != "" {
		return steps.Expand(step.On, sr.vars)
	}
	return sr.target
}

// runStage runs a stage's steps in order. Consecutive exec steps on one
// target travel as one batch; once a target is unreachable, later steps on
// it are unreachable too without another attempt.
func (e *Engine) runStage(ctx context.Context, c *contracts.Contract, sr *stageRun, shared map[string]any, secrets map[string]string) {
	sr.secrets = secretValues(secrets)
	sr.shared = shared
	sr.report.Target = e.describeTarget(c, sr.target)
	unreachable := map[string]error{}
	stepsList := sr.stage.Steps
	for i := 0; i < len(stepsList); {
		step := stepsList[i]
		tgt := sr.targetName(step)
		if !steps.IsExec(step.Kind) {
			sr.record(e, c, step, e.probeNative(ctx, c, sr, step, secrets), shared)
			i++
			continue
		}
		j := i + 1
		for j < len(stepsList) && steps.IsExec(stepsList[j].Kind) && sr.targetName(stepsList[j]) == tgt {
			j++
		}
		batch := stepsList[i:j]
		obs := e.execBatch(ctx, c, sr, tgt, batch, secrets, unreachable)
		for k, step := range batch {
			sr.record(e, c, step, obs[k], shared)
		}
		i = j
	}
	sr.finish()
}

func (e *Engine) stepTimeout(step *contracts.Step) time.Duration {
	if step.Timeout > 0 {
		return step.Timeout
	}
	return e.opts.StepTimeout
}

func (e *Engine) execBatch(ctx context.Context, c *contracts.Contract, sr *stageRun, tgt string, batch []*contracts.Step, secrets map[string]string, unreachable map[string]error) []*steps.Observation {
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
	tr, err := e.opts.Opener.Open(c, tgt)
	if err != nil {
		unreachable[tgt] = fmt.Errorf("%w: %v", transports.ErrUnreachable, err)
		return fail(unreachable[tgt])
	}
	cmds := make([]transports.Command, len(batch))
	var total time.Duration
	for k, st := range batch {
		cmds[k] = steps.ExecCommand(st, sr.vars, secrets, e.stepTimeout(st))
		total += cmds[k].Timeout
	}
	// The batch's own deadline covers every step's timeout plus the cost of
	// reaching the target, so one hung step cannot starve the others.
	bctx, cancel := context.WithTimeout(ctx, total+15*time.Second)
	defer cancel()
	start := time.Now()
	var results []transports.Result
	if len(cmds) == 1 {
		var r transports.Result
		r, err = tr.Exec(bctx, cmds[0])
		results = []transports.Result{r}
	} else {
		results, err = tr.ExecBatch(bctx, cmds)
	}
	if err != nil {
		unreachable[tgt] = err
		if len(results) != len(batch) {
			return fail(err)
		}
		// The session died mid-batch: the steps that finished are real
		// observations; the rest did not run and are unreachable.
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
		var r transports.Result
		if k < len(results) {
			r = results[k]
		}
		if r.Duration == 0 && len(batch) == 1 {
			r.Duration = time.Since(start)
		}
		out[k] = steps.FromResult(st, r, nil)
	}
	return out
}

func (e *Engine) probeNative(ctx context.Context, c *contracts.Contract, sr *stageRun, step *contracts.Step, secrets map[string]string) *steps.Observation {
	probe, ok := steps.Probers[step.Kind]
	if !ok {
		o := steps.FromResult(step, transports.Result{ExitCode: 1, Stderr: "unknown step kind " + step.Kind}, nil)
		return o
	}
	var d steps.Dialer
	vantage := steps.Expand(step.Via, sr.vars)
	if vantage != "" {
		var err error
		if d, err = e.opts.Opener.Dialer(c, vantage); err != nil {
			return steps.FromResult(step, transports.Result{}, fmt.Errorf("%w: %v", transports.ErrUnreachable, err))
		}
	}
	sctx, cancel := context.WithTimeout(ctx, e.stepTimeout(step))
	defer cancel()
	return probe(sctx, step, steps.WithSecrets(sr.vars, secrets), d)
}

// record evaluates a step's table in the environment of everything seen so
// far and adds it to the stage report.
func (sr *stageRun) record(e *Engine, c *contracts.Contract, step *contracts.Step, o *steps.Observation, shared map[string]any) {
	redactObservation(o, sr.secrets)
	env := sr.stepEnv(o, shared)
	steps.Evaluate(step, o, env)
	sr.obs = append(sr.obs, o)
	sr.byID[step.ID] = o
	rep := &StepReport{
		ID: step.ID, Kind: step.Kind, Severity: o.Severity,
		DurationMS: o.Duration.Milliseconds(),
		Findings:   append([]string{}, o.Findings...),
		HTTPStatus: o.HTTPStatus,
		Values:     tableValues(step, o),
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
	rep.Stdout = truncate(o.Result.Stdout, 2048)
	rep.Stderr = truncate(o.Result.Stderr, 2048)
	sr.report.Steps = append(sr.report.Steps, rep)
	if e.opts.Progress != nil {
		e.opts.Progress(Event{Stage: sr.id, Step: step.ID, Severity: o.Severity, Duration: o.Duration})
	}
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… [%d bytes]", len(s))
}

// stepEnv is the expression environment for one step: its own values at top
// level, earlier steps (this stage's and the gates') by id, vars, item.
func (sr *stageRun) stepEnv(o *steps.Observation, shared map[string]any) map[string]any {
	env := make(map[string]any, len(o.Values)+len(shared)+len(sr.byID)+4)
	for k, v := range shared {
		env[k] = v
	}
	for id, prev := range sr.byID {
		env[id] = prev.Values
	}
	for k, v := range o.Values {
		env[k] = v
	}
	env["vars"] = sr.varsEnv
	if sr.item != nil {
		env["item"] = sr.item
	}
	return env
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// finish settles the stage's severity and builds the environment its
// actions are evaluated in: every step's fields merged (later steps win),
// every step by id, and the stage's severity.
func (sr *stageRun) finish() {
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
	env := map[string]any{}
	for k, v := range sr.shared {
		env[k] = v
	}
	for _, o := range sr.obs {
		for k, v := range o.Values {
			env[k] = v
		}
	}
	for id, o := range sr.byID {
		env[id] = o.Values
	}
	// The engine's functions win over step fields of the same name, so
	// `restarts("abiba", "1h")` works in a stage whose pm2 step reports a
	// `restarts` field; that field stays reachable as `pm2.restarts`.
	for k, v := range sr.shared {
		if _, fn := v.(func(string, string) int); fn {
			env[k] = v
		}
	}
	env["severity"] = sev.String()
	env["vars"] = sr.varsEnv
	if sr.item != nil {
		env["item"] = sr.item
	}
	sr.env = env
}

// skip records a stage that did not run.
func (sr *stageRun) skip(reason string) {
	sr.report.Severity = contracts.SeveritySkipped
	sr.report.Status = StatusSkipped
	sr.report.Reason = reason
	sr.env = map[string]any{"severity": "skipped"}
}

// runStages runs gate stages first, in order, then every other stage
// concurrently (at most Parallel at once). A gate that is not healthy or
// degraded skips every stage after it in the contract.
func (e *Engine) runStages(ctx context.Context, c *contracts.Contract, runs []*stageRun, secrets map[string]string, base map[string]any) (gateOK bool, downGate string) {
	shared := make(map[string]any, len(base))
	for k, v := range base {
		shared[k] = v
	}
	gateOK = true
	gateIndex := -1
	for i, sr := range runs {
		if !sr.stage.Gate {
			continue
		}
		if !gateOK {
			sr.skip("gate: " + downGate)
			continue
		}
		e.runStage(ctx, c, sr, shared, secrets)
		for id, o := range sr.byID {
			shared[id] = o.Values
		}
		if s := sr.report.Severity; s != contracts.SeverityHealthy && s != contracts.SeverityDegraded {
			gateOK, downGate, gateIndex = false, sr.id, i
		}
	}
	release := e.releaser(c, runs)
	sem := make(chan struct{}, e.opts.Parallel)
	var wg sync.WaitGroup
	for i, sr := range runs {
		if sr.stage.Gate {
			continue
		}
		if !gateOK && i > gateIndex {
			sr.skip("gate: " + downGate)
			continue
		}
		wg.Add(1)
		go func(sr *stageRun) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				sr.skip("run deadline")
				return
			}
			defer func() { <-sem }()
			e.runStage(ctx, c, sr, shared, secrets)
			release(sr)
		}(sr)
	}
	wg.Wait()
	return gateOK, downGate
}

// targets lists every target a stage reaches: its own, its steps' on= and
// their via= vantage points.
func (sr *stageRun) targets() []string {
	set := map[string]bool{sr.target: true}
	for _, st := range sr.stage.Steps {
		set[sr.targetName(st)] = true
		if st.Via != "" {
			set[steps.Expand(st.Via, sr.vars)] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	return out
}

// releaser returns what to call when a stage is done: with ReleaseTargets
// and an opener that can, it closes each target's connection after the
// last stage that uses it.
func (e *Engine) releaser(c *contracts.Contract, runs []*stageRun) func(*stageRun) {
	rel, ok := e.opts.Opener.(Releaser)
	if !e.opts.ReleaseTargets || !ok {
		return func(*stageRun) {}
	}
	var mu sync.Mutex
	uses := map[string]int{}
	for _, sr := range runs {
		if sr.stage.Gate {
			continue
		}
		for _, t := range sr.targets() {
			uses[t]++
		}
	}
	return func(sr *stageRun) {
		mu.Lock()
		var done []string
		for _, t := range sr.targets() {
			if uses[t]--; uses[t] == 0 {
				done = append(done, t)
			}
		}
		mu.Unlock()
		for _, t := range done {
			rel.Release(c, t)
		}
	}
}

// describeTarget renders a target's chain, e.g. "ssh root@h → pct 112".
func (e *Engine) describeTarget(c *contracts.Contract, name string) string {
	var parts []string
	seen := map[string]bool{}
	for name != "" && name != "local" && !seen[name] {
		seen[name] = true
		t, ok := c.Targets[name]
		if !ok {
			parts = append(parts, name+"?")
			break
		}
		switch t.Kind() {
		case "ssh":
			parts = append(parts, "ssh "+t.SSH)
		case "pct":
			parts = append(parts, fmt.Sprintf("pct %d", t.PCT))
		case "docker":
			parts = append(parts, "docker "+t.Docker)
		default:
			parts = append(parts, "local")
		}
		name = t.Via
	}
	if len(parts) == 0 {
		return "local"
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, " → ")
}

// redactObservation replaces secret values in everything a step kept:
// output, findings and every string the tables read.
func redactObservation(o *steps.Observation, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	o.Result.Stdout = transports.Redact(o.Result.Stdout, secrets)
	o.Result.Stderr = transports.Redact(o.Result.Stderr, secrets)
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
