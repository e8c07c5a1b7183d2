// Package replay is `contractd test`: it runs a contract through the real
// engine against recorded step outputs instead of targets, on a fake
// clock, and compares each run's severities, actions and alerts with what
// the author's test file expects — the promtool `test rules` of contracts.
//
// Nothing is evaluated here: a replaying transport answers the engine's
// commands and a replaying dialer its http and tcp probes from the
// recording (engine.ProbeFrom names the step each one is for), and the
// engine's own report is compared.
package replay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/steps"
)

// File is a test file (NAME.test.yaml beside NAME.md), as documented in
// docs/contract-format.md, "Testing a contract".
type File struct {
	// Contract is the contract file, relative to the test file; empty
	// means the test file's name without .test.yaml, plus .md.
	Contract string `yaml:"contract" doc:"the contract file, relative to this file (default: this file's name with .md for .test.yaml)"`
	// Inventory and Vars override the contract's, as --inventory and
	// --var do (a URL pointed at http:// rather than https://, say).
	Inventory string            `yaml:"inventory" doc:"an inventory file the contract loads with, as --inventory (relative to this file)"`
	Vars      map[string]string `yaml:"vars" doc:"vars that override the contract's, as --var does"`
	// Start is the fake clock's time at the first run (RFC 3339); empty
	// means 2026-01-01T00:00:00Z.
	Start string `yaml:"start" doc:"the fake clock's time at the first run, RFC 3339 (default 2026-01-01T00:00:00Z)"`
	Runs  []*Run `yaml:"runs" required:"true" doc:"the runs, in order: what the steps answer and what each run must come to"`

	path string
}

// Run is one run of the contract: what its steps answer and what the run
// must come to.
type Run struct {
	Name string `yaml:"name" doc:"the run's name in messages"`
	// After is how long the fake clock moves before this run (e.g. 15m);
	// empty means the contract's schedule interval. The first run starts
	// at Start.
	After string `yaml:"after" type:"duration" doc:"how long the fake clock moves before this run (default: the contract's schedule interval)"`
	// Steps are the recorded outputs by "stage/step" (a for_each stage as
	// written in the report: "lab[sol]/health"). A run keeps the outputs
	// of the run before it and replaces those it lists.
	Steps map[string]*Output `yaml:"steps" key:"stage/step" doc:"the steps' recorded answers by stage/step (a for_each stage as lab[sol]/health); a run keeps the answers of the run before it and replaces those it lists"`
	// AfterRepair are the outputs of the probe after a repair (by
	// "stage/step"); a step not listed answers as in Steps.
	AfterRepair map[string]*Output `yaml:"after_repair" key:"stage/step" doc:"the answers of the probe after a repair, by stage/step; a step not listed answers as in steps"`
	// Repairs are the outputs of repair commands, by the command as the
	// report names it; a repair not listed exits 0.
	Repairs map[string]*Output `yaml:"repairs" doc:"the outputs of repair commands, by the command as the report names it; a repair not listed exits 0"`
	Expect  Expect             `yaml:"expect" doc:"what the run must come to; only what is given is checked"`
}

// Output is what one step or repair answered: the recording a step's kind
// replays (steps.Recording); a repair's is its stdout, stderr and exit.
type Output = steps.Recording

// HTTPOutput is an http step's recorded answer.
type HTTPOutput = steps.RecordedHTTP

// Expect is what a run must come to. Only what is given is checked.
type Expect struct {
	// Overall is the run's overall severity.
	Overall string `yaml:"overall" enum:"severity" doc:"the run's overall severity"`
	// Agents are agents' severities after the run, by agent.
	Agents map[string]string `yaml:"agents" enum:"severity" doc:"agents' severities after the run, by agent"`
	// Actions, when given, are every action of the run but log and
	// monitor rows, in any order: each matches one action on the fields
	// it gives, and no action is left over. `actions: []` means none.
	Actions *[]ActionExpect `yaml:"actions" doc:"every action of the run but log and monitor rows, in any order, each matched on the fields it gives; [] means none"`
	// Alerts, when given, are every message of the run, in any order,
	// matched the same way. `alerts: []` means none.
	Alerts *[]AlertExpect `yaml:"alerts" doc:"every message of the run, in any order, each matched on the fields it gives; [] means none"`
}

