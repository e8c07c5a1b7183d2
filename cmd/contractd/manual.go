package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdDoc is one command as its own --help describes it.
type cmdDoc struct {
	Name, Args, Summary string
	Flags               []flagDoc
}

// commandDocs asks every command of the table for its help, as
// `contractd COMMAND --help` does, and returns what each says, in the
// order of commandNames.
func commandDocs(ctx context.Context) []cmdDoc {
	var out []cmdDoc
	for _, name := range commandNames() {
		c := commands[name]
		d := cmdDoc{Name: name, Args: c.args, Summary: upperFirst(c.summary) + "."}
		quiet := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" },
			Environ: func() []string { return nil }, IsTerminal: func(io.Writer) bool { return false },
			helpFlags: func(fs *flag.FlagSet) { d.Flags = describeFlags(fs) }}
		c.run(quiet, ctx, []string{"--help"})
		out = append(out, d)
	}
	return out
}

func (m *Main) cmdMan(ctx context.Context, args []string) int {
	fs := m.flags("man")
	if _, err := m.parse(fs, args); err != nil {
		return usageExit(err)
	}
	if fs.NArg() > 0 {
		m.errorf("man takes no arguments")
		return exitUsage
	}
	writeManual(m.Stdout, commandDocs(ctx), buildInfo().Version, buildInfo().Date)
	return exitOK
}

// roff escapes text for a man page: backslashes, hyphens (which are
// minus signs in flags), and a leading dot or quote.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// writeManual writes contractd(1) in man(7) roff: every command with its
// usage line, summary and flags, as their --help says them.
func writeManual(w io.Writer, docs []cmdDoc, version, date string) {
	day, _, _ := strings.Cut(date, "T")
	if day == "unknown" {
		day = ""
	}
	fmt.Fprintf(w, ".\\\" contractd(1), made by `contractd man` from every command's --help.\n")
	fmt.Fprintf(w, ".TH CONTRACTD 1 \"%s\" \"contractd %s\" \"User Commands\"\n", day, roff(version))
	fmt.Fprint(w, `.SH NAME
contractd \- run responsibility contracts: Markdown runbooks executed as monitors that heal
.SH SYNOPSIS
.B contractd
.I COMMAND
.RI [ flags "] [" args ]
.br
.B contractd
.BR \-\-help " | " \-\-version
.br
.I NAME
.RI [ flags ]
.SH DESCRIPTION
.B contractd
runs responsibility contracts: Markdown runbooks with YAML front matter that
a person reads as documentation and the engine executes as a monitor that
heals.
A contract names its targets (the local host, SSH hosts, Proxmox containers,
Docker containers), its probe steps, health tables, the only repair commands
it may ever run, and the guards around them.
The engine runs the steps, decides severity, repairs within the guards,
alerts once per incident, and keeps the snapshot the contract declares.
.PP
Flags may come before or after the arguments, with one dash or two.
.B contractd
.I COMMAND
.B \-\-help
describes a command and its flags.
.SH COMMANDS
`)
	for _, d := range docs {
		fmt.Fprintf(w, ".SS \"contractd %s", roff(d.Name))
		if d.Args != "" {
			fmt.Fprintf(w, " %s", strings.ReplaceAll(roff(d.Args), `"`, `\(dq`))
		}
		fmt.Fprint(w, "\"\n")
		fmt.Fprintf(w, "%s\n", roff(d.Summary))
		for _, f := range d.Flags {
			fmt.Fprint(w, ".TP\n")
			if f.Arg != "" {
				fmt.Fprintf(w, ".BI \"%s \" \"%s\"\n", roff(f.Flag), strings.ReplaceAll(roff(f.Arg), `"`, `\(dq`))
			} else {
				fmt.Fprintf(w, ".B %s\n", roff(f.Flag))
			}
			usage := f.Usage
			if f.Default != "" {
				usage += " (default " + f.Default + ")"
			}
			fmt.Fprintf(w, "%s\n", roff(usage))
		}
	}
	fmt.Fprint(w, `.SS "NAME [flags]"
Any command a contract declares (for example
.BR zulip\-status ),
also run through a symlink named
.IR NAME :
runs the contract that declares it, asking a running daemon first.
.SH "EXIT STATUS"
`)
	fmt.Fprintf(w, "%s\n", roff(strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(exitCodesText, "Exit codes: "), "\n"), "\n", " ")))
	fmt.Fprint(w, `.SH ENVIRONMENT
.TP
.B CONTRACTD_DIR
where a declared command looks for the contract that declares it (as
.B \-\-dir
does).
.SH FILES
.TP
.I /etc/contractd/
the contracts
.B contractd serve
runs, and its API token
.RI ( /etc/contractd/token ).
.TP
.I /var/lib/contractd/
state: each contract's ledger, snapshot and history.
.TP
.I /usr/share/doc/contractd/examples/contracts/
example contracts.
.TP
.I /usr/share/contractd/prometheus/
Prometheus alerting rules for the daemon's /metrics.
.SH "SEE ALSO"
.BR systemctl (1),
.BR journalctl (1),
and the contract format, transports and operations guides in
.IR /usr/share/doc/contractd/ .
`)
}

