package serve

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/fixtures/etcdcluster"
	"github.com/contractd/contractd/fixtures/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// With --etcd the hold-down is the owner's, in its state dir; a reset
// made anywhere else (`contractd reset --etcd` from another host, another
// instance's API) reaches it through the shared ledger: the owner releases
// the contract when it reads the ledger's release.
func TestSharedLedgerReleaseReachesTheOwnersHoldDown(t *testing.T) {
	t.Parallel()
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
	ha, err := NewHA(HAConfig{Client: cli, Node: "a", Prefix: "/t/", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir, state := t.TempDir(), t.TempDir()
	writeContract(t, dir, "broken", "1", "200ms", true)
	var failing atomic.Bool
	failing.Store(true)
	var runs atomic.Int32
	runner := &fakeRunner{run: func(ctx context.Context, c *contracts.Contract) (*engine.Report, error) {
		runs.Add(1)
		if failing.Load() {
			return nil, errors.New("state store: disk full")
		}
		return report(c), nil
	}}
	shared := openStore(t, t.TempDir()) // stands in for the group's store
	h := startDaemon(t, Config{Dir: dir, StateDir: state, Runner: runner, HA: ha, Store: shared,
		Notify: func(context.Context, *contracts.Contract, string) error { return nil }})
	wait.For(h.t, "the hold-down", func() bool { return h.status("broken").HeldDown })
	held := runs.Load()

	failing.Store(false)
	if err := engine.ReleaseLedger(t.Context(), shared, "broken", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	wait.For(h.t, "a run after the shared release", func() bool { return runs.Load() > held })
	wait.For(h.t, "a healthy status", func() bool {
		st := h.status("broken")
		return !st.HeldDown && st.LastResult == ResultOK && st.ConsecutiveFailures == 0
	})
	if !strings.Contains(strings.Join(h.logs.lines, "\n"), "hold-down released by reset") {
		t.Errorf("the release was not logged:\n%s", strings.Join(h.logs.lines, "\n"))
	}
}

// HA tells of a win and a loss from different goroutines, so a notice can
// come late, after the ownership changed again: the daemon acts on what
// HA holds, never on a stale notice (a handover told before the win it
// followed left contractd_contract_owned 1 on a node that did not own the
// contract).
func TestALateOwnershipNoticeDoesNotOverrideTheTruth(t *testing.T) {
	t.Parallel()
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
	ha, err := NewHA(HAConfig{Client: cli, Node: "a", Prefix: "/t/", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeContract(t, dir, "c", "1", "1h", false)
	h := startDaemon(t, Config{Dir: dir, StateDir: t.TempDir(), Runner: &fakeRunner{}, HA: ha})
	owned := func() float64 { v, _ := h.metric(`contractd_contract_owned{contract="c"}`); return v }
	wait.For(h.t, "the only node owns c", func() bool { return owned() == 1 })
	h.d.ownershipChanged("c", false, "") // a loss told late: the node owns c again
	if v := owned(); v != 1 {
		t.Fatalf("contractd_contract_owned = %v after a stale loss notice, want 1: the node owns c", v)
	}
	if v, ok := h.metric(`contractd_runs_total{contract="c",result="ok"}`); !ok || v != 0 {
		t.Fatalf("runs_total{ok} = %v (exported: %v), want the owner's series, at 0", v, ok)
	}
}
