package main

import (
	"context"
	"errors"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
)

// cmdBrief prints the briefing an agent needs to watch a contract, or one
// stage of it (engine.Brief): the prose, the steps, tables and allowed
// repairs, what was already alerted, the maintenance windows and the
// report to write.
func (m *Main) cmdBrief(ctx context.Context, args []string) int {
	fs := m.flags("brief")
	stage := fs.String("stage", "", "brief only the stage `ID`")
	asJSON := fs.Bool("json", false, "print the briefing as JSON")
	var sf stateFlags
	sf.register(fs, m.Getenv)
	var ef etcdFlags
	ef.register(fs, m.Getenv, "read the incidents and messages a group of instances (serve --etcd) keeps in etcd at `URL[,URL…]`")
	var lf loadFlags
	lf.register(fs)
	args, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(args) != 1 {
		m.errorf("usage: contractd brief %s", commands["brief"].args)
		return exitUsage
	}
	c, code := m.contractArg("brief", args[0], sf.dir, lf)
	if code != exitOK {
		return code
	}
	src, err := m.openState(ctx, sf, ef)
	if err != nil {
		m.fail("brief", err)
		return exitFailed
	}
	defer src.close()
	b, err := engine.Brief(c, *stage, src.st, time.Now())
	if errors.Is(err, engine.ErrNoStage) {
		m.errorf("brief: %v", err)
		return exitUsage
	}
	if err != nil {
		m.fail("brief", err)
		return exitFailed
	}
	if *asJSON {
		return m.writeJSON(b)
	}
	if err := engine.WriteBrief(m.Stdout, b); err != nil {
		m.errorf("%v", err)
		return exitFailed
	}
	return exitOK
}

// contractArg loads the contract a command names: a file, or the name of
// a contract in dir, /etc/contractd or /etc/contractd/contracts. It prints
// the diagnostics or the unknown name (with the nearest known one) and
// returns exitUsage when it cannot.
func (m *Main) contractArg(cmd, arg, dir string, lf loadFlags) (*contracts.Contract, int) {
	path := arg
	if isName(arg) {
		p, err := findContract(dir, func(c *contracts.Contract) bool { return c.Name == arg })
		if err != nil {
			m.errorf("%s: %s is neither a file nor a contract in %v%s", cmd, arg, err, contracts.Suggest(arg, contractFileNames(dir)))
			return nil, exitUsage
		}
		path = p
	}
	cs, code := m.loadWith([]string{path}, lf)
	if code != exitOK {
		return nil, code
	}
	return cs[0], exitOK
}
