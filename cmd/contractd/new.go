package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
)

var contractName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// cmdNew writes a contract from a template that lints clean, so an author
// starts from something that runs, and whose repairs are not armed: its
// agent is report-only until the author takes it off the list, so running
// the template as written never restarts anything.
func (m *Main) cmdNew(ctx context.Context, args []string) int {
	fs := m.flags("new")
	out := fs.String("o", "", "output `FILE` (default NAME.md)")
	names, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(names) != 1 || !contractName.MatchString(names[0]) {
		m.errorf("usage: contractd new [-o FILE] NAME   (NAME: lower-case letters, digits and dashes)")
		return exitUsage
	}
	path := *out
	if path == "" {
		path = names[0] + ".md"
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		m.errorf("new: %v", err)
		return exitFailed
	}
	_, werr := f.WriteString(strings.ReplaceAll(template, "NAME", names[0]))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		m.errorf("new: %v", werr)
		return exitFailed
	}
	fmt.Fprintf(m.Stdout, "wrote %s; its repairs are not armed (report_only_agents lists my-agent).\n", path)
	fmt.Fprintf(m.Stdout, "next: contractd lint %s; contractd run --dry-run %s; then remove my-agent from report_only_agents to arm them\n", path, path)
	return exitOK
}

const template = "---\n" + `kind: responsibility
name: NAME
title: What this contract keeps alive
version: 0.1.0
runtime_contract: 2
agent: my-agent
# Not armed yet: a report-only agent is probed and alerted on, and every
# repair says which guard would have let it run, but none runs. Once
# ` + "`contractd run --dry-run NAME.md`" + ` shows the right repairs, remove my-agent
# from this list to arm them.
report_only_agents: [my-agent]
schedule: {every: 15m, on_start: true}
commands: [NAME-status]
guards:
  debounce: 300s
  crash_loop: {max_restarts: 10, per: 1h, then: alert}
  unreachable_after: 3
targets:
  app-host: {local: true}
vars:
  health_url: http://127.0.0.1:8080/health
# Where messages go (an incident opening, a reminder, a repair, a resolve).
# Without a route they are only in the run's report and contractd why.
# Uncomment a route (docs/contract-format.md, Alerts):
# notify:
#   - {log: {path: /var/log/contractd/NAME.log}}
#   - {webhook: {url: "https://hooks.example/services/T000/B000/XXXX", format: text}}
` + "---\n" + `
# NAME

Say here, for a person, what this monitors and why. Everything that is not a
heading with {…} attributes, a fenced block with {…} attributes, or a table
with a known header is documentation.

## Maintains

- overall_severity: "healthy" | "degraded" | "critical"
- last_check: timestamp — when the last full check ran
- agents: map of per-agent snapshots

### Per-Agent Snapshot Schema

` + "```json" + `
{"my-agent": {"http_status": "200", "severity": "healthy"}}
` + "```" + `

## Execution

### Step 1: My agent {#app agent=my-agent on=app-host}

` + "```http {id=health timeout=10s}" + `
GET ${health_url}
` + "```" + `

Expected: ` + "`200`" + ` — anything else (including ` + "`000`" + `, nothing answered) is critical.

**Actions**

| Condition | Action |
|-----------|--------|
| ` + "`http_status == \"000\"`" + ` | ` + "`systemctl restart my-agent`" + ` |
`
