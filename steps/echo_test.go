package steps_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/fill"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/replay"
	"github.com/contractd/contractd/steps"
	"github.com/contractd/contractd/transports"
)

// echoKind is a throwaway step kind, here to prove that a new kind is one
// file and one registration: its block is one line of text, with ${name}
// references, which its probe answers as stdout. Nothing else in the tree
// knows it.
var echoKind = steps.Kind{
	StepKind: contracts.StepKind{
		Name: "echo",
		Parse: func(blk *contracts.StepBlock, st *contracts.Step) {
			text := strings.TrimSpace(blk.Text)
			if text == "" || strings.Contains(text, "\n") {
				blk.Errorf("echo step: the block must hold one line")
			}
			st.Script = blk.Refs(text, strings.Index(blk.Text, text))
		},
		Filled: func(st *contracts.Step) []string { return []string{st.Script} },
		Fill: func(st *contracts.Step, vals map[string]string) error {
			_, err := fill.Body(st.Script, vals)
			return err
		},
		Command: func(st *contracts.Step) string { return "echo " + st.Script },
		Values:  contracts.ExecValues,
	},
	Probe: func(ctx context.Context, step *contracts.Step, vars map[string]string, d steps.Dialer) *steps.Observation {
		o := &steps.Observation{StepID: step.ID, Kind: step.Kind}
		out, err := fill.Body(step.Script, vars)
		code := 0
		if err != nil {
			out, code = "", 1
			o.Findings = append(o.Findings, err.Error())
		}
		o.Result = transports.Result{Stdout: out, ExitCode: code}
		o.Values = map[string]any{"stdout": out, "stderr": "", "exit_code": code, "timed_out": false, "unreachable": false, "duration": 0.0}
		return o
	},
	// A recorded answer is what the echo said.
	Replay: func(step *contracts.Step, rec *steps.Recording) *steps.Observation {
		return steps.FromResult(step, transports.Result{Stdout: rec.Stdout, Stderr: rec.Stderr, ExitCode: rec.Exit}, nil)
	},
}

func init() { steps.Register(echoKind) }

const echoContract = "---\nname: echo\nruntime_contract: 2\nvars:\n  greeting: hello\n---\n\n" +
	"## Execution\n\n### Greet {#greet}\n\n```echo {id=say}\n${greeting} world\n```\n\n" +
	"| Field | Healthy | Critical |\n|---|---|---|\n" +
	"| `stdout` | `it == \"hello world\"` | `it != \"hello world\"` |\n"

// noTransports is an opener for a contract of probes only: it opens no
// target and dials from the engine's own host.
type noTransports struct{}

func (noTransports) Open(*contracts.Contract, string) (transports.Transport, error) {
	return nil, errors.New("this contract runs no script")
}

func (noTransports) Dialer(*contracts.Contract, string) (steps.Dialer, error) { return nil, nil }

// A kind registered from one file is read, linted, explained and run like
// a built-in one: its block parses into a step, its references are
// checked at load, explain shows it, and the engine probes it and judges
// it with its health table.
func TestAThrowawayStepKindIsOneFile(t *testing.T) {
	parse := func(t *testing.T, src string, vars map[string]string) (*contracts.Contract, contracts.Diagnostics) {
		t.Helper()
		return contracts.Parse("echo.md", []byte(src), contracts.Options{Vars: vars})
	}

	t.Run("parse and explain", func(t *testing.T) {
		c, ds := parse(t, echoContract, nil)
		if ds.HasErrors() {
			t.Fatalf("contract does not load:\n%v", ds.Err())
		}
		st := c.Stages[0]
		step := st.Steps[0]
		if step.Kind != "echo" || step.Script != "${greeting} world" || st.StepTarget(step) != "local" {
			t.Fatalf("step %s kind %q script %q on %q, want echo \"${greeting} world\" on local", step.ID, step.Kind, step.Script, st.StepTarget(step))
		}
		var out bytes.Buffer
		if err := contracts.WriteExplainText(&out, c); err != nil {
			t.Fatal(err)
		}
		if want := "step say (echo, timeout 30s) on local:"; !strings.Contains(out.String(), want) {
			t.Errorf("explain does not show %q:\n%s", want, out.String())
		}
		if want := "echo ${greeting} world"; !strings.Contains(out.String(), want) {
			t.Errorf("explain does not show the command %q:\n%s", want, out.String())
		}
		if p := contracts.Explain(c); p.Stages[0].Steps[0].Kind != "echo" || p.Stages[0].Steps[0].Command != "echo ${greeting} world" {
			t.Errorf("plan step %+v, want kind echo and its command", p.Stages[0].Steps[0])
		}
	})

	t.Run("lint", func(t *testing.T) {
		for _, tc := range []struct{ name, from, to, want string }{
			{"an undefined reference", "${greeting} world", "${greting} world", `undefined var "greting" (did you mean "greeting"?)`},
			{"a block of two lines", "${greeting} world\n", "a\nb\n", "echo step: the block must hold one line"},
			{"on= on a kind the engine probes", "```echo {id=say}", "```echo {id=say on=box}", "step runs from the engine's host; http and tcp steps probe from an ssh target with via="},
			{"a shell expansion", "${greeting} world", "${greeting:-hi} world", "${greeting:-hi}: an http, tcp or echo step fills only ${name}"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, ds := parse(t, strings.Replace(echoContract, tc.from, tc.to, 1), nil)
				if err := ds.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error containing %q", err, tc.want)
				}
			})
		}
	})

	t.Run("contractd test", func(t *testing.T) {
		dir := t.TempDir()
		test := filepath.Join(dir, "echo.test.yaml")
		for name, text := range map[string]string{
			"echo.md": echoContract,
			"echo.test.yaml": "runs:\n  - name: hello\n    steps: {greet/say: {stdout: hello world}}\n    expect: {overall: healthy}\n" +
				"  - name: bye\n    steps: {greet/say: {stdout: bye world}}\n    expect: {overall: critical}\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		res, err := replay.Test(context.Background(), test)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || len(res.Runs) != 2 {
			t.Fatalf("contractd test: %+v", res.Runs)
		}
	})

	t.Run("run", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			greeting string
			sev      contracts.Severity
			finding  string
		}{
			{"healthy", "hello", contracts.SeverityHealthy, ""},
			{"critical", "bye", contracts.SeverityCritical, `stdout (bye world) it != "hello world" → critical`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, ds := parse(t, echoContract, map[string]string{"greeting": tc.greeting})
				if ds.HasErrors() {
					t.Fatalf("contract does not load:\n%v", ds.Err())
				}
				e, err := engine.New(engine.Options{StateDir: t.TempDir(), Opener: noTransports{}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				rep, err := e.Run(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Stages) != 1 || len(rep.Stages[0].Steps) != 1 {
					t.Fatalf("report has stages %+v, want one stage of one step", rep.Stages)
				}
				sr := rep.Stages[0].Steps[0]
				if sr.Kind != "echo" || sr.Stdout != tc.greeting+" world" || sr.Severity != tc.sev {
					t.Fatalf("step %s: kind %q stdout %q severity %v, want echo %q %v (findings %q)", sr.ID, sr.Kind, sr.Stdout, sr.Severity, tc.greeting+" world", tc.sev, sr.Findings)
				}
				if tc.finding != "" && !strings.Contains(strings.Join(sr.Findings, "\n"), tc.finding) {
					t.Errorf("findings %q do not name %s", sr.Findings, tc.finding)
				}
				if rep.OverallSeverity != tc.sev {
					t.Errorf("overall %v, want %v", rep.OverallSeverity, tc.sev)
				}
			})
		}
	})
}
