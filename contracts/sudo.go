package contracts

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	stepfill "github.com/contractd/contractd/contracts/fill"
)

// This file is the one rule for commands that run through sudo: a repair
// (or a sudo=true step) on a target with `sudo: true` runs as
//
//	sudo -n -- /full/path/of/command arg1 arg2 …
//
// with each argument exactly as the contract declares it, vars filled, so
// that a sudoers line can allow that command and nothing else. The
// command is split into words here, without a shell: there is no shell
// between sudo and the command, so whatever a shell would have done
// (pipes, redirections, globs, $(…), ;) cannot be expressed and is
// refused at load, at its column. Lint, `contractd sudoers` and the run
// all split through SplitCommand and fill through SudoArgv.

// SudoSearchPath is where a bare command name of a sudo command is looked
// up, in order: Debian's sudo secure_path. The run looks on the target
// (the first directory holding an executable of that name wins); `contractd
// sudoers` looks the same way on the host it runs on.
var SudoSearchPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// CommandWord is one word of a sudo command: literal text and ${name}
// references in order, and the byte offset where it starts in the
// command.
type CommandWord struct {
	Parts []WordPart
	Off   int
}

// WordPart is literal text (Ref == "") or a ${Ref} reference at Off.
type WordPart struct {
	Text string
	Ref  string
	Off  int
}

// CommandError is a command that cannot run through sudo as a literal
// argv: Off is the byte offset in the command it points at.
type CommandError struct {
	Off int
	Msg string
}

func (e *CommandError) Error() string { return e.Msg }

// why a shell character cannot be in a sudo command, for the message.
var shellWhy = map[byte]string{
	';': "a command separator", '&': "a background or && operator", '|': "a pipe",
	'<': "a redirection", '>': "a redirection", '(': "a subshell", ')': "a subshell",
	'`': "a command substitution", '\\': "a backslash escape", '*': "a glob", '?': "a glob",
	'[': "a glob", ']': "a glob", '{': "a brace expansion", '}': "a brace expansion",
	'\n': "a second line", '#': "a comment", '~': "a home directory expansion",
}

// SplitCommand splits a sudo command into words the way sh would split a
// simple command with no expansions: spaces and tabs separate words,
// '…' quotes literal text, "…" quotes text and ${name} references, and
// ${name} stands alone or inside a word. It returns a *CommandError
// (with the offset it points at) for anything a shell would do besides
// (shell syntax, $name without braces, $(…), an environment assignment
// before the command, an unclosed quote) and for an empty command.
func SplitCommand(cmd string) ([]CommandWord, error) {
	var words []CommandWord
	var cur *CommandWord
	lit := func(s string) {
		if n := len(cur.Parts); n > 0 && cur.Parts[n-1].Ref == "" {
			cur.Parts[n-1].Text += s
			return
		}
		cur.Parts = append(cur.Parts, WordPart{Text: s})
	}
	quoted := false // the current word has quotes (so "" is a word)
	for i := 0; i < len(cmd); {
		c := cmd[i]
		if c == ' ' || c == '\t' {
			if cur != nil {
				words = append(words, *cur)
				cur, quoted = nil, false
			}
			i++
			continue
		}
		if cur == nil {
			if c == '#' || c == '~' {
				return nil, &CommandError{i, fmt.Sprintf("%q starts %s in a shell; a sudo command runs without one (quote it)", c, shellWhy[c])}
			}
			cur = &CommandWord{Off: i}
		}
		switch {
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				return nil, &CommandError{i, "unclosed single quote"}
			}
			lit(cmd[i+1 : i+1+end])
			quoted = true
			i += end + 2
		case c == '"':
			j := i + 1
			for ; j < len(cmd) && cmd[j] != '"'; j++ {
				switch cmd[j] {
				case '$':
					n, err := refAt(cmd, j)
					if err != nil {
						return nil, err
					}
					cur.Parts = append(cur.Parts, WordPart{Ref: cmd[j+2 : j+n-1], Off: j})
					j += n - 1
				case '`', '\\', '\n':
					return nil, &CommandError{j, fmt.Sprintf("%q inside double quotes is %s in a shell; a sudo command runs without one", cmd[j], shellWhy[cmd[j]])}
				default:
					lit(cmd[j : j+1])
				}
			}
			if j >= len(cmd) {
				return nil, &CommandError{i, "unclosed double quote"}
			}
			quoted = true
			i = j + 1
		case c == '$':
			n, err := refAt(cmd, i)
			if err != nil {
				return nil, err
			}
			cur.Parts = append(cur.Parts, WordPart{Ref: cmd[i+2 : i+n-1], Off: i})
			i += n
		case shellWhy[c] != "" && c != '#' && c != '~':
			return nil, &CommandError{i, fmt.Sprintf("%q is %s in a shell; a sudo command runs without one, as the exact words a sudoers line allows", c, shellWhy[c])}
		case c == '=' && len(words) == 0 && len(cur.Parts) == 1 && cur.Parts[0].Ref == "" && !quoted && reEnvName.MatchString(cur.Parts[0].Text):
			return nil, &CommandError{cur.Off, "an environment assignment before the command: sudo resets the environment, so it would not reach the command"}
		default:
			lit(cmd[i : i+1])
			i++
		}
	}
	if cur != nil {
		words = append(words, *cur)
	}
	if len(words) == 0 {
		return nil, &CommandError{0, "empty command"}
	}
	return words, nil
}

