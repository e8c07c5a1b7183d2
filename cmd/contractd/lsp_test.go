package main

import (
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"
)

// lspFrame is one JSON-RPC message as the protocol frames it.
func lspFrame(body string) string {
	return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

// An editor that sends shutdown and exit but keeps the server's stdin open
// (a pipe it has not closed yet) sees `contractd lsp` exit 0 at once: the
// server does not wait on a read the pipe never ends.
func TestLSPExitsOnExitWithItsInputStillOpen(t *testing.T) {
	cmd := exec.Command(binary(t), "lsp")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootUri":null,"capabilities":{}}}`,
		`{"jsonrpc":"2.0","method":"initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`,
		`{"jsonrpc":"2.0","method":"exit"}`,
	} {
		if _, err := io.WriteString(in, lspFrame(m)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("contractd lsp after shutdown and exit: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("contractd lsp still runs 30 s after exit, its stdin open")
	}
}
