// Command contractd runs responsibility contracts: Markdown runbooks that
// the engine executes as monitors that heal.
//
// Exit codes: 0 success (a run whose agents are sick still exits 0, so a
// systemd timer is never marked failed by a sick agent); 1 the engine itself
// failed (state store, lock, deadline) or lint found errors; 2 bad usage or a
// contract that does not load; with --nagios, 0/1/2/3 for
// OK/WARNING/CRITICAL/UNKNOWN.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := NewMain()
	code := m.Run(ctx, os.Args)
	stop()
	os.Exit(code)
}