// refAt reads the ${name} reference at cmd[i] ('$') and returns its
// length; anything else a $ starts in a shell is a *CommandError.
func refAt(cmd string, i int) (int, error) {
	rest := cmd[i:]
	if m := reDollarVar.FindStringIndex(rest); m != nil && m[0] == 0 {
		name := rest[2 : m[1]-1]
		if len(stepfill.Names(rest[:m[1]])) == 1 {
			return m[1], nil
		}
		return 0, &CommandError{i, fmt.Sprintf("${%s} is a shell expansion; a sudo command fills only ${name} (give the var its value under vars)", name)}
	}
	if strings.HasPrefix(rest, "$(") {
		return 0, &CommandError{i, "$( is a command substitution in a shell; a sudo command runs without one"}
	}
	return 0, &CommandError{i, "$ without {name} is shell syntax; write ${name} for a var"}
}

// SudoArgv fills the words of cmd (SplitCommand) with vals, the values a
// stage's ${name} references read (Contract.StageVars), and returns the
// argv sudo runs after `sudo -n --`. Every word must come out as text a
// sudoers line holds literally (SudoersWord): the command a bare name
// (looked up in SudoSearchPath) or an absolute path, each argument
// non-empty and free of spaces and of the characters sudoers treats
// specially. secrets names the references that are secrets: their values
// come from the engine's environment at run time, so no sudoers line can
// hold them. It returns a *CommandError at the offending offset.
func SudoArgv(cmd string, vals map[string]string, secrets []string) ([]string, error) {
	words, err := SplitCommand(cmd)
	if err != nil {
		return nil, err
	}
	argv := make([]string, len(words))
	for i, w := range words {
		var b strings.Builder
		for _, p := range w.Parts {
			if p.Ref == "" {
				b.WriteString(p.Text)
				continue
			}
			if contains(secrets, p.Ref) {
				return nil, &CommandError{p.Off, fmt.Sprintf("${%s} is a secret: its value comes from the engine's environment at run time, so no sudoers line can hold it (and sudo would show it in ps)", p.Ref)}
			}
			v, ok := vals[p.Ref]
			if !ok {
				return nil, &CommandError{p.Off, fmt.Sprintf("${%s} has no value to fill in at load", p.Ref)}
			}
			if why := literalWhy(v); why != "" {
				return nil, &CommandError{p.Off, fmt.Sprintf("${%s} is %q, which %s", p.Ref, v, why)}
			}
			b.WriteString(v)
		}
		arg := b.String()
		if i == 0 {
			if why := commandWhy(arg); why != "" {
				return nil, &CommandError{w.Off, fmt.Sprintf("the command %q %s", arg, why)}
			}
		} else if why := literalWhy(arg); why != "" {
			return nil, &CommandError{w.Off, fmt.Sprintf("the argument %q %s", arg, why)}
		}
		argv[i] = arg
	}
	return argv, nil
}

// literalWhy says why s cannot be one argument of a sudoers line, or "".
// sudoers joins a command's arguments with spaces before it compares them,
// so an argument holding a space is two to it; "" means "no arguments";
// and * ? [ ] \ ! # and quotes have meanings there of their own.
func literalWhy(s string) string {
	if s == "" {
		return "is empty, which a sudoers line cannot tell from no argument at all"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("@%+./_,:=-", c) >= 0:
		case c == ' ' || c == '\t':
			return "holds a space, which a sudoers line cannot tell from two arguments"
		default:
			return fmt.Sprintf("holds %q, which a sudoers line cannot hold literally (letters, digits and @ %% + . / _ , : = - only)", c)
		}
	}
	return ""
}

