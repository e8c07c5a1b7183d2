package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/transports"
)

// say writes human output: every string and error argument is made
// Printable, so nothing a target said (probe output, a finding, a remote
// error) can start a line of its own or reach the terminal as a control
// sequence. JSON output does not go through here and keeps the exact data.
func say(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, transports.PrintableArgs(args)...)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressPrinter prints one line per finished step, live.
func progressPrinter(w io.Writer) func(engine.Event) {
	var mu sync.Mutex
	return func(ev engine.Event) {
		mu.Lock()
		defer mu.Unlock()
		say(w, "  %s %s/%s %s (%d ms)\n", engine.Mark(ev.Severity), ev.Stage, ev.Step, ev.Severity, ev.Duration.Milliseconds())
	}
}

// writeTree prints a snapshot as an indented tree, keys sorted.
func writeTree(w io.Writer, v any, indent string) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch x := m[k].(type) {
		case map[string]any:
			say(w, "%s%s:\n", indent, k)
			writeTree(w, x, indent+"  ")
		case nil:
			say(w, "%s%s: null\n", indent, k)
		default:
			say(w, "%s%s: %v\n", indent, k, x)
		}
	}
}

func summarizeAgents(agents map[string]string) string {
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+agents[n])
	}
	return strings.Join(parts, " ")
}
