// Package lsp is `contractd lsp`: a Language Server over stdio for
// contract files (NAME.md whose front matter has runtime_contract) and test
// files (NAME.test.yaml). Everything it says comes from package contracts
// through the functions lint and explain use: diagnostics are
// contracts.Draft's (Parse's, with the draft kept for the rest), hover is
// contracts.ExplainAt and the keys' docs, completion reads the step kinds'
// declared values and the front matter's keys, and the code action applies
// a diagnostic's Suggestion.
//
// One file per protocol method (initialize.go, did_open.go, hover.go, …),
// listed in handlers (handlers.go). The protocol's types are
// go.lsp.dev/protocol's; the only state is the open documents.
package lsp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/contractd/contractd/contracts"
)

// Server is one client's session: its open documents and the connection
// it answers on.
type Server struct {
	conn    jsonrpc2.Conn
	opts    contracts.Options
	version string

	mu   sync.Mutex
	docs map[protocol.DocumentURI]*document
	// shutdown is set by the shutdown request: from then on only exit
	// is answered.
	shutdown bool
	exit     chan struct{}
	exitOnce sync.Once
}

// Options adjust a server.
type Options struct {
	// Load is what every contract is read with (--max-file-size); a
	// server reads no inventory, so its diagnostics are lint's of the
	// file alone.
	Load contracts.Options
	// Version is what the server calls itself in its initialize answer
	// (contractd's version).
	Version string
}

// exitWait is how long Serve waits for the stream's reader after exit.
const exitWait = time.Second

// ErrExitWithoutShutdown is returned by Serve when the client sent exit
// without shutdown first (the protocol's exit code 1).
var ErrExitWithoutShutdown = errors.New("lsp: exit without shutdown")

// Serve answers one client on rw (stdin and stdout for `contractd lsp`)
// until the client sends exit, the stream ends or ctx is done. It returns
// nil after shutdown and exit, ErrExitWithoutShutdown after an exit
// alone, ctx's error when ctx ended it, and the stream's error otherwise
// (io.EOF when the client closed it).
func Serve(ctx context.Context, rw io.ReadWriteCloser, opts Options) error {
	conn := jsonrpc2.NewConn(jsonrpc2.NewStream(rw))
	s := &Server{conn: conn, opts: opts.Load, version: opts.Version, docs: map[protocol.DocumentURI]*document{}, exit: make(chan struct{})}
	conn.Go(ctx, s.handle)
	select {
	case <-ctx.Done():
		conn.Close()
		<-conn.Done()
		return ctx.Err()
	case <-s.exit:
		conn.Close()
		// Closing a pipe does not interrupt a read already waiting on
		// it (stdin from an editor that keeps it open): every answer is
		// written by now, so do not wait past a moment for the reader.
		select {
		case <-conn.Done():
		case <-time.After(exitWait):
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.shutdown {
			return ErrExitWithoutShutdown
		}
		return nil
	case <-conn.Done():
		return conn.Err()
	}
}

// handle answers one message through its method's handler. A method it
// does not know is an error for a request and nothing for a
// notification; a handler that panics answers an internal error, and the
// server goes on.
func (s *Server) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	h, ok := handlers[req.Method()]
	if !ok {
		if _, call := req.(*jsonrpc2.Call); call {
			return reply(ctx, nil, fmt.Errorf("%w: %s", jsonrpc2.ErrMethodNotFound, req.Method()))
		}
		return nil
	}
	s.mu.Lock()
	down := s.shutdown && req.Method() != "exit"
	s.mu.Unlock()
	if down {
		return reply(ctx, nil, fmt.Errorf("%w: shut down", jsonrpc2.ErrInvalidRequest))
	}
	result, err := s.call(ctx, h, req)
	return reply(ctx, result, err)
}

func (s *Server) call(ctx context.Context, h handler, req jsonrpc2.Request) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("%w: %s: %v", jsonrpc2.ErrInternal, req.Method(), r)
		}
	}()
	return h(ctx, s, req.Params())
}

// notify sends a notification to the client; an error means the
// connection is gone, which the server learns from the connection itself.
func (s *Server) notify(ctx context.Context, method string, params any) {
	_ = s.conn.Notify(ctx, method, params)
}

// doc returns the open document at uri, or nil.
func (s *Server) doc(uri protocol.DocumentURI) *document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[uri]
}
