package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/notify"
	"github.com/contractd/contractd/fixtures"
	"github.com/contractd/contractd/fixtures/agents"
	"github.com/contractd/contractd/fixtures/mesh"
	"github.com/contractd/contractd/transports"
)

// cmdDemo starts the fixture mesh on loopback with local transports only
// (no root, no Docker, no sshd), runs zulip-health and the a2a-selfheal
// watchdog over it, injects faults, and shows detection, the guarded
// repair, the verified recovery and a report-only agent left alone.
func (m *Main) cmdDemo(ctx context.Context, args []string) int {
	fs := m.flags("demo")
	keep := fs.String("dir", "", "keep the mesh and state in `DIR` (default: a temporary directory, removed)")
	fixture := fs.String("fixture", "", "a fixture `BINARY` to run the mesh with (default: the fake agents built into contractd)")
	rest, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(rest) != 0 {
		m.errorf("usage: contractd demo %s", commands["demo"].args)
		return exitUsage
	}
	d := &demo{m: m, w: m.Stdout, start: time.Now()}
	if err := d.run(ctx, *keep, *fixture); err != nil {
		m.errorf("demo: %v", err)
		return exitFailed
	}
	return exitOK
}

// demoAgent is the hidden command that runs a fake agent of the demo's
// mesh (fixtures/agents) from this binary: `contractd demo-agent pi …`.
const demoAgent = "demo-agent"

// cmdDemoAgent runs one fixture agent or stand-in (pi, pm2, systemctl …)
// for the demo's mesh.
func (m *Main) cmdDemoAgent(ctx context.Context, args []string) int {
	self, err := os.Executable()
	if err != nil {
		m.errorf("%s: %v", demoAgent, err)
		return exitFailed
	}
	return agents.Main(ctx, append([]string{demoAgent}, args...), agents.Env{
		Stdin: os.Stdin, Stdout: m.Stdout, Stderr: m.Stderr, Getenv: m.Getenv,
		Self: []string{self, demoAgent},
	})
}

type demo struct {
	m     *Main
	w     io.Writer
	start time.Time
	mesh  *mesh.Mesh
	eng   *engine.Engine
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.w, "\n[%5.1fs] ▶ %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context, dir, fixture string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "contractd-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	d.say("starting the fixture mesh on loopback (pi/Abiba, koby, Tanko dsh-web, Agent Zero A2A, Zulip API, a wedge-able A2A lane)")
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	mdir := filepath.Join(dir, "mesh")
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return err
	}
	mopts := mesh.Options{Dir: mdir, Binary: fixture, Transport: "local"}
	if fixture == "" {
		// The fake agents are built into this binary (demo-agent): an
		// installed contractd runs its demo with no source tree and no
		// toolchain.
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this executable: %w", err)
		}
		mopts.Binary, mopts.BinaryArgs = self, []string{demoAgent}
	}
	mm, err := mesh.Start(mctx, mopts)
	if err != nil {
		return fmt.Errorf("start mesh: %w", err)
	}
	defer mm.Stop()
	d.mesh = mm
	// The local transport's scripts inherit this environment: the mesh's
	// pm2 and systemctl stand-ins first on PATH, its secrets set.
	for _, kv := range mm.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	inv := filepath.Join(dir, "inventory.yaml")
	vars, err := mm.Vars()
	if err != nil {
		return err
	}
	if err := mm.WriteInventory(inv, map[string]string{}); err != nil {
		return err
	}
	zh, err := loadEmbedded("zulip-health.md", contracts.Options{Inventory: inv})
	if err != nil {
		return err
	}
	wd, err := loadEmbedded("a2a-selfheal.md", contracts.Options{Vars: map[string]string{"dispatch_url": vars["dispatch_url"]}})
	if err != nil {
		return err
	}
	pool := transports.NewPool(transports.PoolOptions{})
	defer pool.Close()
	// The engine's records as the journal has them (no time: the demo's
	// own clock heads each step), indented under the step.
	log := slog.New(slog.NewTextHandler(newIndent(d.w), &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == "run_id") {
				return slog.Attr{}
			}
			return a
		},
	}))
	d.eng, err = engine.New(engine.Options{
		StateDir: filepath.Join(dir, "state"), Opener: engine.PoolOpener{Pool: pool},
		Getenv: os.Getenv, Log: log, GraceOverride: 2 * time.Second,
		NotifyDeps: notify.Deps{Logger: log, Getenv: os.Getenv},
	})
	if err != nil {
		return err
	}

	d.say("run 1: everything healthy")
	if _, err := d.runOnce(ctx, zh); err != nil {
		return err
	}

	d.say("fault: Abiba's response pipeline blocks with 3 replies pending; koby (report-only) gets stuck")
	if err := mm.Block(ctx); err != nil {
		return err
	}
	if err := mm.SetKoby(ctx, map[string]any{"stuck": true}); err != nil {
		return err
	}
	d.say("run 2: detection, the guarded repair of Abiba and its verification after the grace; koby is reported, never repaired")
	rep, err := d.runOnce(ctx, zh)
	if err != nil {
		return err
	}
	if n := mm.PiRestarts(); n != 1 {
		return fmt.Errorf("expected exactly one restart of abiba-zulip, saw %d", n)
	}
	if n := mm.KobyRestarts(); n != 0 {
		return fmt.Errorf("koby was restarted %d times; report-only agents are never repaired", n)
	}
	for _, a := range rep.Actions {
		// Restarted a moment ago, abiba is degraded (uptime ≤ 60 s) while
		// its pipeline has cleared: undecided until a later run sees it
		// healthy, or remediated when the grace outlasts that rule.
		if a.Status == engine.ActionRan && a.Verify != guard.Remediated && a.Verify != guard.Undecided {
			return fmt.Errorf("repair %q did not clear its condition: %s", a.Action, a.Verify)
		}
	}
	d.say("%s; koby: %d restarts", verified(rep), mm.KobyRestarts())

	d.say("run 3: the pipeline blocks again inside the 300 s debounce → the restart is pending, nothing runs")
	if err := mm.Block(ctx); err != nil {
		return err
	}
	if _, err := d.runOnce(ctx, zh); err != nil {
		return err
	}
	if n := mm.PiRestarts(); n != 1 {
		return fmt.Errorf("debounce broken: %d restarts", n)
	}
	if err := mm.SetPi(ctx, map[string]any{"reset": true}); err != nil {
		return err
	}

	d.say("a2a-selfheal run 1: the lane is healthy")
	if _, err := d.runOnce(ctx, wd); err != nil {
		return err
	}
	d.say("fault: SIGSTOP the lane's worker — /health still says running, message/send hangs (the wedge)")
	if err := mm.Wedge(); err != nil {
		return err
	}
	d.say("a2a-selfheal run 2: the dispatch probe times out (15 s), and the lane is restarted within its budget")
	rep, err = d.runOnce(ctx, wd)
	if err != nil {
		return err
	}
	if n := mm.DispatchRestarts(); n != 1 {
		return fmt.Errorf("expected one restart of the wedged lane, saw %d", n)
	}
	d.say("%s", verified(rep))

	d.say("recovery: koby comes unstuck on its own; run 4")
	if err := mm.SetKoby(ctx, map[string]any{"stuck": false}); err != nil {
		return err
	}
	if rep, err = d.runOnce(ctx, zh); err != nil {
		return err
	}
	d.say("%s", resolved(rep))

	msgs, err := mm.Messages()
	if err != nil {
		return err
	}
	d.say("what the Zulip stand-in received (%d messages):", len(msgs))
	for _, msg := range msgs {
		say(d.w, "    %s\n", firstLine(msg.Content))
	}
	d.say("done in %.1fs: %d repairs of Abiba and %d of the lane ran within the guards; koby (report-only) was restarted %d times",
		time.Since(d.start).Seconds(), mm.PiRestarts(), mm.DispatchRestarts(), mm.KobyRestarts())
	return nil
}

