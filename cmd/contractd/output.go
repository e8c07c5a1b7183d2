package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

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

// progressPrinter prints one line per finished step, live, and while a
// repaired stage waits out its grace before verification, a countdown line
// that it rewrites every second (w is a terminal) until the stage is
// probed again.
func progressPrinter(w io.Writer) func(engine.Event) {
	p := &progress{w: w, waits: map[string]time.Time{}, now: time.Now}
	return p.event
}

type progress struct {
	mu      sync.Mutex
	w       io.Writer
	waits   map[string]time.Time // stage → when it is probed again
	open    bool                 // a countdown line is on screen, unfinished
	ticking bool
	now     func() time.Time
}

func (p *progress) event(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if ev.Status == engine.EventVerifyWait {
		p.waits[ev.Stage] = p.now().Add(ev.Duration)
		say(p.w, "  ⧗ %s: repaired; probing it again in %s to verify\n", ev.Stage, ev.Duration.Round(time.Second))
		if !p.ticking {
			p.ticking = true
			go p.tick()
		}
	} else {
		delete(p.waits, ev.Stage)
		say(p.w, "  %s %s/%s %s (%d ms)\n", engine.Mark(ev.Severity), ev.Stage, ev.Step, ev.Severity, ev.Duration.Milliseconds())
	}
	p.draw()
}

// clear removes the countdown line; the caller holds mu.
func (p *progress) clear() {
	if p.open {
		io.WriteString(p.w, "\r\x1b[K")
		p.open = false
	}
}

// draw writes the countdown line of the stages still waiting, without a
// newline; the caller holds mu.
func (p *progress) draw() {
	if len(p.waits) == 0 {
		return
	}
	stages := make([]string, 0, len(p.waits))
	for s := range p.waits {
		stages = append(stages, s)
	}
	sort.Strings(stages)
	parts := make([]string, 0, len(stages))
	for _, s := range stages {
		left := p.waits[s].Sub(p.now()).Round(time.Second)
		if left < 0 {
			left = 0
		}
		parts = append(parts, fmt.Sprintf("%s in %s", transports.Printable(s), left))
	}
	io.WriteString(p.w, "  ⧗ verifying "+strings.Join(parts, ", "))
	p.open = true
}

// tick redraws the countdown every second while a stage waits.
func (p *progress) tick() {
	for {
		time.Sleep(time.Second)
		p.mu.Lock()
		for s, at := range p.waits {
			if p.now().Sub(at) > 30*time.Second {
				delete(p.waits, s) // its verification never came (the run ended)
			}
		}
		if len(p.waits) == 0 {
			p.clear()
			p.ticking = false
			p.mu.Unlock()
			return
		}
		p.clear()
		p.draw()
		p.mu.Unlock()
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
