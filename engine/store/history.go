package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// readHistory returns the records of a history file. A line that is not
// JSON makes the file corrupt: it is moved aside and the error wraps
// ErrCorrupt.
func (s *Store) readHistory(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	var recs []json.RawMessage
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !json.Valid(line) {
			return nil, s.moveAside(path, fmt.Errorf("line %d is not JSON", i+1))
		}
		recs = append(recs, json.RawMessage(line))
	}
	return recs, nil
}

// AppendHistory adds one run record (anything that encodes as JSON) to the
// contract's history, keeping the last HistoryLimit records. It fails when
// the record does not encode or the file cannot be written. When the old
// history was corrupt it is moved aside, the new history starts with this
// record, and the error wraps ErrCorrupt.
func (s *Store) AppendHistory(name string, record any) error {
	path, err := s.path(name, ".history.jsonl")
	if err != nil {
		return err
	}
	rec, err := json.Marshal(record)
	if err != nil {
		return fmt.Errorf("encode run record %s: %w", name, err)
	}
	recs, corrupt := s.readHistory(path)
	if corrupt != nil && !errors.Is(corrupt, ErrCorrupt) {
		return corrupt
	}
	recs = append(recs, rec)
	limit := s.HistoryLimit
	if limit <= 0 {
		limit = DefaultHistory
	}
	if len(recs) > limit {
		recs = recs[len(recs)-limit:]
	}
	var buf bytes.Buffer
	for _, r := range recs {
		buf.Write(r)
		buf.WriteByte('\n')
	}
	if err := WriteAtomic(path, buf.Bytes()); err != nil {
		return err
	}
	return corrupt
}

// History returns up to the last n run records, oldest first (all of them
// when n <= 0). A corrupt history is moved aside and the error wraps
// ErrCorrupt.
func (s *Store) History(name string, n int) ([]json.RawMessage, error) {
	path, err := s.path(name, ".history.jsonl")
	if err != nil {
		return nil, err
	}
	recs, err := s.readHistory(path)
	if err != nil {
		return nil, err
	}
	if n > 0 && len(recs) > n {
		recs = recs[len(recs)-n:]
	}
	return recs, nil
}
