package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/transports"
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
	// helpFlags, when set, receives a command's flags when the command is
	// asked for its help, instead of the help being printed: the manual
	// page and the completions are made from the commands' own --help.
	helpFlags func(fs *flag.FlagSet)
}

// NewMain returns a Main wired to the process's streams and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ, IsTerminal: isTerminal}
}

type command struct {
	args    string // what follows the command name in its usage line
	summary string
	run     func(m *Main, ctx context.Context, args []string) int
}

// commands is the CLI's command table. It is filled in init: commands
// (help, unknown-command suggestions) read it.
var commands map[string]command

func init() {
	commands = map[string]command{
		"run":         {"[flags] FILE... | NAME", "run contracts now and report", (*Main).cmdRun},
		"lint":        {"[--strict] FILE|DIR...", "check contracts (and their depends_on against their directory's); print file:line:col diagnostics", (*Main).cmdLint},
		"explain":     {"[--json] FILE", "show a contract's plan in order", (*Main).cmdExplain},
		"test":        {"[-v] FILE.test.yaml | FILE.md ...", "check contracts against recorded outputs and expected verdicts, with no targets (NAME.test.yaml)", (*Main).cmdTest},
		"status":      {"[--json] [--state-dir DIR | --etcd URL[,URL…]] [NAME]", "one line per contract, or one contract's last snapshot and its age", (*Main).cmdStatus},
		"history":     {"[-n N] [--json] [--state-dir DIR | --etcd URL[,URL…]] NAME", "show a contract's recent runs", (*Main).cmdHistory},
		"why":         {"[--state-dir DIR | --etcd URL[,URL…]] NAME", "show the last run's actions with every guard's answer", (*Main).cmdWhy},
		"reset":       {"[--unit AGENT] [--state-dir DIR | --etcd URL[,URL…]] NAME", "release a contract's hold-down and escalations", (*Main).cmdReset},
		"maintenance": {"[--agent AGENT] [--for DURATION [--reason TEXT] | --end] [--state-dir DIR | --etcd URL[,URL…]] NAME", "pause a contract's repairs and new alerts for a while, or list its windows", (*Main).cmdMaintenance},
		"serve":       {"[--dir DIR] [--state-dir DIR] [--listen ADDR] [--token-file FILE] [--mcp [--mcp-allow-actions]]", "run every contract in a directory on its schedule; a status page, an API and /metrics", (*Main).cmdServe},
		"demo":        {"[--dir DIR]", "start a fixture mesh on loopback and show detection and repair", (*Main).cmdDemo},
		"new":         {"[-o FILE] NAME", "write a new contract from a template, its repairs not yet armed", (*Main).cmdNew},
		"import":      {"monitrc [--out DIR] [--force] FILE...", "translate Monit control files into contracts, one per check entry, with notes for what is left to do", (*Main).cmdImport},
		"brief":       {"[--stage ID] [--json] [--state-dir DIR | --etcd URL[,URL…]] CONTRACT", "print the briefing an agent needs to watch a contract: steps, tables, allowed repairs, what was already alerted, the report to write", (*Main).cmdBrief},
		"mcp":         {"[--allow-actions] [--dir DIR] [--state-dir DIR | --etcd URL[,URL…]]", "serve the MCP tools over stdio, for an agent that starts contractd", (*Main).cmdMCP},
		"sudoers":     {"[--user NAME] [--host TARGET] DIR|FILE...", "print the sudoers lines that allow exactly the commands contracts run through sudo", (*Main).cmdSudoers},
		"lsp":         {"[--inventory FILE] [--var KEY=VALUE]... [--max-file-size SIZE]", "serve the language server over stdio, for an editor: lint's diagnostics as you type, hover, completion, definitions, quick fixes", (*Main).cmdLSP},
		"schema":      {schemaNames, "print the JSON Schema of a contract's front matter, an inventory or a test file, for editors", (*Main).cmdSchema},
		"version":     {"", "print the version", (*Main).cmdVersion},
		"help":        {"[COMMAND]", "show this help, or a command's", (*Main).cmdHelp},
		"man":         {"", "print contractd's manual page (roff), made from every command's --help", (*Main).cmdMan},
		"completion":  {"bash | zsh", "print a completion script for bash or zsh, made from every command's --help", (*Main).cmdCompletion},
	}
}

