package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the engine failed, or lint found errors
	exitUsage  = 2 // bad usage, or a contract that does not load
)

// Main is the CLI: a small testable type that end-to-end tests drive directly.
type Main struct {
	Stdout  io.Writer
	Stderr  io.Writer
	Getenv  func(string) string
	Environ func() []string
	// IsTerminal reports whether w is a terminal (live progress).
	IsTerminal func(w io.Writer) bool
}

// NewMain returns a Main wired to the process's streams and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ, IsTerminal: isTerminal}
}

type command struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) int
}

// commands is the CLI's command table.
var commands = map[string]command{
	"run":         {"run contracts now and report", (*Main).cmdRun},
	"lint":        {"check contracts; print file:line:col diagnostics", (*Main).cmdLint},
	"explain":     {"show a contract's plan in order", (*Main).cmdExplain},
	"status":      {"show a contract's last snapshot and its age", (*Main).cmdStatus},
	"history":     {"show a contract's recent runs", (*Main).cmdHistory},
	"why":         {"show the last run's actions with every guard's answer", (*Main).cmdWhy},
	"reset":       {"release a contract's hold-down and escalations", (*Main).cmdReset},
	"maintenance": {"pause a contract's repairs and new alerts for a while, or list its windows", (*Main).cmdMaintenance},
	"serve":       {"run every contract in a directory on its schedule", (*Main).cmdServe},
	"demo":        {"start a fixture mesh on loopback and show detection and repair", (*Main).cmdDemo},
	"new":         {"write a new contract from a template", (*Main).cmdNew},
}

// Run runs the command line args (args[0] is the program name) and returns
// the exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	name := filepath.Base(args[0])
	if name != "contractd" && !strings.HasPrefix(name, "contractd.") && name != "main" {
		// Invoked through a symlink named after a contract's command.
		return m.cmdDeclared(ctx, name, args[1:])
	}
	if len(args) < 2 || args[1] == "-h" || args[1] == "--help" || args[1] == "help" {
		m.usage()
		if len(args) < 2 {
			return exitUsage
		}
		return exitOK
	}
	if c, ok := commands[args[1]]; ok {
		return c.run(m, ctx, args[2:])
	}
	if args[1] == "version" {
		fmt.Fprintln(m.Stdout, "contractd", version)
		return exitOK
	}
	return m.cmdDeclared(ctx, args[1], args[2:])
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func (m *Main) usage() {
	fmt.Fprintln(m.Stderr, "usage: contractd COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(m.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(m.Stderr, "  NAME     any command a contract declares (e.g. zulip-status)")
}

func (m *Main) errorf(format string, args ...any) {
	say(m.Stderr, "contractd: "+format+"\n", args...)
}

// flags returns a FlagSet that writes its errors to m.Stderr.
func (m *Main) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	return fs
}

// parse parses flags that may come before or after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// multiFlag collects repeated --var key=value flags.
type multiFlag []string

func (f *multiFlag) String() string     { return strings.Join(*f, ",") }
func (f *multiFlag) Set(v string) error { *f = append(*f, v); return nil }
