package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"sync/atomic"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/etcdcluster"
	"github.com/contractd/contractd/fixtures/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// cluster starts a one-member etcd and returns a client on it.
func cluster(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := etcdcluster.Start(t.TempDir(), 1, etcdcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.Endpoints(), ","), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// record is a run record numbered i.
func record(i int) store.RunRecord {
	return store.RunRecord{RunID: fmt.Sprint(i), StartedAt: time.Now().UTC(), OverallSeverity: "healthy"}
}

// owner wins the election of contract name on a session of its own, and
// returns the fence of that lead and the session (closing it ends the lead).
func owner(t *testing.T, cli *clientv3.Client, name string) (Fence, *concurrency.Session) {
	t.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	el := concurrency.NewElection(s, "/t/owners/"+name+"/")
	if err := el.Campaign(context.Background(), "me"); err != nil {
		t.Fatal(err)
	}
	key, rev := el.Key(), el.Rev()
	return func(string) ([]clientv3.Cmp, error) {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", rev)}, nil
	}, s
}

func TestStoreKeepsTheStateOfAContract(t *testing.T) {
	cli := cluster(t)
	fence, _ := owner(t, cli, "svc")
	s := New(context.Background(), cli, "/t/", Options{Fence: fence, HistoryLimit: 3})

	l, err := engine.ReadLedger(s, "svc")
	if err != nil || len(l.Units) != 0 {
		t.Fatalf("a contract that never ran: %v, %v", l, err)
	}
	l.Unit("svc").Repairs = []time.Time{time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)}
	if err := engine.WriteLedger(s, "svc", l); err != nil {
		t.Fatal(err)
	}
	l.Intents = append(l.Intents, &engine.Intent{Unit: "svc", Condition: "down", Started: time.Now()})
	if err := engine.WriteLedger(s, "svc", l); err != nil {
		t.Fatalf("a second write of the same owner: %v", err)
	}
	back, err := engine.ReadLedger(New(context.Background(), cli, "/t/", Options{}), "svc")
	if err != nil || len(back.Units["svc"].Repairs) != 1 || len(back.Intents) != 1 {
		t.Fatalf("read back by another instance: %+v, %v", back, err)
	}

	if err := s.WriteSnapshot("svc", map[string]any{"last_repair": "x"}); err != nil {
		t.Fatal(err)
	}
	data, at, err := s.ReadSnapshot("svc")
	if err != nil || data["last_repair"] != "x" || at.IsZero() {
		t.Fatalf("snapshot: %v %v %v", data, at, err)
	}

	for i := 0; i < 5; i++ {
		if err := s.AppendHistory("svc", record(i)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.History("svc", 0)
	if err != nil || len(recs) != 3 {
		t.Fatalf("history of 5 runs with a limit of 3: %d records, %v", len(recs), err)
	}
	if recs[0].RunID != "2" {
		t.Fatalf("oldest kept record is %v, want run 2", recs[0].RunID)
	}
	if err := s.AppendHistory("svc", store.RunRecord{RunID: "no start"}); err == nil || !strings.Contains(err.Error(), "started_at missing") {
		t.Fatalf("a record without a start: %v", err)
	}
	// A value under the history that is not a run record is left out and
	// named.
	if _, err := cli.Put(context.Background(), "/t/contracts/svc/history/99999999999999999999-bad", `{"run_id": 7}`); err != nil {
		t.Fatal(err)
	}
	recs, err = s.History("svc", 0)
	var se *store.SkippedError
	if !errors.As(err, &se) || len(recs) != 3 || !strings.Contains(err.Error(), "-bad: not a run record") {
		t.Fatalf("history with a bad value: %d records, %v", len(recs), err)
	}
	if names, err := s.Contracts(); err != nil || strings.Join(names, " ") != "svc" {
		t.Fatalf("Contracts() = %v, %v", names, err)
	}
}

// A writer whose election key is gone (its lease expired while it was
// paused) is refused: the write does not happen and says ErrFenced.
func TestWriteOfALostOwnerIsFenced(t *testing.T) {
	cli := cluster(t)
	fence, session := owner(t, cli, "svc")
	s := New(context.Background(), cli, "/t/", Options{Fence: fence})
	l, err := engine.ReadLedger(s, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteLedger(s, "svc", l); err != nil {
		t.Fatal(err)
	}
	// Another instance takes over: the first one's lease ends, the other wins.
	session.Close()
	otherFence, _ := owner(t, cli, "svc")
	other := New(context.Background(), cli, "/t/", Options{Fence: otherFence})
	ol, err := engine.ReadLedger(other, "svc")
	if err != nil {
		t.Fatal(err)
	}
	ol.Unit("svc").Repairs = []time.Time{time.Now().UTC()}
	if err := engine.WriteLedger(other, "svc", ol); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}

	l.Intents = append(l.Intents, &engine.Intent{Unit: "svc", Condition: "down", Started: time.Now()})
	err = engine.WriteLedger(s, "svc", l)
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner's intent: %v, want ErrFenced", err)
	}
	if err := s.WriteSnapshot("svc", map[string]any{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner's snapshot: %v, want ErrFenced", err)
	}
	back, _ := engine.ReadLedger(other, "svc")
	if len(back.Intents) != 0 || len(back.Units["svc"].Repairs) != 1 {
		t.Fatalf("the refused write changed the ledger: %+v", back)
	}
}

// An operator's change (maintenance) between a run's read and its write
// is never overwritten: the run's write fails with ErrConflict, and so
// does every later write of what it holds (a run writes its ledger ahead
// several times), until it reads the ledger again.
func TestOperatorChangeIsNotOverwritten(t *testing.T) {
	cli := cluster(t)
	fence, _ := owner(t, cli, "svc")
	run := New(context.Background(), cli, "/t/", Options{Fence: fence})
	l, err := engine.ReadLedger(run, "svc")
	if err != nil {
		t.Fatal(err)
	}
	op := run.Unfenced()
	ol, err := engine.ReadLedger(op, "svc")
	if err != nil {
		t.Fatal(err)
	}
	ol.Maintenance = map[string]*guard.Window{engine.AllAgents: {Since: time.Now(), Until: time.Now().Add(time.Hour)}}
	if err := engine.WriteLedger(op, "svc", ol); err != nil {
		t.Fatalf("the operator's write: %v", err)
	}
	if err := engine.WriteLedger(run, "svc", l); !errors.Is(err, ErrConflict) {
		t.Fatalf("the run's stale write: %v, want ErrConflict", err)
	}
	if err := engine.WriteLedger(run, "svc", l); !errors.Is(err, ErrConflict) {
		t.Fatalf("the run's next write of the same stale ledger: %v, want ErrConflict", err)
	}
	back, _ := engine.ReadLedger(op, "svc")
	if back.Maintenance[engine.AllAgents] == nil {
		t.Fatal("the maintenance window was overwritten")
	}
	fresh, err := engine.ReadLedger(run, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteLedger(run, "svc", fresh); err != nil {
		t.Fatalf("a write after a new read: %v", err)
	}
}

// A ledger that does not validate is moved aside and reported, never
// silently reset.
func TestCorruptLedgerIsMovedAside(t *testing.T) {
	cli := cluster(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/t/contracts/svc/ledger", `{"version": 1, "contract": "svc", "units": {"svc": null}}`); err != nil {
		t.Fatal(err)
	}
	s := New(ctx, cli, "/t/", Options{})
	l, err := engine.ReadLedger(s, "svc")
	var ce *store.CorruptError
	if !errors.As(err, &ce) || l == nil || len(l.Units) != 0 {
		t.Fatalf("ReadLedger = %v, %v; want an empty ledger and a CorruptError", l, err)
	}
	resp, err := cli.Get(ctx, ce.MovedTo)
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"svc": null`) {
		t.Fatalf("the bad ledger is not kept at %s: %v", ce.MovedTo, err)
	}
	if resp, _ := cli.Get(ctx, "/t/contracts/svc/ledger"); len(resp.Kvs) != 0 {
		t.Fatal("the bad ledger is still in place")
	}
}

// With etcd out of reach the fence says so at once, and every read and
// write fails with ErrUnavailable without waiting for a timeout.
func TestUnavailableFailsFast(t *testing.T) {
	cli := cluster(t)
	down := func(string) ([]clientv3.Cmp, error) { return nil, fmt.Errorf("%w: test", store.ErrUnavailable) }
	s := New(context.Background(), cli, "/t/", Options{Fence: down})
	if _, err := engine.ReadLedger(s, "svc"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ReadLedger: %v", err)
	}
	if err := engine.WriteLedger(s, "svc", engine.NewLedger("svc")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("WriteLedger: %v", err)
	}
	unlock, err := s.Lock(context.Background(), "svc", 0)
	if err != nil {
		t.Fatalf("Lock without etcd must let the run probe and report: %v", err)
	}
	unlock()
}

// The etcd leader killed (no leadership handed over) while an owner
// writes, again and again: every write lands, none is refused or fails,
// and none waits longer than a leader election and a retry. Writes go to
// every member in turn, so some are in flight on the member killed and
// some on a follower waiting for the leader that dies.
func TestWritesRideOutLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the etcd leader five times")
	}
	c, err := etcdcluster.Start(t.TempDir(), 3, etcdcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.Endpoints(), ","), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	fence, _ := owner(t, cli, "svc")
	const budget = 10 * time.Second // the lease (serve's default TTL): what a write may take, retries included
	s := New(context.Background(), cli, "/t/", Options{Fence: fence, Timeout: budget})

	stop := make(chan struct{})
	type result struct {
		writes  int
		errs    []error
		longest time.Duration
	}
	done := make(chan result)
	var rounds atomic.Int64 // rounds of writes done, for the test to wait on
	go func() {
		var r result
		l, err := engine.ReadLedger(s, "svc")
		if err != nil {
			r.errs = append(r.errs, err)
		}
		pace := time.NewTicker(20 * time.Millisecond) // a steady stream, not a flood
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- r
				return
			case <-pace.C:
			}
			timed := func(what string, write func() error) {
				start := time.Now()
				if err := write(); err != nil {
					r.errs = append(r.errs, fmt.Errorf("write %d: %s: %w", i, what, err))
				}
				r.longest = max(r.longest, time.Since(start))
			}
			if l != nil {
				l.Unit("svc").Repairs = append(l.Unit("svc").Repairs[:0], time.Now().UTC())
				timed("ledger", func() error { return engine.WriteLedger(s, "svc", l) })
			}
			timed("snapshot", func() error { return s.WriteSnapshot("svc", map[string]any{"i": i}) })
			timed("history", func() error { return s.AppendHistory("svc", record(i)) })
			r.writes++
			rounds.Add(1)
		}
	}()
	leader := func() int {
		l := -1
		wait.For(t, "an etcd leader", func() bool { l = c.Leader(); return l >= 0 })
		return l
	}
	for k := 0; k < 5; k++ {
		l := leader()
		c.Kill(l)
		leader()
		from := rounds.Load()
		wait.For(t, "writes under the new leader", func() bool { return rounds.Load() >= from+5 })
		if err := c.Restart(l); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	r := <-done
	t.Logf("%d rounds of ledger, snapshot and history writes across 5 leader kills; the longest write took %s", r.writes, r.longest.Round(time.Millisecond))
	if len(r.errs) > 0 {
		t.Fatalf("%d writes failed, the first: %v", len(r.errs), errors.Join(r.errs[:min(len(r.errs), 5)]...))
	}
	if r.longest > budget {
		t.Fatalf("a write took %s, longer than the budget %s", r.longest, budget)
	}
}

// A ledger write whose answer was lost is tried again; when the first
// attempt landed after all, the second finds the ledger already holding
// exactly what it writes and succeeds, instead of calling the write a
// conflict.
func TestRetriedLedgerWriteThatLandedIsNoConflict(t *testing.T) {
	cli := cluster(t)
	fence, _ := owner(t, cli, "svc")
	s := New(context.Background(), cli, "/t/", Options{Fence: fence})
	l, err := engine.ReadLedger(s, "svc")
	if err != nil {
		t.Fatal(err)
	}
	l.Unit("svc").Repairs = []time.Time{time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)}
	// The first attempt, landed unseen: the same bytes, put behind the
	// store's back.
	b, err := engine.EncodeLedger("svc", l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(context.Background(), "/t/contracts/svc/ledger", string(b)); err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteLedger(s, "svc", l); err != nil {
		t.Fatalf("the write an earlier attempt made: %v, want success", err)
	}
	// The revision it holds is the landed one: the next write goes through.
	l.Unit("svc").Repairs = append(l.Unit("svc").Repairs, time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC))
	if err := engine.WriteLedger(s, "svc", l); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	// Another value in its place is a conflict, as before.
	if _, err := cli.Put(context.Background(), "/t/contracts/svc/ledger", string(b)); err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteLedger(s, "svc", l); !errors.Is(err, ErrConflict) {
		t.Fatalf("a ledger another wrote: %v, want ErrConflict", err)
	}
}

// Without quorum a reader's view still answers, from the member it talks
// to, while a run's read fails with ErrUnavailable within the store's
// timeout.
func TestReaderAnswersWithoutQuorum(t *testing.T) {
	c, err := etcdcluster.Start(t.TempDir(), 3, etcdcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.Endpoints(), ",")[2:], DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	fence, _ := owner(t, cli, "svc")
	s := New(context.Background(), cli, "/t/", Options{Fence: fence, Timeout: 2 * time.Second})
	if err := s.WriteSnapshot("svc", map[string]any{"up": true}); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	c.Stop(1)
	start := time.Now()
	if _, _, err := s.Unfenced().ReadSnapshot("svc"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a linearizable read without quorum: %v, want ErrUnavailable", err)
	}
	// Without the store's timeout the read waits for quorum for ever; the
	// bound is generous for a loaded machine.
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the read without quorum took %s, the store's timeout is 2s", took)
	}
	data, _, err := s.Reader().ReadSnapshot("svc")
	if err != nil || data["up"] != true {
		t.Fatalf("the view without quorum: %v, %v", data, err)
	}
}
