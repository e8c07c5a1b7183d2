package store

import (
	"errors"
	"fmt"
	"os"
)

// ReadLedger reads the contract's ledger and hands its bytes to decode,
// which checks them (the engine's DecodeLedger). A contract that never
// wrote one calls nothing and returns nil. When decode refuses the bytes,
// the file is moved aside and ReadLedger returns an error wrapping
// ErrCorrupt; other read errors are returned as they are.
func (s *Store) ReadLedger(name string, decode func([]byte) error) error {
	path, err := s.path(name, ".ledger.json")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	if why := decode(b); why != nil {
		return s.moveAside(path, why)
	}
	return nil
}

// WriteLedger atomically replaces the contract's ledger with b. It fails
// when the name is invalid or the file cannot be written; the old ledger
// then stays.
func (s *Store) WriteLedger(name string, b []byte) error {
	path, err := s.path(name, ".ledger.json")
	if err != nil {
		return err
	}
	return WriteAtomic(path, b)
}
