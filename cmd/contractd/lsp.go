package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/contractd/contractd/lsp"
)

// cmdLSP serves the language server over stdin and stdout for the editor
// that started it (docs/editors.md). It exits 0 after the client's
// shutdown and exit, or when the client closes the stream; 1 on an exit
// without shutdown or a broken stream.
func (m *Main) cmdLSP(ctx context.Context, args []string) int {
	fs := m.flags("lsp")
	var lf loadFlags
	lf.register(fs)
	rest, err := m.parse(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(rest) > 0 {
		m.errorf("usage: contractd lsp %s", commands["lsp"].args)
		return exitUsage
	}
	opts, err := lf.options()
	if err != nil {
		m.errorf("%v", err)
		return exitUsage
	}
	err = lsp.Serve(ctx, stdio{os.Stdin, os.Stdout}, lsp.Options{Load: opts, Version: version})
	switch {
	case err == nil, errors.Is(err, io.EOF), ctx.Err() != nil:
		return exitOK
	case errors.Is(err, lsp.ErrExitWithoutShutdown):
		return exitFailed
	}
	m.errorf("lsp: %v", err)
	return exitFailed
}

// stdio is the process's standard input and output as one stream.
type stdio struct {
	io.Reader
	io.Writer
}

// Close closes standard input, which ends the server's reads.
func (s stdio) Close() error {
	if c, ok := s.Reader.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
