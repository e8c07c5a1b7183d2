// Package monitrc translates Monit control files into contracts: one
// contract per check entry, written as Markdown a person can read, which
// `contractd lint --strict` then checks like any other.
//
// It reads Monit's own grammar (monit(1), "THE MONIT CONTROL FILE"): a
// free-format stream of tokens where noise words (if, and, with, using,
// on, …) may stand anywhere, set statements, check entries, includes
// expanded where they stand. What has a counterpart is translated: a
// process, file, filesystem, program, host, system or network check
// becomes a stage with its probe steps; each `if … then …` a health-table
// row and, where Monit acted, an action-table row; `for N cycles` after=N;
// start/stop/restart programs with their timeouts and `as uid` the
// repairs; `N restarts within M cycles then unmonitor` the crash-loop
// guard; `set daemon` and `every N cycles` the schedule; `set alert` and
// `set mailserver` an email route. What has none is a Note: its FILE:LINE,
// the construct, and what the author must do, in the contract and in
// Result.Notes.
package monitrc

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// Options are what the import takes beyond the files.
type Options struct {
	// Hostname is Monit's $HOST: the name of `check system $HOST` and the
	// default sender, monit@HOST. Empty means "localhost".
	Hostname string
	// Dir, when set, is where relative file names are read from; they are
	// still named as given in positions (web-agent.monitrc:6).
	Dir string
}

// Contract is one translated check entry.
type Contract struct {
	// Name is the contract's name; its file is Name + ".md".
	Name string
	// Service is the check entry's name in the monitrc; Pos its FILE:LINE.
	Service, Pos string
	// Text is the contract.
	Text string
	// Notes are the constructs of this entry (and the global settings it
	// uses) that were not translated.
	Notes []Note
}

// Result is what an import made.
type Result struct {
	Contracts []Contract
	// Notes are every note: global settings first, then each contract's.
	Notes []Note
	// Dropped are settings contractd needs no counterpart for (its own
	// state directory, its outbox, its log), as written.
	Dropped []string
}

// Import reads the control files in order, as if each later one were
// included at the end of the first (the global settings of the first apply
// to all), and translates every check entry. It returns a *SyntaxError
// for text that cannot be split into tokens (an unclosed quote), Errors
// for values no contract could keep (a port that is not 1–65535, a word
// where a number must stand), and the error of a file it cannot read;
// with an error it translates nothing. Everything else it does not
// understand is a note.
func Import(paths []string, opts Options) (*Result, error) {
	if opts.Hostname == "" {
		opts.Hostname = "localhost"
	}
	lx := &lexer{}
	var toks []token
	for _, p := range paths {
		path := p
		if opts.Dir != "" && !filepath.IsAbs(p) {
			path = filepath.Join(opts.Dir, p)
		}
		t, err := lx.readFile(path, p)
		var se *SyntaxError
		if errors.As(err, &se) {
			return nil, se
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		toks = append(toks, t...)
	}
	cfg := &config{}
	p := &parser{toks: toks, cfg: cfg}
	p.parse()
	res := &Result{Dropped: cfg.dropped}
	res.Notes = append(res.Notes, cfg.notes...)
	names := map[string]bool{}
	for _, s := range cfg.services {
		if s.name == "$HOST" {
			s.name = opts.Hostname
		}
		name := contractName(s.name, names)
		b := &builder{cfg: cfg, s: s, opts: opts, name: name, stage: stageID(s.name)}
		b.translate()
		text := b.write()
		sortedNotes(b.notes)
		res.Contracts = append(res.Contracts, Contract{Name: name, Service: s.name, Pos: s.at.pos(), Text: text, Notes: b.notes})
		for _, n := range b.notes {
			if !hasNote(res.Notes, n) {
				res.Notes = append(res.Notes, n)
			}
		}
	}
	if len(cfg.errs) > 0 {
		sortErrors(cfg.errs, fileOrder(toks))
		return nil, cfg.errs
	}
	return res, nil
}

// fileOrder is the files of toks in the order they were read.
func fileOrder(toks []token) []string {
	var files []string
	for i, t := range toks {
		if i == 0 || t.file != toks[i-1].file {
			files = append(files, t.file)
		}
	}
	return files
}

func hasNote(ns []Note, n Note) bool {
	for _, x := range ns {
		if x.Pos == n.Pos && x.Construct == n.Construct && x.Todo == n.Todo {
			return true
		}
	}
	return false
}

var (
	reNotName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
	reNotID   = regexp.MustCompile(`[^A-Za-z0-9_]+`)
)

// contractName makes a service name a contract name (letters, digits,
// . _ -), unique among names (Monit's names are case-insensitive).
func contractName(service string, taken map[string]bool) string {
	name := strings.Trim(reNotName.ReplaceAllString(service, "-"), "-._")
	if name == "" {
		name = "service"
	}
	base := name
	for n := 2; taken[strings.ToLower(name)]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	taken[strings.ToLower(name)] = true
	return name
}

// stageID makes a service name a stage id (letters, digits, _).
func stageID(service string) string {
	id := strings.Trim(reNotID.ReplaceAllString(service, "_"), "_")
	if id == "" || id[0] >= '0' && id[0] <= '9' {
		id = "s_" + id
	}
	return id
}

// Lint loads a translated contract as contractd lint does, so a caller
// can hold the import to lint --strict.
func Lint(c Contract) contracts.Diagnostics {
	_, ds := contracts.Parse(c.Name+".md", []byte(c.Text), contracts.Options{})
	return ds
}
