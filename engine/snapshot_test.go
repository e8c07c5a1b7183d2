package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/transports"
)

const twoGatesContract = "---\n" + `name: twogates
runtime_contract: 2
targets:
  box: {local: true}
---

## Maintains

- front_status: "healthy" | "degraded" | "critical"
- back_status: "healthy" | "degraded" | "critical"
- overall_severity: "healthy" | "degraded" | "critical"
- agents: map of per-agent snapshots

| Key | Value |
|-----|-------|
| ` + "`front_status`" + ` | ` + "`stages.front.severity`" + ` |
| ` + "`back_status`" + ` | ` + "`stages.back.severity`" + ` |

### Per-Agent Snapshot Schema

` + "```json" + `
{"web": {"code": 200, "severity": "healthy"}, "db": {"replicas": 3, "kind": "pg", "severity": "healthy"}}
` + "```" + `

| Key | Value |
|-----|-------|
| ` + "`code`" + ` | ` + "`web.stdout`" + ` |
| ` + "`replicas`" + ` | ` + "`db.stdout`" + ` |
| ` + "`kind`" + ` | ` + "`example.kind`" + ` |

## Execution

### Front {#front .gate on=box}

` + "```sh {id=front_probe}\necho front\n```" + `

Expected: ` + "`ok`" + `

### Back {#back .gate on=box}

` + "```sh {id=back_probe}\necho back\n```" + `

| Field | Healthy | Degraded |
|-------|---------|----------|
| ` + "`stdout`" + ` | ` + "`ok`" + ` | ` + "`slow`" + ` |

### Web {#web_stage agent=web on=box}

` + "```sh {id=web}\necho web\n```" + `

### Db {#db_stage agent=db on=box}

` + "```sh {id=db}\necho db\n```" + `
`

// The snapshot is filled by the contract's own rule: with two gates each
// status key says its own gate's state (not the first gate's), and each
// agent's snapshot holds its own keys, filled from its own steps and its
// example's constants.
func TestSnapshotFollowsTheContractsMaintainsRule(t *testing.T) {
	c := parse(t, twoGatesContract)
	answers := map[string]string{"echo front": "ok", "echo back": "slow", "echo web": "201", "echo db": "2"}
	box := &fakeTarget{name: "box", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		for k, v := range answers {
			if strings.Contains(cmd.Script, k) {
				return transports.Result{Stdout: v + "\n"}, nil
			}
		}
		return transports.Result{ExitCode: 127}, nil
	}}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	eng, err := New(Options{StateDir: dir, Opener: &fakeOpener{targets: map[string]*fakeTarget{"box": box}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(dirStore(t, dir), "twogates", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot
	if snap["front_status"] != "healthy" || snap["back_status"] != "degraded" {
		t.Errorf("front_status %v, back_status %v; want each gate's own state (healthy, degraded)", snap["front_status"], snap["back_status"])
	}
	agents := snap["agents"].(map[string]any)
	web, db := agents["web"].(map[string]any), agents["db"].(map[string]any)
	if len(web) != 2 || web["code"] != float64(201) || web["severity"] != "healthy" {
		t.Errorf("web snapshot %v; want exactly its own keys, code 201", web)
	}
	if len(db) != 3 || db["replicas"] != float64(2) || db["kind"] != "pg" {
		t.Errorf("db snapshot %v; want exactly its own keys, replicas 2, kind pg", db)
	}
	if problems := ValidateSnapshot(c, snap); len(problems) > 0 {
		t.Errorf("snapshot against its schema: %v", problems)
	}
}

// Lint and the run use the same rule: a key nothing fills is a warning at
// load, and null in the snapshot.
func TestAKeyNothingFillsIsALintWarning(t *testing.T) {
	src := strings.Replace(twoGatesContract, "| `back_status` | `stages.back.severity` |\n", "", 1)
	_, diags := contracts.Parse("twogates.md", []byte(src), contracts.Options{})
	if diags.HasErrors() || !strings.Contains(diags.String(), "maintained key back_status is filled by nothing") {
		t.Errorf("diagnostics:\n%s\nwant a warning that back_status is filled by nothing", diags.String())
	}
}

// unreachableSnapshot keeps a probe's output in each agent's snapshot,
// by the <step>_<field> rule.
const unreachableSnapshot = "---\n" + `name: reach
runtime_contract: 2
targets:
  far: {ssh: root@far.example}
---

## Maintains

- agents: map of per-agent snapshots

### Per-Agent Snapshot Schema

` + "```json" + `
{"web": {"probe_stdout": "200", "severity": "healthy"}}
` + "```" + `

## Execution

### Web {#web agent=web on=far}

` + "```sh {id=probe}\ncurl -s -o /dev/null -w '%{http_code}' http://127.0.0.1/\n```" + `

Expected: ` + "`200`" + `
`

// TestUnreachableKeepsTheSnapshotsLastValue: a per-agent key read from a
// probe's output went from "200" to "" while the target's sshd was down.
// A step that could not reach its target saw nothing, so the key keeps
// its last value, as the docs promise; a probe that ran and printed
// nothing is "" again.
func TestUnreachableKeepsTheSnapshotsLastValue(t *testing.T) {
	c := parse(t, unreachableSnapshot)
	answers := []func() (transports.Result, error){
		func() (transports.Result, error) { return transports.Result{Stdout: "200"}, nil },
		func() (transports.Result, error) {
			return transports.Result{}, transports.ErrUnreachable
		},
		func() (transports.Result, error) { return transports.Result{Stdout: ""}, nil },
	}
	run := 0
	far := &fakeTarget{name: "far", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		return answers[run]()
	}}
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	eng, err := New(Options{StateDir: dir, Opener: &fakeOpener{targets: map[string]*fakeTarget{"far": far}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []any{"200", "200", ""} {
		run = i
		clk.Advance(time.Minute)
		if _, err := eng.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		st, err := ReadStatus(dirStore(t, dir), "reach", clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		web := st.Snapshot["agents"].(map[string]any)["web"].(map[string]any)
		if web["probe_stdout"] != want {
			t.Fatalf("run %d: probe_stdout %#v, want %#v (snapshot %v)", i+1, web["probe_stdout"], want, web)
		}
	}
}