// verified says what the verification of a run's repairs concluded, as
// the report has it.
func verified(rep *engine.Report) string {
	var out []string
	for _, a := range rep.Actions {
		if a.Status == engine.ActionRan || a.Status == engine.ActionFailed {
			out = append(out, fmt.Sprintf("%s of %s: %s", a.Action, a.Agent, nonEmpty(a.Verify, "not verified")))
		}
	}
	if len(out) == 0 {
		return "no repair ran"
	}
	return "verification after the grace: " + strings.Join(out, "; ")
}

// resolved says which incidents a run resolved and which agents it still
// sees failing, as the report has them.
func resolved(rep *engine.Report) string {
	var done []string
	for _, a := range rep.Alerts {
		if a.Kind == guard.SendResolved {
			done = append(done, a.Agent)
		}
	}
	var still []string
	for _, n := range slices.Sorted(maps.Keys(rep.Agents)) {
		if s := rep.Agents[n].Severity; s != contracts.SeverityHealthy {
			still = append(still, n+" "+s.String())
		}
	}
	msg := fmt.Sprintf("%d incident(s) resolved (%s)", len(done), strings.Join(done, ", "))
	if len(still) > 0 {
		msg += "; still not healthy: " + strings.Join(still, ", ")
	}
	return msg
}

func (d *demo) runOnce(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
	rep, err := d.eng.Run(ctx, c)
	if rep != nil {
		engine.WriteText(newIndent(d.w), rep)
	}
	return rep, err
}

func loadEmbedded(name string, opts contracts.Options) (*contracts.Contract, error) {
	src, err := fixtures.Contracts.ReadFile("contracts/" + name)
	if err != nil {
		return nil, err
	}
	c, diags := contracts.Parse("fixtures/contracts/"+name, src, opts)
	if diags.HasErrors() {
		return nil, diags.Err()
	}
	return c, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// indent prefixes every line written through it, however the lines are
// split across writes.
type indent struct {
	w       io.Writer
	midLine *bool
}

func newIndent(w io.Writer) indent { return indent{w: w, midLine: new(bool)} }

func (i indent) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if !*i.midLine && line != "\n" {
			b.WriteString("    ")
		}
		b.WriteString(line)
		*i.midLine = !strings.HasSuffix(line, "\n")
	}
	if _, err := io.WriteString(i.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
