// Package etcdstore keeps contractd's state in etcd, for several `contractd
// serve` instances that share one contract directory (`serve --etcd`): the
// same store.Backend as the files of a state directory, under one key
// prefix per contract:
//
//	PREFIX/contracts/NAME/ledger          the ledger (JSON, as the file)
//	PREFIX/contracts/NAME/snapshot        the Maintains snapshot
//	PREFIX/contracts/NAME/history/STAMP   one run record per key, bounded
//	PREFIX/contracts/NAME/ledger.corrupt-STAMP   a ledger that did not validate
//
// Writes are fenced: every write of a run is one etcd transaction that
// also compares the instance's ownership of the contract (the create
// revision of its election key, from Options.Fence) and the ledger's
// revision as last read. An instance that was paused or cut off past its
// lease wakes up to transactions that fail: the write does not happen and
// the error wraps store.ErrFenced, so the repair whose intent it was does
// not run and the message it was recording is not sent.
//
// Every request rides out an etcd leader change: each attempt has its own
// deadline and requires a leader, and a transient failure (the member was
// killed, it has no leader yet, its leader died with the request) is tried
// again on the client's next connection until Options.Timeout has passed.
// A retried write never lands twice: a ledger write that an earlier
// attempt already made is recognised by its value, and the other writes
// put the same value under the same key.
package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/engine/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Fence returns the comparisons that hold while this instance owns
// contract name, for the transaction of every write. It fails with an
// error wrapping store.ErrFenced when the instance does not own it, and
// store.ErrUnavailable when etcd cannot be reached.
type Fence func(name string) ([]clientv3.Cmp, error)

// DefaultTimeout bounds one read or write of the store, its retries
// included.
const DefaultTimeout = 5 * time.Second

// minAttempt and maxAttempt bound the deadline of one attempt: a write on
// a loaded host may take a few hundred milliseconds with nothing wrong,
// and one stuck on a follower whose leader died is better given up after
// about an election timeout (etcd's default is 1 s) than waited for: it
// waits the server's request timeout (7 s) otherwise.
const (
	minAttempt = 500 * time.Millisecond
	maxAttempt = time.Second
)

// Options configure a Store. Zero values have defaults.
type Options struct {
	// Fence makes every write a fenced transaction (a daemon's runs).
	// Nil means writes by an operator (maintenance, reset): they only
	// compare the ledger's revision, so they never overwrite a run's
	// write they did not see.
	Fence Fence
	// Timeout bounds one read or write, retries across a leader change
	// included (DefaultTimeout); a daemon gives its lease TTL, so a write
	// is retried for as long as the lease that fences it can live.
	Timeout time.Duration
	// Attempt bounds one try of a request (a fifth of Timeout, between
	// half a second and a second): a request stuck on a follower whose
	// leader died is given up and tried again rather than waited for.
	Attempt      time.Duration
	Clock        clock.Clock // snapshot times, history keys (the wall clock)
	HistoryLimit int         // records kept per contract (store.DefaultHistory)
	// Serializable makes reads answer from the member the client talks
	// to, without asking the leader: a view of the state (a status page)
	// that must answer without quorum, at the price of lagging a member
	// that is behind. Runs and operators read linearizably.
	Serializable bool
}

// Store is the etcd backend. It is safe for concurrent use.
type Store struct {
	cli    *clientv3.Client
	ctx    context.Context
	prefix string
	opts   Options

	mu    sync.Mutex
	revs  map[string]int64         // the ledger's mod revision as this store last read or wrote it
	locks map[string]chan struct{} // one run at a time per contract in this process
}

var _ store.Backend = (*Store)(nil)

