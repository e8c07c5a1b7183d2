package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/guard"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/fixtures/etcdcluster"
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

	l, err := s.ReadLedger("svc")
	if err != nil || len(l.Units) != 0 {
		t.Fatalf("a contract that never ran: %v, %v", l, err)
	}
	l.Unit("svc").Repairs = []time.Time{time.Date(2026, 11, 29, 19, 30, 0, 0, time.UTC)}
	if err := s.WriteLedger("svc", l); err != nil {
		t.Fatal(err)
	}
	l.Intents = append(l.Intents, &store.Intent{Unit: "svc", Condition: "down", Started: time.Now()})
	if err := s.WriteLedger("svc", l); err != nil {
		t.Fatalf("a second write of the same owner: %v", err)
	}
	back, err := New(context.Background(), cli, "/t/", Options{}).ReadLedger("svc")
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
		if err := s.AppendHistory("svc", map[string]any{"run_id": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.History("svc", 0)
	if err != nil || len(recs) != 3 {
		t.Fatalf("history of 5 runs with a limit of 3: %d records, %v", len(recs), err)
	}
	var first map[string]any
	_ = json.Unmarshal(recs[0], &first)
	if first["run_id"] != "2" {
		t.Fatalf("oldest kept record is %v, want run 2", first["run_id"])
	}
}

// A writer whose election key is gone (its lease expired while it was
// paused) is refused: the write does not happen and says ErrFenced.
func TestWriteOfALostOwnerIsFenced(t *testing.T) {
	cli := cluster(t)
	fence, session := owner(t, cli, "svc")
	s := New(context.Background(), cli, "/t/", Options{Fence: fence})
	l, err := s.ReadLedger("svc")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteLedger("svc", l); err != nil {
		t.Fatal(err)
	}
	// Another instance takes over: the first one's lease ends, the other wins.
	session.Close()
	otherFence, _ := owner(t, cli, "svc")
	other := New(context.Background(), cli, "/t/", Options{Fence: otherFence})
	ol, err := other.ReadLedger("svc")
	if err != nil {
		t.Fatal(err)
	}
	ol.Unit("svc").Repairs = []time.Time{time.Now().UTC()}
	if err := other.WriteLedger("svc", ol); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}

	l.Intents = append(l.Intents, &store.Intent{Unit: "svc", Condition: "down", Started: time.Now()})
	err = s.WriteLedger("svc", l)
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner's intent: %v, want ErrFenced", err)
	}
	if err := s.WriteSnapshot("svc", map[string]any{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner's snapshot: %v, want ErrFenced", err)
	}
	back, _ := other.ReadLedger("svc")
	if len(back.Intents) != 0 || len(back.Units["svc"].Repairs) != 1 {
		t.Fatalf("the refused write changed the ledger: %+v", back)
	}
}

// An operator's change (maintenance) between a run's read and its write
// is never overwritten: the run's write fails with ErrConflict.
func TestOperatorChangeIsNotOverwritten(t *testing.T) {
	cli := cluster(t)
	fence, _ := owner(t, cli, "svc")
	run := New(context.Background(), cli, "/t/", Options{Fence: fence})
	l, err := run.ReadLedger("svc")
	if err != nil {
		t.Fatal(err)
	}
	op := run.Unfenced()
	ol, err := op.ReadLedger("svc")
	if err != nil {
		t.Fatal(err)
	}
	ol.Maintenance = map[string]*guard.Window{store.AllAgents: {Since: time.Now(), Until: time.Now().Add(time.Hour)}}
	if err := op.WriteLedger("svc", ol); err != nil {
		t.Fatalf("the operator's write: %v", err)
	}
	if err := run.WriteLedger("svc", l); !errors.Is(err, ErrConflict) {
		t.Fatalf("the run's stale write: %v, want ErrConflict", err)
	}
	back, _ := op.ReadLedger("svc")
	if back.Maintenance[store.AllAgents] == nil {
		t.Fatal("the maintenance window was overwritten")
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
	l, err := s.ReadLedger("svc")
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
	if _, err := s.ReadLedger("svc"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ReadLedger: %v", err)
	}
	if err := s.WriteLedger("svc", store.NewLedger("svc")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("WriteLedger: %v", err)
	}
	unlock, err := s.Lock(context.Background(), "svc", 0)
	if err != nil {
		t.Fatalf("Lock without etcd must let the run probe and report: %v", err)
	}
	unlock()
}