// Run runs the command line args (args[0] is the program name) and returns
// the exit code.
//
// The program may have any name: a copy called contractd-linux-amd64
// works like contractd. Only a name that a contract declares in its
// `commands` (a symlink such as zulip-status) runs that contract.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		args = []string{"contractd"}
	}
	if name := filepath.Base(args[0]); m.invokedAsCommand(name, args[1:]) {
		return m.cmdDeclared(ctx, name, args[1:])
	}
	if len(args) < 2 {
		m.usage(m.Stderr)
		return exitUsage
	}
	switch args[1] {
	case "-h", "-help", "--help":
		m.usage(m.Stdout)
		return exitOK
	case "-version", "--version":
		return m.cmdVersion(ctx, nil)
	}
	if c, ok := commands[args[1]]; ok {
		return c.run(m, ctx, args[2:])
	}
	if args[1] == demoAgent {
		return m.cmdDemoAgent(ctx, args[2:])
	}
	if strings.HasPrefix(args[1], "-") {
		m.errorf("%s: a flag needs a command before it; see contractd --help", args[1])
		return exitUsage
	}
	return m.cmdDeclared(ctx, args[1], args[2:])
}

// invokedAsCommand reports whether the program was started under a
// contract's declared command name (a symlink). Names that start with
// "contractd" are the tool itself, however they end; any other name is a
// declared command when a contract in the searched directories declares it,
// or when the first argument is not one of the tool's own commands (a
// daemon may serve a contract this host has no file of).
func (m *Main) invokedAsCommand(name string, rest []string) bool {
	if strings.HasPrefix(name, "contractd") || name == "main" {
		return false
	}
	dir := m.Getenv("CONTRACTD_DIR")
	for i, a := range rest {
		if (a == "--dir" || a == "-dir") && i+1 < len(rest) {
			dir = rest[i+1]
		} else if v, ok := strings.CutPrefix(a, "--dir="); ok {
			dir = v
		}
	}
	if _, err := findContract(dir, declares(name)); err == nil {
		return true
	}
	if len(rest) > 0 {
		if _, ours := commands[rest[0]]; ours {
			return false
		}
		switch rest[0] {
		case "-h", "-help", "--help", "-version", "--version":
			return false
		}
	}
	return true
}

// version is set at build time with -ldflags "-X main.version=…" (see
// buildinfo.go).
var version = "dev"

func (m *Main) cmdVersion(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" {
		m.errorf("version takes no arguments")
		return exitUsage
	}
	writeVersion(m.Stdout)
	return exitOK
}

func (m *Main) cmdHelp(ctx context.Context, args []string) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintf(m.Stdout, "usage: contractd help %s\n\nShow the tool's help, or a command's.\n", commands["help"].args)
		return exitOK
	}
	if len(args) == 0 {
		m.usage(m.Stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok || c.run == nil {
		m.errorf("help: unknown command %q%s", args[0], contracts.Suggest(args[0], commandNames()))
		return exitUsage
	}
	return c.run(m, ctx, []string{"--help"})
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// usage writes the tool's help: every command with its summary.
func (m *Main) usage(w io.Writer) {
	fmt.Fprint(w, "contractd runs responsibility contracts: Markdown runbooks executed as monitors that heal.\n\n")
	fmt.Fprint(w, "usage: contractd COMMAND [flags] [args]\n       contractd --help | --version\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range commandNames() {
		fmt.Fprintf(tw, "  %s\t%s\n", n, commands[n].summary)
	}
	fmt.Fprintf(tw, "  NAME\tany command a contract declares (e.g. zulip-status), also as a symlink named NAME\n")
	tw.Flush()
	fmt.Fprint(w, "\n`contractd COMMAND --help` describes a command and its flags. "+exitCodesText)
}

// exitCodesText says what the exit codes mean, in the tool's help and its
// manual page.
const exitCodesText = "Exit codes: 0 done (sick agents included),\n1 the engine failed or lint found errors, 2 bad usage or a contract that does not load;\n130/143 a run SIGINT/SIGTERM interrupted (it recorded what it did); with --nagios 0/1/2/3 for OK/WARNING/CRITICAL/UNKNOWN.\n"

// A message of several lines (a contract's diagnostics) prints as several
// lines, the later ones indented, each made printable on its own: no
// literal \n, and no line can pass for one of contractd's own.
func (m *Main) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for i, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		prefix := "contractd: "
		if i > 0 {
			prefix = "  "
		}
		fmt.Fprintf(m.Stderr, "%s%s\n", prefix, transports.Printable(line))
	}
}