// New returns the store of the contracts under prefix (e.g. "/contractd/")
// on cli. Requests are made under ctx, each bounded by Options.Timeout.
func New(ctx context.Context, cli *clientv3.Client, prefix string, opts Options) *Store {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Attempt <= 0 {
		opts.Attempt = min(max(opts.Timeout/5, minAttempt), maxAttempt)
	}
	if opts.Clock == nil {
		opts.Clock = clock.UTC{}
	}
	if opts.HistoryLimit <= 0 {
		opts.HistoryLimit = store.DefaultHistory
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Store{cli: cli, ctx: ctx, prefix: prefix, opts: opts, revs: map[string]int64{}, locks: map[string]chan struct{}{}}
}

// Unfenced returns the store for an operator's writes (maintenance,
// reset) on the same connection: no ownership compared, only the ledger's
// revision.
func (s *Store) Unfenced() store.Backend {
	o := s.opts
	o.Fence, o.Serializable = nil, false
	return New(s.ctx, s.cli, s.prefix, o)
}

// Reader returns the store for views of the state (the status page, the
// API, the metrics) on the same connection: unfenced, its reads
// serializable (see Options.Serializable), its own record of the ledger's
// revision, so a view never changes what a run's write compares.
func (s *Store) Reader() store.Backend {
	o := s.opts
	o.Fence, o.Serializable = nil, true
	return New(s.ctx, s.cli, s.prefix, o)
}

// Contracts returns the names of the contracts with state under the
// prefix, sorted. It fails with store.ErrUnavailable when etcd cannot be
// read.
func (s *Store) Contracts() ([]string, error) {
	dir := s.prefix + "contracts/"
	resp, err := s.get(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, unavailable("list contracts", err)
	}
	var names []string
	for _, kv := range resp.Kvs {
		name, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), dir), "/")
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name) // keys come sorted
		}
	}
	return names, nil
}

// key returns the key of one part of a contract's state, or store.ErrName.
func (s *Store) key(name, part string) (string, error) {
	if err := store.CheckName(name); err != nil {
		return "", err
	}
	return s.prefix + "contracts/" + name + "/" + part, nil
}

// fence returns the ownership comparisons of a write (none for an
// operator's store).
func (s *Store) fence(name string) ([]clientv3.Cmp, error) {
	if s.opts.Fence == nil {
		return nil, nil
	}
	return s.opts.Fence(name)
}

// try runs req until it succeeds, fails for good or Options.Timeout has
// passed, and returns its last error. Each attempt has its own deadline
// (Options.Attempt) and, unless reads are serializable, requires a leader:
// a member without one answers at once instead of queueing the request.
// Only a transient failure is tried again (see transient); an error req
// makes itself (a fence that says this instance lost the contract) ends
// it.
func (s *Store) try(req func(ctx context.Context) error) error {
	deadline := time.Now().Add(s.opts.Timeout)
	pause := 25 * time.Millisecond
	for {
		end := time.Now().Add(s.opts.Attempt)
		if end.After(deadline) {
			end = deadline
		}
		ctx, cancel := context.WithDeadline(s.ctx, end)
		if !s.opts.Serializable {
			ctx = clientv3.WithRequireLeader(ctx)
		}
		err := req(ctx)
		cancel()
		if err == nil || !transient(err) || s.ctx.Err() != nil || time.Now().Add(pause).After(deadline) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// transient reports whether a failed request may succeed when tried
// again: etcd unavailable for now (no leader yet, the leader changed,
// the member stopped, a request timed out on the server) or the
// attempt's own deadline.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable || ee.Code() == codes.DeadlineExceeded
	}
	if st, ok := status.FromError(err); ok {
		return st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded
	}
	return false
}

// get reads key with opts, serializably when Options.Serializable.
func (s *Store) get(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if s.opts.Serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	var resp *clientv3.GetResponse
	err := s.try(func(ctx context.Context) error {
		var err error
		resp, err = s.cli.Get(ctx, key, opts...)
		return err
	})
	return resp, err
}

// txn commits the transaction build returns, rebuilt for every attempt
// so the fence is asked again each time. An error of build ends it.
func (s *Store) txn(build func() (cmps []clientv3.Cmp, then, els []clientv3.Op, err error)) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := s.try(func(ctx context.Context) error {
		cmps, then, els, err := build()
		if err != nil {
			return err
		}
		resp, err = s.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		return err
	})
	return resp, err
}

