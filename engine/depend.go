package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/transports"
)

// depending is the depend phase under way: what it read of other
// contracts and which targets it checked, each once per run.
type depending struct {
	*run
	fleet   *Fleet
	units   []*unit
	ledgers map[string]*Ledger // other contracts' ledgers, as their owners wrote them
	checked map[string]error   // host checks of this run, by target: nil when reached
}

// targetDown is a host of the contract that a host check could not
// reach, by the names the contract gives it (two targets at one address
// are one host), with the units it suppresses: its incident is the one
// alert.
type targetDown struct {
	names []string // sorted
	err   error
	units []*unit
}

// failing reports whether the host counts as down for its incident: one
// of the units it suppresses is unreachable past unreachable_after.
func (td *targetDown) failing() bool {
	for _, u := range td.units {
		if u.settled.Failing {
			return true
		}
	}
	return false
}

// unitNames names the units it suppresses.
func (td *targetDown) unitNames() []string {
	out := make([]string, 0, len(td.units))
	for _, u := range td.units {
		out = append(out, u.name())
	}
	return out
}

// depend is the phase after judge: every unit that is not healthy is
// judged against what it depends on (guard.Dependencies): the contract's
// depends_on, and, for a unit that could not be reached, the targets its
// stage reaches through via. A failing dependency makes the unit
// suppressed: the repair phase's guard holds its repairs and the alert
// phase its incidents. What another contract depends on is read as its
// last run judged it, from the store (with --etcd, its owner's word); a
// target that no unit of the fleet watches is checked here, once per
// run, by running nothing on it. It returns the targets found down that
// suppress units, for their incidents; what it says is a dependency that
// could not be read.
func (r *run) depend(ctx context.Context, units []*unit) (map[string]*targetDown, said) {
	var s said
	r.enter("depend", &s)
	if r.e.opts.Recordings != nil {
		// `contractd test` judges the contract alone, from its recordings:
		// there is no other contract's verdict, nor a target, to read.
		return nil, s
	}
	d := &depending{run: r, fleet: r.fleet, units: units, ledgers: map[string]*Ledger{}, checked: map[string]error{}}
	down := map[string]*targetDown{}
	for _, u := range units {
		if u.skipped || u.state == nil {
			continue
		}
		if u.raw == contracts.SeverityHealthy {
			u.state.FailingSince = time.Time{} // what the rule does for a healthy unit; nothing to read
			continue
		}
		deps := d.of(ctx, u, &s)
		if len(deps) == 0 {
			continue
		}
		u.suppressed = guard.Dependencies{Self: r.c.Name + "/" + u.name(), Clock: r.e.opts.Clock}.Judge(u.state, u.raw, deps)
		if sup := u.suppressed; sup != nil {
			if name, ok := strings.CutPrefix(sup.Root, contracts.TargetPrefix); ok && d.checked[name] != nil {
				// The root cause is a host of this contract's own: the
				// contract speaks for it, at the units' own pace
				// (unreachable_after), and its verdict says so.
				u.localRoot = true
				host := identity(r.c, name)
				if host == "" {
					host = name
				}
				td := down[host]
				if td == nil {
					td = &targetDown{err: d.checked[name]}
					down[host] = td
				}
				if !slices.Contains(td.names, name) {
					td.names = append(td.names, name)
					sort.Strings(td.names)
				}
				td.units = append(td.units, u)
			}
		}
	}
	return down, s
}

// of lists what u depends on, as last judged.
func (d *depending) of(ctx context.Context, u *unit, s *said) []guard.Dependency {
	var deps []guard.Dependency
	seen := map[string]bool{}
	add := func(dep guard.Dependency) {
		if !seen[dep.Ref] {
			seen[dep.Ref] = true
			deps = append(deps, dep)
		}
	}
	if u.raw == contracts.SeverityUnreachable {
		// A unit reached through its hops shows they are up; one that
		// could not be reached is suppressed when a hop is down.
		for _, sr := range u.stages {
			for _, hop := range hops(d.c, sr.target) {
				add(d.target(ctx, u, hop, s))
			}
		}
	}
	for _, ref := range d.c.DependsOn {
		switch {
		case ref.Target != "":
			add(d.target(ctx, u, ref.Target, s))
		case ref.Agent != "":
			add(guard.Dependency{Ref: ref.String(), Judged: d.unitJudged(ref.Contract, ref.Agent, s), Every: d.fleet.Every(ref.Contract)})
		default:
			add(guard.Dependency{Ref: ref.Contract, Judged: d.contractJudged(ref.Contract, s), Every: d.fleet.Every(ref.Contract)})
		}
	}
	return deps
}

// target is the dependency on a target of the contract: the unit that
// watches it (runs on it directly) when the fleet has one, whose word
// stands, else a check of it now.
func (d *depending) target(ctx context.Context, u *unit, name string, s *said) guard.Dependency {
	if w := d.fleet.Watcher(d.c, name); w != "" && w != d.c.Name+"/"+u.name() {
		contract, agent, _ := strings.Cut(w, "/")
		return guard.Dependency{Ref: w, Judged: d.unitJudged(contract, agent, s), Every: d.fleet.Every(contract)}
	}
	err, done := d.checked[name]
	if !done {
		err = d.reach(ctx, name)
		d.checked[name] = err
	}
	j := &guard.Judgement{At: d.e.opts.Clock.Now(), Severity: contracts.SeverityHealthy}
	if err != nil {
		j.Severity = contracts.SeverityUnreachable
	}
	return guard.Dependency{Ref: contracts.TargetPrefix + name, Judged: j, Every: d.c.Schedule.Every}
}