// fail prints err after "contractd: what: ", leaving out what when the
// error already starts with it (no "serve: serve:").
func (m *Main) fail(what string, err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, what+":") && !strings.HasPrefix(msg, what+" ") {
		msg = what + ": " + msg
	}
	m.errorf("%s", msg)
}

// flags returns a FlagSet for command name whose errors go to m.Stderr.
// Parse it with m.parse, which answers --help.
func (m *Main) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {} // m.parse says what to do
	return fs
}

// errHelp is what m.parse returns once it printed a command's help.
var errHelp = errors.New("help shown")

// parse parses flags that may come before or after positional arguments.
// Asked for help (-h, --help), it prints the command's help on stdout and
// returns errHelp; on a bad flag, it prints the problem and a hint on
// stderr. Callers return usageExit(err).
func (m *Main) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			if m.helpFlags != nil {
				m.helpFlags(fs)
			} else {
				m.help(m.Stdout, fs)
			}
			return nil, errHelp
		}
		if err != nil {
			fmt.Fprintf(m.Stderr, "contractd: see `contractd %s --help`\n", fs.Name())
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// usageExit is the exit code after m.parse failed: 0 when it showed help.
func usageExit(err error) int {
	if errors.Is(err, errHelp) {
		return exitOK
	}
	return exitUsage
}

// help writes a command's usage line, summary and flags.
func (m *Main) help(w io.Writer, fs *flag.FlagSet) {
	name := fs.Name()
	c, ok := commands[name]
	switch {
	case ok:
		fmt.Fprintf(w, "usage: contractd %s %s\n\n%s.\n", name, c.args, upperFirst(c.summary))
	default:
		fmt.Fprintf(w, "usage: contractd %s [flags]   (or a symlink named %s)\n\nRun the contract that declares the command %s: a running daemon is asked first.\n", name, name, name)
	}
	flags := describeFlags(fs)
	if len(flags) > 0 {
		fmt.Fprint(w, "\nflags:\n")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range flags {
		left := f.Flag
		if f.Arg != "" {
			left += " " + f.Arg
		}
		def := ""
		if f.Default != "" {
			def = fmt.Sprintf(" (default %s)", f.Default)
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", left, f.Usage, def)
	}
	tw.Flush()
}

// flagDoc is one flag as a command's help shows it.
type flagDoc struct {
	Flag    string // --name, or -n for a one-letter name
	Arg     string // the value's name (DURATION, FILE); "" for a switch
	Usage   string
	Default string // "" when the default is the zero value
}

// describeFlags returns fs's flags in order, as help shows them.
func describeFlags(fs *flag.FlagSet) []flagDoc {
	var out []flagDoc
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		d := flagDoc{Flag: "--" + f.Name, Arg: arg, Usage: usage}
		if len(f.Name) == 1 {
			d.Flag = "-" + f.Name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			d.Default = f.DefValue
		}
		out = append(out, d)
	})
	return out
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// multiFlag collects repeated --var key=value flags.
type multiFlag []string

func (f *multiFlag) String() string     { return strings.Join(*f, ",") }
func (f *multiFlag) Set(v string) error { *f = append(*f, v); return nil }
