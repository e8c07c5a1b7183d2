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
// guard; `set daemon` and `every N cycles` the schedule; `depends on`
// depends_on, naming the contracts of the same import; `set alert` and
// `set mailserver` an email route. What has none is a Note: its FILE:LINE,
// the construct, and what the author must do, in the contract and in
// Result.Notes.
package monitrc

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
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
	// Every check's contract is named first, so a dependency may name a
	// check written after it.
	names := map[string]bool{}
	contractOf := map[string]string{} // a check's name, lower case (Monit's are case-insensitive)
	byContract := map[string]*service{}
	for _, s := range cfg.services {
		host := s.name == "$HOST"
		if host {
			s.name = opts.Hostname
		}
		s.contract = contractName(s.name, names)
		if host {
			contractOf["$host"] = s.contract
		}
		if _, ok := contractOf[strings.ToLower(s.name)]; !ok {
			contractOf[strings.ToLower(s.name)] = s.contract
		}
		byContract[s.contract] = s
	}
	dependencyLoops(cfg, contractOf, byContract)
	for _, s := range cfg.services {
		name := s.contract
		b := &builder{cfg: cfg, s: s, opts: opts, name: name, stage: stageID(s.name), contractOf: contractOf}
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

// dependencyLoops records an error for each dependency loop among the
// checks, at the `depends on` that closes it (the first of the loop in
// file order): each check would wait for the other, so neither would ever
// be judged on its own. Monit refuses such a file too ("Found a depend
// loop"), and lint refuses the contracts it would make.
func dependencyLoops(cfg *config, contractOf map[string]string, byContract map[string]*service) {
	deps := func(contract string) []string {
		s := byContract[contract]
		if s == nil {
			return nil
		}
		var out []string
		for _, d := range s.depends {
			if next, ok := contractOf[strings.ToLower(d.name.text)]; ok {
				out = append(out, next)
			}
		}
		return out
	}
	said := map[string]bool{}
	for _, s := range cfg.services {
		for _, d := range s.depends {
			dep, ok := contractOf[strings.ToLower(d.name.text)]
			if !ok {
				continue
			}
			path := contracts.DependencyPath(dep, s.contract, deps)
			if path == nil {
				continue
			}
			loop := []string{s.name} // by the checks' names in the monitrc
			for _, c := range path {
				loop = append(loop, byContract[c].name)
			}
			key := append([]string(nil), loop[1:]...)
			sort.Strings(key)
			if said[strings.Join(key, "\x00")] {
				continue
			}
			said[strings.Join(key, "\x00")] = true
			if len(loop) == 2 {
				cfg.errorf(d.name, d.name, "depends on %s: %s depends on itself, so it would wait for itself and never be judged "+
					"(Monit refuses it too: \"Found a depend loop\"); remove this depends", d.name.text, s.name)
				continue
			}
			cfg.errorf(d.name, d.name, "depends on %s: a dependency loop, %s: each check would wait for the other, so neither "+
				"would be judged on its own (Monit refuses it too: \"Found a depend loop\"); remove one of these depends",
				d.name.text, strings.Join(loop, " → "))
		}
	}
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
