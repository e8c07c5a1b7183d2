package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalled is the cause of a context a signal cancelled: a run records
// it as why it was interrupted ("SIGTERM received"), and a one-shot run
// exits with the shell's code for it (128 + the signal's number).
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return unix.SignalName(s.sig) + " received" }

// Is makes errors.Is(err, context.Canceled) true, as for any cancellation.
func (s signalled) Is(target error) bool { return target == context.Canceled }

// notifyContext is signal.NotifyContext with a typed cause: the returned
// context is cancelled with a signalled when one of sigs arrives. stop
// releases the signals.
func notifyContext(parent context.Context, sigs ...os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			if sig, ok := s.(syscall.Signal); ok {
				cancel(signalled{sig})
				return
			}
			cancel(errors.New(s.String() + " received"))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// interruptedExit returns the exit code of a one-shot run that a signal
// interrupted (130 for SIGINT, 143 for SIGTERM), and whether one did.
func interruptedExit(ctx context.Context) (int, bool) {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		return 128 + int(s.sig), true
	}
	return 0, false
}