func (m *Main) cmdCompletion(ctx context.Context, args []string) int {
	fs := m.flags("completion")
	pos, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) != 1 || (pos[0] != "bash" && pos[0] != "zsh") {
		m.errorf("completion: name one shell, bash or zsh; see contractd completion --help")
		return exitUsage
	}
	docs := commandDocs(ctx)
	if pos[0] == "bash" {
		writeBashCompletion(m.Stdout, docs)
	} else {
		writeZshCompletion(m.Stdout, docs)
	}
	return exitOK
}

// flagWords returns a command's flags as typed on a command line.
func flagWords(d cmdDoc) []string {
	words := []string{"--help"}
	for _, f := range d.Flags {
		words = append(words, f.Flag)
	}
	return words
}

// writeBashCompletion writes a bash completion for contractd: commands,
// each command's flags, a flag's value or an argument completes as a file
// name, `help` takes a command and `completion` a shell.
func writeBashCompletion(w io.Writer, docs []cmdDoc) {
	var names []string
	for _, d := range docs {
		names = append(names, d.Name)
	}
	fmt.Fprintf(w, `# bash completion for contractd; made by `+"`contractd completion bash`"+` from every command's --help.
_contractd() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W '%s --help --version' -- "$cur"))
        return
    fi
    local flags= valued=
    case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, d := range docs {
		var valued []string
		for _, f := range d.Flags {
			if f.Arg != "" {
				valued = append(valued, f.Flag)
			}
		}
		fmt.Fprintf(w, "        %s) flags='%s' valued='%s' ;;\n", d.Name, strings.Join(flagWords(d), " "), strings.Join(valued, " "))
	}
	fmt.Fprintf(w, `    esac
    case " $valued " in
        *" $prev "*) return ;; # the flag's value: file names (-o default)
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    case ${COMP_WORDS[1]} in
        help) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W '%s' -- "$cur")) ;;
        completion) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W 'bash zsh' -- "$cur")) ;;
    esac
}
complete -o default -F _contractd contractd
`, strings.Join(names, " "))
}

// zshQuote makes s one single-quoted zsh word.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// zshDesc makes s fit inside an _arguments description ([…]).
func zshDesc(s string) string {
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`).Replace(s)
}

// zshField makes s one field of a colon-separated spec (a _describe name,
// an argument's message).
func zshField(s string) string {
	return strings.NewReplacer(`\`, `\\`, ":", `\:`).Replace(s)
}

// writeZshCompletion writes a zsh completion (#compdef) for contractd:
// commands with their summaries, each command's flags with their help, a
// flag's value or an argument as a file name, `help` takes a command and
// `completion` a shell.
func writeZshCompletion(w io.Writer, docs []cmdDoc) {
	fmt.Fprint(w, `#compdef contractd
# zsh completion for contractd; made by `+"`contractd completion zsh`"+` from every command's --help.
_contractd() {
    local -a commands
    commands=(
`)
	for _, d := range docs {
		fmt.Fprintf(w, "        %s\n", zshQuote(zshField(d.Name)+":"+strings.TrimSuffix(d.Summary, ".")))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'contractd command' commands
        return
    fi
    local cmd=$words[2]
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, d := range docs {
		fmt.Fprintf(w, "        %s)\n            _arguments \\\n                '--help[show the command'\\''s help]' \\\n", d.Name)
		for _, f := range d.Flags {
			spec := f.Flag + "[" + zshDesc(f.Usage) + "]"
			if f.Arg != "" {
				spec += ":" + zshField(f.Arg) + ":_files"
			}
			fmt.Fprintf(w, "                %s \\\n", zshQuote(spec))
		}
		switch d.Name {
		case "help":
			fmt.Fprint(w, "                '1:command: _describe -t commands command commands'\n")
		case "completion":
			fmt.Fprint(w, "                '1:shell:(bash zsh)'\n")
		default:
			fmt.Fprint(w, "                '*:file:_files'\n")
		}
		fmt.Fprint(w, "            ;;\n")
	}
	fmt.Fprint(w, `    esac
}
_contractd "$@"
`)
}
