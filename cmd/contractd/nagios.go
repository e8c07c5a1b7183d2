package main

import (
	"path/filepath"
	"strings"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
)

// nagiosUnknown prints the one status line of a check that could not be
// made (a contract that does not load, an engine failure) and returns 3,
// UNKNOWN, as the Nagios plugin guidelines ask.
func (m *Main) nagiosUnknown(name, why string) int {
	say(m.Stdout, "%s %s - %s\n", strings.ToUpper(name), engine.NagiosLabel(3), why)
	return 3
}

// nagiosLoadError is the status line of contract files that did not load:
// the first error diagnostic of the first file that failed.
func (m *Main) nagiosLoadError(files []string, l loadFlags) int {
	opts, err := l.options()
	if err != nil {
		return m.nagiosUnknown("contractd", err.Error())
	}
	for _, f := range files {
		c, diags := contracts.LoadFile(f, opts)
		if c != nil && !diags.HasErrors() {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		if c != nil && c.Name != "" {
			name = c.Name
		}
		for _, d := range diags {
			if d.Severity == contracts.DiagError {
				return m.nagiosUnknown(name, "contract does not load: "+d.String())
			}
		}
		return m.nagiosUnknown(name, "contract does not load")
	}
	return m.nagiosUnknown("contractd", "contracts do not load")
}

// worseNagios returns the worse of two Nagios codes (OK < WARNING <
// UNKNOWN < CRITICAL).
func worseNagios(a, b int) int {
	rank := map[int]int{0: 0, 1: 1, 3: 2, 2: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
