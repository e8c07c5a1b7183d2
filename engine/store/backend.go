package store

import (
	"context"
	"errors"
	"time"
)

// Backend is where a contract's state lives: the ledger, the Maintains
// snapshot, the run history and the run lock. *Store (files in a state
// directory) is the default; engine/store/etcdstore keeps the same state in
// etcd for several instances that share the contracts (`serve --etcd`).
//
// Every method is safe for concurrent use by different contracts.
type Backend interface {
	// Lock takes the contract's run lock, waiting up to wait. It fails
	// with an error wrapping ErrLocked when another holds it past wait.
	Lock(ctx context.Context, name string, wait time.Duration) (unlock func(), err error)
	// ReadLedger hands the contract's ledger, as stored, to decode (the
	// engine's, which owns what a ledger holds); it calls nothing when
	// there is none. A copy decode refuses is set aside, and ReadLedger
	// returns an error wrapping ErrCorrupt.
	ReadLedger(name string, decode func([]byte) error) error
	// WriteLedger replaces the contract's ledger with b in one write.
	WriteLedger(name string, b []byte) error
	// ReadSnapshot returns the Maintains snapshot and when it was written;
	// nil and the zero time when there is none.
	ReadSnapshot(name string) (map[string]any, time.Time, error)
	// WriteSnapshot replaces the Maintains snapshot.
	WriteSnapshot(name string, data map[string]any) error
	// AppendHistory adds one run record, keeping a bounded history. It
	// fails when rec is not a run record (RunRecord.Check).
	AppendHistory(name string, rec RunRecord) error
	// History returns up to the last n run records, oldest first (all
	// when n <= 0). Records that are not run records are left out and
	// named by a *SkippedError (wrapping ErrCorrupt) returned beside the
	// good ones.
	History(name string, n int) ([]RunRecord, error)
	// Contracts returns the names of the contracts that have state,
	// sorted.
	Contracts() ([]string, error)
}

var _ Backend = (*Store)(nil)

// ErrUnavailable is wrapped when a shared backend cannot be reached (etcd
// lost its quorum, or this instance lost its connection): nothing can be
// recorded, so a run probes and reports but repairs nothing and sends
// nothing.
var ErrUnavailable = errors.New("shared state unavailable")

// ErrFenced is wrapped when a shared backend refused a write because this
// instance no longer owns the contract (its lease expired while it was
// paused or cut off, and another instance took over). The write did not
// happen: a repair whose intent it was does not run, a message it was
// recording is not sent.
var ErrFenced = errors.New("this instance no longer owns the contract")

// ErrConflict is wrapped when a shared backend refused a write because the
// ledger changed since it was read (an operator's maintenance or reset
// landed during the run). The write did not happen; the next run reads the
// new ledger.
var ErrConflict = errors.New("the ledger changed since it was read")