// ActionExpect matches an action of the report on the fields it gives.
type ActionExpect struct {
	Agent     string `yaml:"agent" doc:"the agent"`
	Stage     string `yaml:"stage" doc:"the stage, as the report names it"`
	Action    string `yaml:"action" doc:"the command, or alert or escalate"`
	Status    string `yaml:"status" doc:"ran, failed, pending, blocked, report-only, …"`
	Guard     string `yaml:"guard" doc:"the guard that decided: debounce, budget, …"`
	Verify    string `yaml:"verify" doc:"the verification: remediated, remediation failed"`
	Condition string `yaml:"condition" doc:"the row's condition as written"`
}

// AlertExpect matches a message of the report on the fields it gives.
type AlertExpect struct {
	Kind      string `yaml:"kind" doc:"open, reminder, resolved, repair or escalate"`
	Agent     string `yaml:"agent" doc:"the agent"`
	Condition string `yaml:"condition" doc:"the condition as written"`
	Severity  string `yaml:"severity" enum:"severity" doc:"the incident's severity"`
	Text      string `yaml:"text" doc:"a part of the message's text"`
}

// ErrFile is wrapped by every error about the test file itself.
var ErrFile = errors.New("bad test file")

// Load reads and checks a test file. Its errors wrap ErrFile and name
// FILE:LINE:COL where the YAML says where.
func Load(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFile, err)
	}
	return Parse(path, src)
}

// Parse checks a test file's text; path names it and places its contract.
// Its errors are Load's: each is a *FileError.
func Parse(path string, src []byte) (*File, error) {
	bad := func(line, col int, format string, args ...any) error {
		return &FileError{Pos: contracts.Pos{File: path, Line: line, Col: col}, Msg: fmt.Sprintf(format, args...)}
	}
	var f File
	if err := yaml.UnmarshalWithOptions(src, &f, yaml.Strict()); err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			if tok := ye.GetToken(); tok != nil && tok.Position != nil {
				return nil, bad(tok.Position.Line, tok.Position.Column, "%s", ye.GetMessage())
			}
			return nil, bad(0, 0, "%s", ye.GetMessage())
		}
		return nil, bad(0, 0, "%v", err)
	}
	f.path = path
	if f.Contract == "" {
		f.Contract = strings.TrimSuffix(filepath.Base(path), ".test.yaml") + ".md"
	}
	if len(f.Runs) == 0 {
		return nil, bad(0, 0, "no runs")
	}
	if _, err := f.start(); err != nil {
		return nil, bad(0, 0, "start: %v", err)
	}
	for i, r := range f.Runs {
		if r == nil {
			return nil, bad(0, 0, "run %d is empty", i+1)
		}
		if r.After != "" {
			if d, err := contracts.ParseDuration(r.After); err != nil || d < 0 {
				return nil, bad(0, 0, "run %d: after %q is not a duration such as 15m", i+1, r.After)
			}
		}
		for _, m := range []map[string]*Output{r.Steps, r.AfterRepair} {
			for k, o := range m {
				if !strings.Contains(k, "/") {
					return nil, bad(0, 0, "run %d: step %q: write it as stage/step", i+1, k)
				}
				if o == nil {
					return nil, bad(0, 0, "run %d: step %q has no output", i+1, k)
				}
			}
		}
	}
	return &f, nil
}

// FileError is what is wrong with a test file, and where: Line and Col
// are 0 when the YAML parser gave no position (the file as a whole). It
// wraps ErrFile.
type FileError struct {
	Pos contracts.Pos
	Msg string
}

// Error renders "bad test file: FILE:LINE:COL: MSG" (FILE: MSG without a
// position).
func (e *FileError) Error() string {
	if e.Pos.Line == 0 {
		return fmt.Sprintf("%v: %s: %s", ErrFile, e.Pos.File, e.Msg)
	}
	return fmt.Sprintf("%v: %s: %s", ErrFile, e.Pos, e.Msg)
}

// Unwrap returns ErrFile.
func (e *FileError) Unwrap() error { return ErrFile }

// ContractPath is the contract file the test runs.
func (f *File) ContractPath() string {
	if filepath.IsAbs(f.Contract) {
		return f.Contract
	}
	return filepath.Join(filepath.Dir(f.path), f.Contract)
}

func (f *File) start() (time.Time, error) {
	if f.Start == "" {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil
	}
	return time.Parse(time.RFC3339, f.Start)
}

// label names run i (0-based) in messages: `run 2 "pipeline blocks"`.
func (f *File) label(i int) string {
	if n := f.Runs[i].Name; n != "" {
		return fmt.Sprintf("run %d %q", i+1, n)
	}
	return fmt.Sprintf("run %d", i+1)
}