// unavailable wraps a failed request as store.ErrUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("%s: %w: %v", what, store.ErrUnavailable, err)
}

// Lock takes the contract's run lock in this process. The daemon that
// owns a contract is its only runner, so ownership is the cluster-wide
// lock: Lock fails with store.ErrLocked when this instance does not own
// it. When etcd cannot be reached it still takes the local lock: the run
// then probes and reports without writing.
func (s *Store) Lock(ctx context.Context, name string, wait time.Duration) (func(), error) {
	if err := store.CheckName(name); err != nil {
		return nil, err
	}
	if _, err := s.fence(name); err != nil && !errors.Is(err, store.ErrUnavailable) {
		return nil, fmt.Errorf("lock %s: %v: %w", name, err, store.ErrLocked)
	}
	s.mu.Lock()
	ch := s.locks[name]
	if ch == nil {
		ch = make(chan struct{}, 1)
		s.locks[name] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case ch <- struct{}{}:
		case <-t.C:
			return nil, fmt.Errorf("lock %s after %s: %w", name, wait, store.ErrLocked)
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s: %w", name, ctx.Err())
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-ch }) }, nil
}

// ReadLedger hands the contract's ledger to decode (nothing when it has
// none) and remembers its revision for the next write. A ledger decode
// refuses is moved aside to ledger.corrupt-STAMP, and ReadLedger returns
// an error wrapping store.ErrCorrupt. It fails with store.ErrUnavailable
// when etcd cannot be reached.
func (s *Store) ReadLedger(name string, decode func([]byte) error) error {
	key, err := s.key(name, "ledger")
	if err != nil {
		return err
	}
	if _, err := s.fence(name); errors.Is(err, store.ErrUnavailable) {
		return err
	}
	resp, err := s.get(key)
	if err != nil {
		return unavailable("read ledger "+name, err)
	}
	if len(resp.Kvs) == 0 {
		s.setRev(name, 0)
		return nil
	}
	kv := resp.Kvs[0]
	if why := decode(kv.Value); why != nil {
		return s.moveAside(name, key, kv.ModRevision, kv.Value, why)
	}
	s.setRev(name, kv.ModRevision)
	return nil
}

// staleRev is the revision kept for a contract whose ledger write was
// refused by a change made since it was read: every later write fails with
// ErrConflict until ReadLedger reads the ledger again.
const staleRev = -1

func (s *Store) setRev(name string, rev int64) {
	s.mu.Lock()
	s.revs[name] = rev
	s.mu.Unlock()
}

func (s *Store) rev(name string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.revs[name]
	return r, ok
}

// moveAside puts a value that did not validate at KEY.corrupt-STAMP and
// deletes it, in one transaction, and returns the store.CorruptError to
// report.
func (s *Store) moveAside(name, key string, rev int64, value []byte, why error) error {
	aside := key + ".corrupt-" + s.opts.Clock.Now().UTC().Format("20060102T150405.000Z")
	_, err := s.txn(func() ([]clientv3.Cmp, []clientv3.Op, []clientv3.Op, error) {
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)},
			[]clientv3.Op{clientv3.OpPut(aside, string(value)), clientv3.OpDelete(key)}, nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %v; and moving it aside failed: %w", key, why, err)
	}
	s.setRev(name, 0)
	return &store.CorruptError{Path: key, MovedTo: aside, Err: why}
}

// ErrConflict is store.ErrConflict: the ledger changed since this store
// read it.
var ErrConflict = store.ErrConflict