// reach checks that target answers: it runs nothing (`:` over stdin) under
// the step timeout. It returns the transport's error, nil when reached.
func (d *depending) reach(ctx context.Context, target string) error {
	tr, err := d.e.opts.Opener.Open(d.c, target)
	if err != nil {
		return err
	}
	timeout, deadline := d.e.hostCheckTimeouts()
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	_, err = tr.Exec(cctx, transports.Command{Script: ":", Shell: "sh", Timeout: timeout})
	if err != nil && !errors.Is(err, transports.ErrUnreachable) {
		err = fmt.Errorf("%w: %v", transports.ErrUnreachable, err)
	}
	return err
}

// unitJudged is a unit's last judgement: this run's, for a unit of this
// contract; else as its contract's last run left it.
func (d *depending) unitJudged(contract, agent string, s *said) *guard.Judgement {
	if contract == d.c.Name {
		for _, u := range d.units {
			if u.name() == agent && !u.skipped {
				return &guard.Judgement{At: d.e.opts.Clock.Now(), Severity: u.seenAs()}
			}
		}
		return nil
	}
	l := d.ledger(contract, s)
	if l == nil || l.Units[agent] == nil {
		return nil
	}
	return l.Units[agent].Judged
}

// contractJudged is a contract's last judgement as a whole: failing when
// one of its units (a gate included) is, with that unit's root; else
// healthy, judged when its newest unit was.
func (d *depending) contractJudged(contract string, s *said) *guard.Judgement {
	l := d.ledger(contract, s)
	if l == nil {
		return nil
	}
	var out *guard.Judgement
	for _, key := range sortedKeys(l.Units) {
		u := l.Units[key]
		if u == nil || u.Judged == nil {
			continue
		}
		j := u.Judged
		if j.Failing() && (out == nil || !out.Failing()) {
			root := contract + "/" + key
			if j.Severity == contracts.SeveritySuppressed && j.Root != "" {
				root = j.Root
			}
			out = &guard.Judgement{At: j.At, Severity: contracts.SeveritySuppressed, Root: root}
			if j.Severity != contracts.SeveritySuppressed {
				out.Severity = j.Severity
			}
			continue
		}
		if out == nil {
			out = &guard.Judgement{At: j.At, Severity: contracts.SeverityHealthy}
		} else if !out.Failing() && j.At.After(out.At) {
			out.At = j.At
		}
	}
	return out
}

// ledger reads another contract's ledger once per run; nil (and said)
// when it cannot be read.
func (d *depending) ledger(contract string, s *said) *Ledger {
	if l, ok := d.ledgers[contract]; ok {
		return l
	}
	l, err := ReadLedger(d.st, contract)
	if err != nil {
		s.error(fmt.Sprintf("depends_on: the state of %s cannot be read, so nothing is suppressed by it: %v", contract, err))
		l = nil
	}
	d.ledgers[contract] = l
	return l
}

// seenAs is the unit as the run saw it, before hysteresis: what flap
// detection counts and what the units that depend on it read. A repaired
// unit is what its verification found.
func (u *unit) seenAs() contracts.Severity {
	if len(u.repairs) > 0 {
		return u.final
	}
	return u.raw
}

// shown is the unit's severity in reports: suppressed while a dependency
// suppresses it, else its final severity.
func (u *unit) shown() contracts.Severity {
	if u.suppressed != nil {
		return contracts.SeveritySuppressed
	}
	return u.final
}

// judged records each unit's judgement in its guard state, for the units
// that depend on it.
func (r *run) judged(units []*unit) {
	now := r.e.opts.Clock.Now()
	for _, u := range units {
		if u.skipped || u.state == nil {
			continue
		}
		j := &guard.Judgement{At: now, Severity: u.seenAs()}
		if u.suppressed != nil {
			j.Severity, j.Root = contracts.SeveritySuppressed, u.suppressed.Root
		}
		u.state.Judged = j
	}
}

// behind names the units of c that depend on the host of target: those
// reached through it (or through another name of the same host), and all
// of them when depends_on names it.
func behind(c *contracts.Contract, target string) []string {
	host := identity(c, target)
	same := func(name string) bool { return name == target || host != "" && identity(c, name) == host }
	all := false
	for _, r := range c.DependsOn {
		if r.Target != "" && same(r.Target) {
			all = true
		}
	}
	var out []string
	for _, sr := range expandStages(c) {
		if sr.agent == "" || slices.Contains(out, unitName(sr)) {
			continue
		}
		through := all
		for _, h := range hops(c, sr.target) {
			through = through || same(h)
		}
		if through {
			out = append(out, unitName(sr))
		}
	}
	sort.Strings(out)
	return out
}
