package serve

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/fixtures/etcdcluster"
	"github.com/contractd/contractd/fixtures/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A campaign cancelled while its key was being written (an instance
// resigning as the key lands) leaves a candidate key that leads the
// election though its instance does not campaign: the instance rendezvous
// gives the contract to would wait behind it for as long as that
// instance lives. The instance that left it deletes it.
func TestOrphanCandidateKeyIsDropped(t *testing.T) {
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
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("svc%d", i); Rendezvous([]string{"a", "b"}, n) == "a" {
			name = n
		}
	}
	start := func(node string) *HA {
		h, err := NewHA(HAConfig{Client: cli, Node: node, Prefix: "/t/", TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		h.setContracts([]string{"other"})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); h.run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return h
	}
	a, b := start("a"), start("b")
	wait.For(t, "both nodes registered", func() bool { return len(a.Nodes()) == 2 && len(b.Nodes()) == 2 })
	// b's key in the election of a contract b does not campaign for.
	b.mu.Lock()
	lease := b.session.Lease()
	b.mu.Unlock()
	if _, err := cli.Put(t.Context(), fmt.Sprintf("/t/owners/%s//%x", name, lease), "b", clientv3.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
	a.setContracts([]string{"other", name})
	b.setContracts([]string{"other", name})
	wait.For(t, "a owns "+name+", the contract rendezvous gives it", func() bool { return a.Mode(name) == Owned })
}
