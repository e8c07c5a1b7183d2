// Command contractd runs responsibility contracts: Markdown runbooks that
// the engine executes as monitors that heal.
//
// Exit codes: 0 success (a run whose agents are sick still exits 0, so a
// systemd timer is never marked failed by a sick agent); 1 the engine itself
// failed (state store, lock, deadline) or lint found errors; 2 bad usage or a
// contract that does not load; with --nagios, 0/1/2/3 for
// OK/WARNING/CRITICAL/UNKNOWN; 128+N (130, 143) a one-shot run that signal N
// interrupted, after it recorded what it did.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A reader that goes away (`contractd backup-status | head -5`) must
	// not kill a run halfway: with SIGPIPE handled, a write to a closed
	// pipe fails with EPIPE (output errors are ignored) instead of killing
	// the process, and the run finishes and records. Notify, not Ignore:
	// an ignored signal would stay ignored in the commands contractd
	// starts, and a repair's `yes | head` would never end.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := notifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := NewMain()
	code := m.Run(ctx, os.Args)
	stop()
	os.Exit(code)
}
