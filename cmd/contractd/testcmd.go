package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/contractd/contractd/engine/replay"
)

// cmdTest runs contracts against their recorded test files through the
// real engine, with a fake clock and no targets, and prints a diff of
// every expectation a run missed. A contract file (NAME.md) stands for its
// test file (NAME.test.yaml). Exit 0 when every run passed, 1 when one
// did not, 2 when a test file or its contract does not load.
func (m *Main) cmdTest(ctx context.Context, args []string) int {
	fs := m.flags("test")
	verbose := fs.Bool("v", false, "print every run, passed or not")
	files, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(files) == 0 {
		m.errorf("usage: contractd test %s", commands["test"].args)
		return exitUsage
	}
	code := exitOK
	for _, f := range files {
		if base, ok := strings.CutSuffix(f, ".md"); ok {
			f = base + ".test.yaml"
			if _, err := os.Stat(f); err != nil {
				m.errorf("test: %s has no test file: write %s (docs/contract-format.md, \"Testing a contract\")", base+".md", f)
				code = exitUsage
				continue
			}
		}
		res, err := replay.Test(ctx, f)
		if err != nil {
			if errors.Is(err, replay.ErrFile) {
				m.errorf("test: %s", strings.TrimPrefix(err.Error(), replay.ErrFile.Error()+": "))
				code = exitUsage
				continue
			}
			m.fail("test", err)
			code = max(code, exitFailed)
			continue
		}
		failed := 0
		for _, r := range res.Runs {
			if len(r.Diffs) > 0 {
				failed++
			}
		}
		if failed == 0 {
			say(m.Stdout, "ok    %s  (%s, %d runs)\n", f, res.Contract, len(res.Runs))
		} else {
			say(m.Stdout, "FAIL  %s  (%s: %d of %d runs differ)\n", f, res.Contract, failed, len(res.Runs))
			code = max(code, exitFailed)
		}
		for _, r := range res.Runs {
			if len(r.Diffs) == 0 && !*verbose {
				continue
			}
			verdict := "ok"
			if len(r.Diffs) > 0 {
				verdict = "differs"
			}
			say(m.Stdout, "  %s: %s (overall %s)\n", r.Label, verdict, r.Severity)
			for _, d := range r.Diffs {
				say(m.Stdout, "    %s\n", d)
			}
		}
	}
	return code
}