// WriteLedger replaces the contract's ledger in one transaction that
// compares the ownership (a fenced store) and the ledger's revision as
// last read or written here. It fails with store.ErrFenced when the
// instance no longer owns the contract, ErrConflict when another writer
// changed the ledger, and store.ErrUnavailable when etcd cannot be
// reached; the ledger in etcd is then unchanged.
func (s *Store) WriteLedger(name string, b []byte) error {
	key, err := s.key(name, "ledger")
	if err != nil {
		return err
	}
	if _, err := s.fence(name); err != nil {
		return fmt.Errorf("write ledger %s: %w", name, err)
	}
	rev, known := s.rev(name)
	if known && rev == staleRev {
		// A write of this ledger was refused: what the writer holds
		// predates another's change (an operator's maintenance or reset),
		// and writing it now would undo that change. Only a new read
		// writes again.
		return fmt.Errorf("write ledger %s: %w", name, ErrConflict)
	}
	if !known {
		// Never read here: an operator's write must not overwrite what a
		// run wrote; read first.
		if err := s.ReadLedger(name, func([]byte) error { return nil }); err != nil {
			return err
		}
		rev, _ = s.rev(name)
	}
	var fence []clientv3.Cmp
	resp, err := s.txn(func() ([]clientv3.Cmp, []clientv3.Op, []clientv3.Op, error) {
		cmps, err := s.fence(name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("write ledger %s: %w", name, err)
		}
		fence = cmps
		cmps = append(cmps[:len(cmps):len(cmps)], clientv3.Compare(clientv3.ModRevision(key), "=", rev))
		// On a failed comparison the ledger comes back: an attempt whose
		// answer was lost may have written it already.
		return cmps, []clientv3.Op{clientv3.OpPut(key, string(b))}, []clientv3.Op{clientv3.OpGet(key)}, nil
	})
	switch {
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrUnavailable):
		return err
	case err != nil:
		return unavailable("write ledger "+name, err)
	case resp.Succeeded:
		s.setRev(name, resp.Header.Revision)
		return nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 && bytes.Equal(kvs[0].Value, b) {
		s.setRev(name, kvs[0].ModRevision) // this very write, made by an earlier attempt
		return nil
	}
	return s.refused(name, "write ledger", fence)
}

// refused says why a transaction's comparisons failed: the ownership
// (store.ErrFenced, asked again of etcd with the fence alone) or the
// ledger's revision (ErrConflict).
func (s *Store) refused(name, what string, fence []clientv3.Cmp) error {
	if len(fence) > 0 {
		resp, err := s.txn(func() ([]clientv3.Cmp, []clientv3.Op, []clientv3.Op, error) { return fence, nil, nil, nil })
		if err != nil {
			return unavailable(what+" "+name, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("%s %s: %w: its election key is gone or was won again by another", what, name, store.ErrFenced)
		}
	}
	s.setRev(name, staleRev) // what this writer holds is stale until it reads again
	return fmt.Errorf("%s %s: %w", what, name, ErrConflict)
}

// ReadSnapshot returns the contract's Maintains snapshot and when it was
// written; nil and the zero time when it has none. A snapshot that does not
// validate is moved aside (store.ErrCorrupt). It fails with
// store.ErrUnavailable when etcd cannot be reached.
func (s *Store) ReadSnapshot(name string) (map[string]any, time.Time, error) {
	key, err := s.key(name, "snapshot")
	if err != nil {
		return nil, time.Time{}, err
	}
	if _, err := s.fence(name); errors.Is(err, store.ErrUnavailable) {
		return nil, time.Time{}, err
	}
	resp, err := s.get(key)
	if err != nil {
		return nil, time.Time{}, unavailable("read snapshot "+name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, time.Time{}, nil
	}
	kv := resp.Kvs[0]
	data, at, why := store.DecodeSnapshot(name, kv.Value)
	if why != nil {
		aside := key + ".corrupt-" + s.opts.Clock.Now().UTC().Format("20060102T150405.000Z")
		if _, err := s.txn(func() ([]clientv3.Cmp, []clientv3.Op, []clientv3.Op, error) {
			return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)},
				[]clientv3.Op{clientv3.OpPut(aside, string(kv.Value)), clientv3.OpDelete(key)}, nil, nil
		}); err != nil {
			return nil, time.Time{}, fmt.Errorf("%s: %v; and moving it aside failed: %w", key, why, err)
		}
		return nil, time.Time{}, &store.CorruptError{Path: key, MovedTo: aside, Err: why}
	}
	return data, at, nil
}

