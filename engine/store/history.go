package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BadLine is a line of a history file that is not a run record.
type BadLine struct {
	Line int   // 1-based line number in the file
	Err  error // what is wrong with it
}

// SkippedError says which lines of a history file were skipped as not run
// records. The records returned beside it are good. errors.Is(err,
// ErrCorrupt) is true.
type SkippedError struct {
	Path    string    // the history file
	Lines   []BadLine // the lines skipped, in file order
	MovedTo string    // where the file as it was went, when it was rewritten
}

// maxListed is how many bad lines a SkippedError names before "and N more".
const maxListed = 3

func (e *SkippedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: skipped %d bad line", e.Path, len(e.Lines))
	if len(e.Lines) != 1 {
		b.WriteByte('s')
	}
	for i, l := range e.Lines {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(e.Lines)-maxListed)
			break
		}
		fmt.Fprintf(&b, "; line %d: %v", l.Line, l.Err)
	}
	if e.MovedTo != "" {
		fmt.Fprintf(&b, "; the file as it was is kept as %s", filepath.Base(e.MovedTo))
	}
	return b.String()
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *SkippedError) Is(target error) bool { return target == ErrCorrupt }

// WithRecordCheck returns the store checking every history record it reads
// with check (a record is a JSON object in any case): a record check
// rejects is skipped and reported like a line that is not JSON.
func (s *Store) WithRecordCheck(check func(json.RawMessage) error) *Store {
	c := *s
	c.checkRecord = check
	return &c
}

// readHistory returns the good records of a history file and the lines it
// skipped: lines that are not JSON objects, or that the record check
// rejects.
func (s *Store) readHistory(path string) ([]json.RawMessage, []BadLine, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	var recs []json.RawMessage
	var bad []BadLine
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := s.record(line); err != nil {
			bad = append(bad, BadLine{Line: i + 1, Err: err})
			continue
		}
		recs = append(recs, json.RawMessage(line))
	}
	return recs, bad, nil
}

// record checks one history line.
func (s *Store) record(line []byte) error {
	return CheckRecord(line, s.checkRecord)
}

// CheckRecord checks one history record as every backend does: a JSON
// object that check (when not nil) accepts.
func CheckRecord(line []byte, check func(json.RawMessage) error) error {
	if !json.Valid(line) {
		return errors.New("not JSON")
	}
	if line[0] != '{' {
		return errors.New("not a JSON object")
	}
	if check != nil {
		return check(line)
	}
	return nil
}

// AppendHistory adds one run record (anything that encodes as a JSON
// object) to the contract's history, keeping the last HistoryLimit records.
// It fails when the record does not encode or the file cannot be written.
// When the old history held lines that are not run records, the file as it
// was is moved aside, the new history keeps its good records and this one,
// and the error is a *SkippedError (wrapping ErrCorrupt) naming the lines.
func (s *Store) AppendHistory(name string, record any) error {
	path, err := s.path(name, ".history.jsonl")
	if err != nil {
		return err
	}
	rec, err := json.Marshal(record)
	if err != nil {
		return fmt.Errorf("encode run record %s: %w", name, err)
	}
	if err := s.record(rec); err != nil {
		return fmt.Errorf("encode run record %s: %w", name, err)
	}
	recs, bad, err := s.readHistory(path)
	if err != nil {
		return err
	}
	var skipped *SkippedError
	if len(bad) > 0 {
		skipped = &SkippedError{Path: path, Lines: bad}
		moved := s.moveAside(path, skipped)
		var ce *CorruptError
		if !errors.As(moved, &ce) {
			return moved
		}
		skipped.MovedTo = ce.MovedTo
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
	if skipped != nil {
		return skipped
	}
	return nil
}

// History returns up to the last n good run records, oldest first (all of
// them when n <= 0). It never changes the file: lines that are not run
// records are skipped, and the records come back with a *SkippedError
// (wrapping ErrCorrupt) that names them; the next AppendHistory moves the
// file aside and drops them.
func (s *Store) History(name string, n int) ([]json.RawMessage, error) {
	path, err := s.path(name, ".history.jsonl")
	if err != nil {
		return nil, err
	}
	recs, bad, err := s.readHistory(path)
	if err != nil {
		return nil, err
	}
	if n > 0 && len(recs) > n {
		recs = recs[len(recs)-n:]
	}
	if len(bad) > 0 {
		return recs, &SkippedError{Path: path, Lines: bad}
	}
	return recs, nil
}
