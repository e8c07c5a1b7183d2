package engine

import "context"

// Probe names what a transport command or a native probe's dial is for.
// The engine puts it in the context of every probe and repair it makes,
// so that a replaying transport (`contractd test`) can answer each step
// from a recording; real transports ignore it.
type Probe struct {
	Contract string
	Stage    string   // the stage's id, for_each items expanded: lab[sol]
	Agent    string   // "" for an agentless stage (a gate)
	Steps    []string // the step ids a command or batch runs, in order; none for a repair
	Verify   bool     // the probe after a repair
	Action   string   // a repair: the command as the report names it
}

type probeKey struct{}

// WithProbe returns ctx carrying p.
func WithProbe(ctx context.Context, p Probe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

// ProbeFrom returns the Probe in ctx, and false when there is none.
func ProbeFrom(ctx context.Context) (Probe, bool) {
	p, ok := ctx.Value(probeKey{}).(Probe)
	return p, ok
}
