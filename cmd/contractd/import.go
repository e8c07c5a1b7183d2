package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/contracts/monitrc"
)

// cmdImport translates another monitor's configuration into contracts:
// `contractd import monitrc FILE...` writes one contract per Monit check
// entry, lints each as `lint --strict` does, and prints what it could not
// translate as FILE:LINE notes.
func (m *Main) cmdImport(ctx context.Context, args []string) int {
	fs := m.flags("import")
	out := fs.String("out", ".", "write the contracts into `DIR` (made when missing)")
	force := fs.Bool("force", false, "overwrite contracts of the same name in DIR")
	pos, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) < 2 || pos[0] != "monitrc" {
		m.errorf("usage: contractd import monitrc [--out DIR] [--force] FILE...   (the later files read as if the first included them)")
		return exitUsage
	}
	host, _ := os.Hostname()
	res, err := monitrc.Import(pos[1:], monitrc.Options{Hostname: host})
	var errs monitrc.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			m.errorf("import: %v", e)
		}
		m.errorf("import: %d %s in the monitrc; nothing was written", len(errs), pluralWord(len(errs), "error", "errors"))
		return exitUsage
	}
	if err != nil {
		m.errorf("import: %v", err)
		return exitUsage
	}
	if len(res.Contracts) == 0 {
		m.errorf("import: no check entry in %v: nothing to translate (a monitrc that only includes others: name them too)", pos[1:])
		return exitFailed
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		m.errorf("import: %v", err)
		return exitFailed
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	if !*force {
		for _, c := range res.Contracts {
			if _, err := os.Stat(filepath.Join(*out, c.Name+".md")); err == nil {
				m.errorf("import: %s exists; nothing was written (--force overwrites, or choose another --out)", filepath.Join(*out, c.Name+".md"))
				return exitFailed
			}
		}
	}
	code := exitOK
	say := func(d contracts.Diagnostic) {
		if d.Severity == contracts.DiagError || d.Severity == contracts.DiagWarning {
			fmt.Fprintln(m.Stdout, d.String())
			code = exitFailed
		}
	}
	var loaded []*contracts.Contract
	for _, c := range res.Contracts {
		path := filepath.Join(*out, c.Name+".md")
		if err := writeNew(path, c.Text, flags); err != nil {
			m.errorf("import: %v", err)
			return exitFailed
		}
		fmt.Fprintf(m.Stdout, "wrote %s (check %s at %s)\n", path, c.Service, c.Pos)
		// The import is held to what it promises: every contract lints
		// clean under --strict. A diagnostic here is the import's fault.
		lc, ds := contracts.LoadFile(path, contracts.Options{})
		for _, d := range ds {
			say(d)
		}
		if lc != nil {
			loaded = append(loaded, lc)
		}
	}
	// And so does the directory, as `lint --strict DIR` reads it: the
	// depends_on of each contract name contracts written beside it.
	for _, d := range contracts.CheckFleet(contracts.Fleet(loaded, contracts.Options{})) {
		for _, c := range loaded {
			if d.Pos.File == c.Path {
				say(d)
			}
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintln(m.Stdout, n.String())
	}
	for _, d := range res.Dropped {
		fmt.Fprintf(m.Stdout, "not needed: %s\n", d)
	}
	fmt.Fprintf(m.Stdout, "%d %s written to %s; %d %s what is left for you (also in each contract, under \"Left for you after the import\")\n",
		len(res.Contracts), pluralWord(len(res.Contracts), "contract", "contracts"), *out,
		len(res.Notes), pluralWord(len(res.Notes), "note says", "notes say"))
	if code != exitOK {
		m.errorf("import: a translated contract does not lint clean under --strict (above); please report it with the monitrc")
	}
	return code
}

func writeNew(path, text string, flags int) error {
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (--force overwrites)", path)
	}
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