// WriteSnapshot replaces the contract's snapshot in a fenced transaction.
// It fails with store.ErrFenced, or store.ErrUnavailable.
func (s *Store) WriteSnapshot(name string, data map[string]any) error {
	key, err := s.key(name, "snapshot")
	if err != nil {
		return err
	}
	b, err := store.EncodeSnapshot(name, data, s.opts.Clock.Now())
	if err != nil {
		return err
	}
	return s.put(name, "write snapshot", clientv3.OpPut(key, string(b)))
}

// put runs ops in one transaction under the fence.
// Tried again, the ops put the same values under the same keys (or
// delete the same range): an attempt that landed unseen changes nothing.
func (s *Store) put(name, what string, ops ...clientv3.Op) error {
	var cmps []clientv3.Cmp
	resp, err := s.txn(func() ([]clientv3.Cmp, []clientv3.Op, []clientv3.Op, error) {
		var err error
		if cmps, err = s.fence(name); err != nil {
			return nil, nil, nil, fmt.Errorf("%s %s: %w", what, name, err)
		}
		return cmps, ops, nil, nil
	})
	switch {
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrUnavailable):
		return err
	case err != nil:
		return unavailable(what+" "+name, err)
	case !resp.Succeeded:
		return s.refused(name, what, cmps)
	}
	return nil
}

// AppendHistory adds one run record under a key that sorts by time, and
// drops the oldest beyond Options.HistoryLimit. It fails when rec is not a
// run record (store.RunRecord.Check), with store.ErrFenced, or with
// store.ErrUnavailable.
func (s *Store) AppendHistory(name string, rec store.RunRecord) error {
	dir, err := s.key(name, "history/")
	if err != nil {
		return err
	}
	b, err := store.EncodeRecord(rec)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	key := fmt.Sprintf("%s%020d-%08x", dir, s.opts.Clock.Now().UnixNano(), rand.Uint32())
	if err := s.put(name, "append history", clientv3.OpPut(key, string(b))); err != nil {
		return err
	}
	resp, err := s.get(dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count <= int64(s.opts.HistoryLimit) {
		return nil // trimmed by a later append
	}
	old, err := s.get(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(resp.Count-int64(s.opts.HistoryLimit)))
	if err != nil || len(old.Kvs) == 0 {
		return nil
	}
	last := string(old.Kvs[len(old.Kvs)-1].Key)
	return s.put(name, "trim history", clientv3.OpDelete(dir, clientv3.WithRange(last+"\x00")))
}

// History returns up to the last n run records, oldest first (all when
// n <= 0). Records that are not run records are left out and named by a
// *store.SkippedError returned beside the good ones. It fails with
// store.ErrUnavailable when etcd cannot be reached.
func (s *Store) History(name string, n int) ([]store.RunRecord, error) {
	dir, err := s.key(name, "history/")
	if err != nil {
		return nil, err
	}
	if _, err := s.fence(name); errors.Is(err, store.ErrUnavailable) {
		return nil, err
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if n > 0 {
		opts = append(opts, clientv3.WithLimit(int64(n)))
	}
	resp, err := s.get(dir, opts...)
	if err != nil {
		return nil, unavailable("read history "+name, err)
	}
	var recs []store.RunRecord
	var bad []store.BadLine
	for i := len(resp.Kvs) - 1; i >= 0; i-- {
		r, err := store.DecodeRecord(resp.Kvs[i].Value)
		if err != nil {
			bad = append(bad, store.BadLine{Line: len(resp.Kvs) - i, Err: fmt.Errorf("%s: %w", resp.Kvs[i].Key, err)})
			continue
		}
		recs = append(recs, r)
	}
	if len(bad) > 0 {
		return recs, &store.SkippedError{Path: dir, Lines: bad}
	}
	return recs, nil
}