// commandWhy says why s cannot be the command of a sudoers line, or "":
// it must be an absolute path or a bare name, of literal characters.
func commandWhy(s string) string {
	if why := literalWhy(s); why != "" {
		return why
	}
	switch {
	case strings.ContainsAny(s, ",:="):
		return "holds , : or =, which no command path of a sudoers line may"
	case strings.HasPrefix(s, "/"):
		if strings.Contains(s+"/", "/../") || strings.Contains(s+"/", "/./") || strings.HasSuffix(s, "/") {
			return "is not a clean absolute path"
		}
	case strings.Contains(s, "/"):
		return "is a relative path; write an absolute path or a bare name (looked up in " + strings.Join(SudoSearchPath, ":") + ")"
	}
	return ""
}

// SudoersWord writes an argument that literalWhy accepts as a sudoers
// line holds it: , : and = escaped with a backslash.
func SudoersWord(s string) string {
	r := strings.NewReplacer(",", `\,`, ":", `\:`, "=", `\=`)
	return r.Replace(s)
}

// SudoCommand is one command a contract runs through sudo: on which
// target, what sudo runs (after `sudo -n --`), and where it is declared.
type SudoCommand struct {
	Target string   // the target's name ("local" for the engine's host)
	Argv   []string // the command, a bare name or an absolute path, then its arguments
	Pos    Pos      // the command's first word in the contract
	What   string   // "repair of stage ID" or "step ID", for messages
}

// TargetNamed returns the target a stage runs on by name: "" and "local"
// are the engine's host, which a contract may declare as targets.local to
// give it options; nil when it declares none.
func (c *Contract) TargetNamed(name string) *Target {
	if name == "" {
		name = "local"
	}
	return c.Targets[name]
}

// SudoCommands lists every command c runs through sudo: each repair row
// (but a report-only agent's, which never runs) and each sudo=true step
// whose target (per for_each item) has sudo: true,
// local or ssh, with its argv filled (SudoArgv). A command that cannot be
// expressed literally is a Diagnostic at its column instead; so is a
// sudo=true step on a target without sudo. Lint reports the diagnostics
// and `contractd sudoers` prints the commands, so both see one list.
func (c *Contract) SudoCommands() ([]SudoCommand, Diagnostics) {
	d := &diags{file: c.Path}
	var out []SudoCommand
	seen := map[string]bool{}
	add := func(target, text, what string, at Pos, vals map[string]string, item string) {
		argv, err := SudoArgv(strings.TrimSpace(text), vals, c.Secrets)
		if err != nil {
			var ce *CommandError
			off := 0
			if errors.As(err, &ce) {
				off = ce.Off
			}
			d.errorf(offsetPos(at, text, off), "%s runs through sudo on target %s (sudo: true%s), word for word without a shell: %v", what, target, item, err)
			return
		}
		k := target + "\x00" + strings.Join(argv, "\x00")
		if seen[k] {
			return
		}
		seen[k] = true
		out = append(out, SudoCommand{Target: target, Argv: argv, Pos: at, What: what})
	}
	for _, st := range c.Stages {
		items := []map[string]any{nil}
		if st.ForEach != "" {
			items = c.ForEach[st.ForEach]
		}
		for i, item := range items {
			vals := c.StageVars(item)
			of := ""
			if item != nil {
				of = fmt.Sprintf("; for_each %s[%d]", st.ForEach, i)
			}
			for _, step := range st.Steps {
				if !step.Sudo {
					continue
				}
				target := cmp.Or(ExpandAttr(st.StepTarget(step), vals), "local")
				t := c.TargetNamed(target)
				if !t.SudoCommands() {
					d.errorf(step.CmdPos, "step %s has sudo=true, but its target %s%s %s", step.ID, target, strings.ReplaceAll(of, "; ", ", "), whyNoSudo(t))
					continue
				}
				add(target, strings.TrimSpace(step.Script), "step "+step.ID, step.CmdPos, vals, of)
			}
			reportOnly := c.IsReportOnly(ExpandAttr(st.Agent, vals))
			for _, row := range st.Actions {
				if row.Builtin != "" || reportOnly {
					continue // a report-only agent's repairs never run: no line allows them
				}
				target := cmp.Or(ExpandAttr(row.On, vals), "local")
				if !c.TargetNamed(target).SudoCommands() {
					continue
				}
				add(target, row.Action, "the repair of stage "+st.ID, row.CmdPos, vals, of)
			}
		}
	}
	return out, d.list
}

// whyNoSudo ends the message for a sudo=true step whose target does not
// run commands through sudo.
func whyNoSudo(t *Target) string {
	switch {
	case t == nil:
		return "has no sudo: true (declare it, e.g. targets: {local: {local: true, sudo: true}})"
	case t.kind().SudoHop:
		return "is a " + t.Kind + " container, where commands run as the container's user already (sudo: true there runs " + t.Kind + " itself through sudo on its host)"
	default:
		return "has no sudo: true"
	}
}
