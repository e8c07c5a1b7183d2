package store

import (
	"bytes"
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

// readHistory returns the good records of a history file, each with its
// line as it is in the file, and the lines it skipped: lines that are not
// run records (DecodeRecord).
func (s *Store) readHistory(path string) ([]RunRecord, [][]byte, []BadLine, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read history: %w", err)
	}
	var recs []RunRecord
	var lines [][]byte
	var bad []BadLine
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		r, err := DecodeRecord(line)
		if err != nil {
			bad = append(bad, BadLine{Line: i + 1, Err: err})
			continue
		}
		recs, lines = append(recs, r), append(lines, line)
	}
	return recs, lines, bad, nil
}

// AppendHistory adds one run record to the contract's history, keeping
// the last HistoryLimit records. It fails when rec is not a run record
// (RunRecord.Check) or the file cannot be written. When the old history
// held lines that are not run records, the file as it was is moved aside,
// the new history keeps its good records and this one, and the error is a
// *SkippedError (wrapping ErrCorrupt) naming the lines.
func (s *Store) AppendHistory(name string, rec RunRecord) error {
	path, err := s.path(name, ".history.jsonl")
	if err != nil {
		return err
	}
	line, err := EncodeRecord(rec)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, lines, bad, err := s.readHistory(path)
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
	lines = append(lines, line)
	limit := s.HistoryLimit
	if limit <= 0 {
		limit = DefaultHistory
	}
	if len(lines) > limit {
		lines = lines[len(lines)-limit:]
	}
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(l)
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
func (s *Store) History(name string, n int) ([]RunRecord, error) {
	path, err := s.path(name, ".history.jsonl")
	if err != nil {
		return nil, err
	}
	recs, _, bad, err := s.readHistory(path)
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
