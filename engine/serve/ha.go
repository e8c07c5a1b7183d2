package serve

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contractd/contractd/engine"
	"github.com/contractd/contractd/engine/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// High availability (`serve --etcd`): every instance loads the same
// contracts, and each contract is run by the one instance that owns it.
//
// Each instance keeps one etcd session (a lease of TTL, kept alive) and
// registers its node name under PREFIX/nodes/ with it. For every contract,
// rendezvous hashing over the live nodes names the instance that should
// own it; that instance campaigns in the contract's election
// (PREFIX/owners/NAME/, concurrency.Election) and owns the contract while it
// leads. An instance that should no longer own a contract (a node joined)
// resigns once its run is over. When an instance dies its lease expires
// after TTL, its keys go, and the next instance by rendezvous wins the
// election: a takeover within TTL plus one poll.
//
// Fencing: every write of a run is a transaction comparing the create
// revision of the owner's election key (Fence). A paused or cut-off
// instance whose lease expired finds its key gone: its writes fail, so it
// neither repairs nor alerts, and it steps down when it sees its session
// end.
//
// Without quorum (or without a connection) nothing can be written: an
// instance keeps running the contracts rendezvous gives it over the last
// nodes it saw, probing and reporting only (Mode Local), until etcd is back.

// HAConfig configures ownership through etcd.
type HAConfig struct {
	Client *clientv3.Client
	Node   string        // this instance's name, unique among the instances
	Prefix string        // key prefix shared by the instances ("/contractd/")
	TTL    time.Duration // lease TTL, whole seconds (DefaultLeaseTTL)
	Log    *slog.Logger  // nil means Logf's lines (engine.LogfLogger), or nothing
	Logf   func(string, ...any)
}

// DefaultLeaseTTL is the lease TTL of `serve --lease-ttl`.
const DefaultLeaseTTL = 10 * time.Second

// DefaultPrefix is the etcd key prefix of `serve --etcd-prefix`.
const DefaultPrefix = "/contractd/"

// Mode says whether this instance runs a contract now.
type Mode int

const (
	// Standby: another instance owns the contract; this one does not run it.
	Standby Mode = iota
	// Owned: this instance owns the contract and runs it; its writes are fenced.
	Owned
	// Local: etcd cannot be reached and rendezvous over the last nodes seen
	// gives the contract to this instance: it probes and reports, and
	// repairs nothing and sends nothing.
	Local
)

// HA is one instance's membership and ownership. Create it with NewHA and
// pass it in Config.HA; the daemon runs it.
type HA struct {
	cfg  HAConfig
	log  *slog.Logger
	poll time.Duration
	// The watch asks etcd every tick, each question bounded by probe,
	// and calls etcd unreachable once none was answered for downAfter.
	tick, probe, downAfter time.Duration

	mu      sync.Mutex
	ctx     context.Context      // run's, for resignations; nil before it runs
	session *concurrency.Session // nil while etcd cannot be reached
	// Etcd is up while live (the session runs and this node is
	// registered) and reached (etcd answered within downAfter); said is
	// what was last said of it, for the log.
	live, reached, said bool
	lastAnswer          time.Time
	nodes               []string          // live nodes, as last seen (kept while etcd is down)
	owners              map[string]string // contract → owner node, as last seen
	// seen is the last owner ever seen of each contract, kept when its
	// election key goes: who a takeover takes the contract from.
	seen   map[string]string
	claims map[string]*claim // the contracts loaded here
	// changed is told of every ownership won (from: the owner before, as
	// last seen; "" when none was) and lost.
	changed   func(name string, owned bool, from string)
	busy      func(name string) bool
	downSince time.Time
}

// claim is this instance's standing in one contract's election.
type claim struct {
	campaign context.CancelFunc // set while campaigning
	el       *concurrency.Election
	// ended is closed when the last campaign's goroutine has returned,
	// its key resigned if it had to be: a campaign of the same session
	// has the same key (the contract's, under the session's lease), so a
	// new one waits for the last to end rather than share its key and
	// have it deleted under it.
	ended chan struct{}
	owned bool
	key   string // the election key while owned
	rev   int64  // its create revision: what every write compares
}

// idle reports whether no campaign of the claim is still ending.
func (c *claim) idle() bool {
	if c.ended == nil {
		return true
	}
	select {
	case <-c.ended:
		return true
	default:
		return false
	}
}

// NewHA checks cfg and returns the instance's HA state; nothing talks to
// etcd until the daemon runs. It fails without a client or a node name, or
// with a TTL under a second.
func NewHA(cfg HAConfig) (*HA, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("serve: HAConfig.Client is required")
	case cfg.Node == "" || strings.ContainsAny(cfg.Node, "/\x00"):
		return nil, fmt.Errorf("serve: node name %q: give a name without / that is unique among the instances", cfg.Node)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.TTL < time.Second || cfg.TTL%time.Second != 0 {
		return nil, fmt.Errorf("serve: lease TTL %s: give whole seconds, at least 1s", cfg.TTL)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	h := &HA{cfg: cfg, log: cfg.Log, owners: map[string]string{}, seen: map[string]string{}, claims: map[string]*claim{}}
	// A takeover waits for the lease to expire (TTL) and then for the
	// next poll: polls at a fifth of the TTL keep it well inside 2 × TTL.
	h.poll = max(cfg.TTL/5, 100*time.Millisecond)
	// Quorum lost is said within 0.9 TTL: no answer for 0.6 TTL (and
	// two questions in a row, each put in time, unanswered), the question
	// that found it out taking up to 0.2 TTL, and the tick. An
	// etcd leader change (an election: about a second with etcd's default
	// timeout) stays well below 0.6 TTL for any TTL the docs advise.
	h.tick = max(cfg.TTL/10, 100*time.Millisecond)
	h.probe = max(cfg.TTL/5, 200*time.Millisecond)
	h.downAfter = cfg.TTL * 6 / 10
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
		if cfg.Logf != nil {
			h.log = engine.LogfLogger(cfg.Logf)
		}
	}
	return h, nil
}

// Node returns this instance's node name.
func (h *HA) Node() string { return h.cfg.Node }

// TTL returns the lease TTL.
func (h *HA) TTL() time.Duration { return h.cfg.TTL }

// Up reports whether etcd is reachable with a live session.
func (h *HA) Up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upLocked()
}

func (h *HA) upLocked() bool { return h.live && h.reached }

// State reports whether etcd is reachable with a live session and, while
// it is not, since when.
func (h *HA) State() (up bool, downSince time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.upLocked() {
		return true, time.Time{}
	}
	return false, h.downSince
}

// Nodes returns the instances of the group as last seen, this one
// included, sorted.
func (h *HA) Nodes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]string{h.cfg.Node}, h.nodes...)
	sort.Strings(out)
	return slices.Compact(out)
}

// Mode returns whether this instance runs contract name now.
func (h *HA) Mode(name string) Mode {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.upLocked() {
		if !h.downSince.IsZero() && h.preferredLocked(name) == h.cfg.Node {
			return Local
		}
		return Standby
	}
	if c := h.claims[name]; c != nil && c.owned {
		return Owned
	}
	return Standby
}

// Owner returns the node that owns contract name as last seen ("" when
// none does yet).
func (h *HA) Owner(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.claims[name]; c != nil && c.owned {
		return h.cfg.Node
	}
	return h.owners[name]
}

// Fence returns the comparison that holds while this instance owns
// contract name: its election key still has the create revision it won
// with. It fails with store.ErrUnavailable while etcd cannot be reached and
// with store.ErrFenced when this instance does not own the contract.
func (h *HA) Fence(name string) ([]clientv3.Cmp, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.upLocked() {
		return nil, fmt.Errorf("%w: etcd cannot be reached (down since %s)", store.ErrUnavailable, h.downSince.UTC().Format(time.RFC3339))
	}
	c := h.claims[name]
	if c == nil || !c.owned {
		owner := h.owners[name]
		if owner == "" {
			owner = "no instance yet"
		}
		return nil, fmt.Errorf("%w (owner: %s)", store.ErrFenced, owner)
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)}, nil
}

// preferredLocked is the rendezvous choice for a contract among the nodes
// last seen (this one always among them).
func (h *HA) preferredLocked(name string) string {
	return Rendezvous(append([]string{h.cfg.Node}, h.nodes...), name)
}

// Rendezvous returns the node among nodes that owns contract once the
// instances agree: the one with the highest score (ties to the smallest
// name). "" when nodes is empty.
func Rendezvous(nodes []string, contract string) string {
	best, bestScore := "", uint64(0)
	for _, n := range nodes {
		if s := score(n, contract); best == "" || s > bestScore || (s == bestScore && n < best) {
			best, bestScore = n, s
		}
	}
	return best
}

// score is the rendezvous (highest random weight) hash of a node and a
// contract: each contract goes to the live node with the highest score, so
// a node that joins or leaves moves only its own share.
func score(node, contract string) uint64 {
	sum := sha256.Sum256([]byte(node + "\x00" + contract))
	return binary.BigEndian.Uint64(sum[:8])
}

// setContracts makes the claims match the contracts loaded.
func (h *HA) setContracts(names []string) {
	h.mu.Lock()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
		if h.claims[n] == nil {
			h.claims[n] = &claim{}
		}
	}
	var gone []*claim
	for n, c := range h.claims {
		if !want[n] {
			gone = append(gone, c)
			delete(h.claims, n)
		}
	}
	h.mu.Unlock()
	for _, c := range gone {
		h.resign(c)
	}
}

// resign gives up a claim: a campaign is cancelled (which deletes its key),
// a lead is resigned.
//
// It reports whether the claim was owned when it gave it up: a campaign
// may have been won since the caller looked, and then the loss must be
// told like any other.
func (h *HA) resign(c *claim) bool {
	h.mu.Lock()
	cancel, el, owned := c.campaign, c.el, c.owned
	c.campaign, c.el, c.owned, c.key, c.rev = nil, nil, false, "", 0
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.mu.Lock()
	base := h.ctx
	h.mu.Unlock()
	if owned && el != nil && base != nil {
		ctx, done := context.WithTimeout(base, h.cfg.TTL)
		defer done()
		_ = el.Resign(ctx) // when it fails, the lease ends it
	}
	return owned
}

// run keeps the session, polls nodes and owners, and campaigns or resigns
// until ctx ends; then it resigns everything and revokes its lease, so the
// other instances take over at once.
func (h *HA) run(ctx context.Context) {
	h.mu.Lock()
	h.ctx = context.WithoutCancel(ctx) // resignations outlive the stop that asks for them
	// Reached until the watch finds otherwise: the session says first
	// whether etcd answers at all.
	h.lastAnswer, h.reached = time.Now(), true
	h.mu.Unlock()
	watched := make(chan struct{})
	defer func() { <-watched }()
	go func() { defer close(watched); h.watch(ctx) }()
	var lostID clientv3.LeaseID // the lease of a session that ended, revoked when etcd is back
	for ctx.Err() == nil {
		// The lease is granted under a deadline: without quorum a grant
		// would wait for it, and meanwhile nothing would say etcd is down.
		gctx, cancel := context.WithTimeout(ctx, h.cfg.TTL)
		lease, err := h.cfg.Client.Grant(gctx, int64(h.cfg.TTL/time.Second))
		cancel()
		if err != nil {
			h.setDown(fmt.Sprintf("no lease: %v", err))
			sleep(ctx, h.poll)
			continue
		}
		s, err := concurrency.NewSession(h.cfg.Client, concurrency.WithLease(lease.ID), concurrency.WithContext(ctx))
		if err != nil {
			lostID = lease.ID
			h.setDown(fmt.Sprintf("no session: %v", err))
			sleep(ctx, h.poll)
			continue
		}
		if lostID != 0 {
			// Keys of the old lease would hold ownership until it expires.
			rctx, cancel := context.WithTimeout(ctx, h.cfg.TTL)
			_, _ = h.cfg.Client.Revoke(rctx, lostID)
			cancel()
			lostID = 0
		}
		if err := h.register(ctx, s); err != nil {
			h.setDown(fmt.Sprintf("register node: %v", err))
			s.Orphan()
			lostID = s.Lease()
			sleep(ctx, h.poll)
			continue
		}
		h.mu.Lock()
		h.session, h.live = s, true
		h.mu.Unlock()
		h.say("")
		h.serve(ctx, s)
		// The session ended: ctx is done, or the lease is gone.
		if ctx.Err() != nil {
			h.dropAll("this instance is stopping")
		} else {
			h.dropAll("its etcd lease ended")
		}
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.TTL)
			_, _ = h.cfg.Client.Revoke(cctx, s.Lease())
			cancel()
			return
		}
		lostID = s.Lease()
		h.setDown("the lease could not be kept alive")
	}
}

// setDown records that the session ended or could not be had: etcd is
// down until a new one is registered.
func (h *HA) setDown(why string) {
	h.mu.Lock()
	h.live = false
	h.session = nil
	h.mu.Unlock()
	h.say(why)
}

// say logs a change of etcd's state, up or down, once: down the first
// time (from the start, or since it was last up), with why; up again with
// how long it was down.
func (h *HA) say(why string) {
	h.mu.Lock()
	up, was, first := h.upLocked(), h.said, h.downSince.IsZero()
	h.said = up
	var down time.Time
	switch {
	case !up && (was || first):
		h.downSince = time.Now()
	case up && !was:
		down = h.downSince
	}
	h.mu.Unlock()
	switch {
	case !up && (was || first):
		h.log.Error("etcd unreachable: probing and reporting go on here, no repairs and no alerts until it is back", "error", why)
	case up && !was && !down.IsZero():
		h.log.Info("etcd reachable again; repairs and alerts resume", "down_for", time.Since(down).Round(100*time.Millisecond))
	}
}

// downQuestions is how many questions in a row, each put in time, must go
// unanswered before etcd is called unreachable (besides downAfter of
// silence): silence made of one question, or of a process that was not
// scheduled, is a starved machine's, not etcd's.
const downQuestions = 2

// watch asks etcd a linearizable question (how many nodes are
// registered) every tick until ctx ends (while it has no answer, one after
// another: next), and calls it unreachable once none was answered for
// downAfter: quorum lost is said within one TTL,
// long before the session's lease would tell. Each question requires a
// leader, so a member without one says so at once; it is asked as many
// times at once as there are endpoints, which the client spreads over the
// members, so one member stuck waiting on a leader that died does not
// hide the others' answers.
func (h *HA) watch(ctx context.Context) {
	q := questions{probe: h.probe, tick: h.tick, downAfter: h.downAfter}
	for ctx.Err() == nil {
		began := time.Now()
		err := h.ask(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		h.mu.Lock()
		reached, late := q.answer(h.reached, h.lastAnswer, err, began, now) // the run's start counts as an answer
		if err == nil {
			h.lastAnswer = now
		}
		changed := reached != h.reached
		h.reached = reached
		silent := now.Sub(h.lastAnswer)
		h.mu.Unlock()
		if late {
			h.log.Debug("etcd: a question ended late, this process was not scheduled: not counted", "took", now.Sub(began).Round(10*time.Millisecond), "error", err)
		}
		if changed {
			why := ""
			if err != nil {
				why = fmt.Sprintf("no answer for %s: %v", silent.Round(10*time.Millisecond), err)
			}
			h.say(why)
		}
		sleep(ctx, q.next(err, late, began, now))
	}
}

// questions decides from the watch's questions whether etcd is reached.
type questions struct {
	probe, tick, downAfter time.Duration
	failed                 int // questions in a row, put in time, that had no answer
}

// answer takes one question's outcome (err; put at began, ended at now),
// etcd's state before it (reached) and when it last answered (last), and
// returns the state after it and
// whether the question was late. A question ends by its deadline (probe);
// one that ended more than a tick past it was not put in time: this
// process was not given the CPU (a starved machine), so the silence it
// found is not proof of etcd's. A late question neither counts toward the
// failures nor clears them; only an answer clears them.
func (q *questions) answer(reached bool, last time.Time, err error, began, now time.Time) (after, late bool) {
	switch {
	case err == nil:
		q.failed = 0
		return true, false
	case now.Sub(began) > q.probe+q.tick:
		return reached, true
	}
	q.failed++
	if reached && q.failed >= downQuestions && now.Sub(last) >= q.downAfter {
		return false, false
	}
	return reached, false
}

// next returns how long the watch waits before its next question: a tick
// after an answer (or a late question); after a question put in time that
// had none, no wait beyond the rest of its probe window, so that while
// etcd is silent the questions cover the time back to back. Spaced a tick
// apart, two questions can both fall into the elections of a cluster
// whose leader changes every second while it answers in between, and the
// watch would call such a cluster unreachable.
func (q *questions) next(err error, late bool, began, now time.Time) time.Duration {
	if err == nil || late {
		return q.tick
	}
	return max(q.probe-now.Sub(began), 0)
}

// ask puts the watch's question to etcd, once per endpoint at once, and
// returns nil as soon as one answer comes, else the last error. The other
// questions are left to end by their own deadline, not cancelled: a
// cancelled request is logged by the client as a failed one.
func (h *HA) ask(ctx context.Context) error {
	n := max(len(h.cfg.Client.Endpoints()), 1)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			pctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), h.probe)
			defer cancel()
			_, err := h.cfg.Client.Get(pctx, h.cfg.Prefix+"nodes/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			errs <- err
		}()
	}
	var err error
	for i := 0; i < n; i++ {
		if err = <-errs; err == nil {
			return nil
		}
	}
	return err
}

// register puts this node's key with the session's lease.
func (h *HA) register(ctx context.Context, s *concurrency.Session) error {
	key := h.cfg.Prefix + "nodes/" + h.cfg.Node
	rctx, cancel := context.WithTimeout(ctx, h.cfg.TTL)
	defer cancel()
	resp, err := h.cfg.Client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, h.cfg.Node, clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key), clientv3.OpPut(key, h.cfg.Node, clientv3.WithLease(s.Lease()))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 && clientv3.LeaseID(kvs[0].Lease) != s.Lease() {
			h.log.Warn("etcd: this node name was registered by another lease: another instance with the same --node, or this one restarting", "node", h.cfg.Node)
		}
	}
	return nil
}

// serve polls and reconciles until the session ends or ctx is done.
//
// It also watches the registered nodes: a node whose lease expired (it
// died) or that joined is acted on at once, not at the next poll, so a
// takeover follows the lease's expiry by a round trip. The poll stays for
// a watch that broke.
func (h *HA) serve(ctx context.Context, s *concurrency.Session) {
	t := time.NewTicker(h.poll)
	defer t.Stop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	nodes := h.cfg.Client.Watch(wctx, h.cfg.Prefix+"nodes/", clientv3.WithPrefix())
	for {
		h.reconcile(ctx, s)
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
			return
		case <-t.C:
		case _, ok := <-nodes:
			if !ok {
				nodes = nil // the poll goes on
			}
		}
	}
}

// reconcile reads the live nodes and the owners, then campaigns for the
// contracts this node should own and resigns those it should not (once
// their run is over).
func (h *HA) reconcile(ctx context.Context, s *concurrency.Session) {
	rctx, cancel := context.WithTimeout(ctx, h.cfg.TTL)
	defer cancel()
	nodes, err := h.cfg.Client.Get(rctx, h.cfg.Prefix+"nodes/", clientv3.WithPrefix())
	if err != nil {
		return // the session's keep-alive decides whether etcd is down
	}
	leaders, err := Owners(rctx, h.cfg.Client, h.cfg.Prefix)
	if err != nil {
		return
	}
	var live []string
	for _, kv := range nodes.Kvs {
		live = append(live, strings.TrimPrefix(string(kv.Key), h.cfg.Prefix+"nodes/"))
	}
	sort.Strings(live)

	type standing struct {
		name                     string
		c                        *claim
		mine, owned, going, idle bool
	}
	var all []standing
	h.mu.Lock()
	h.nodes = live
	h.sawOwnersLocked(leaders)
	for name, c := range h.claims {
		all = append(all, standing{name, c, h.preferredLocked(name) == h.cfg.Node, c.owned, c.campaign != nil, c.idle()})
	}
	busy := h.busy
	h.mu.Unlock()
	for _, st := range all {
		switch {
		case st.mine && !st.owned && !st.going && st.idle:
			h.campaign(ctx, s, st.name, st.c)
		case !st.mine && (st.going && !st.owned || st.owned && (busy == nil || !busy(st.name))):
			// A campaign given up may have been won since the snapshot:
			// then it is a handover like the other.
			if h.resign(st.c) {
				h.log.Info("contract handed over: rendezvous now gives it to another node", "contract", st.name, "node", h.cfg.Node, "to", h.Preferred(st.name))
				h.notify(st.name, false, "")
			}
		case !st.mine && !st.owned && !st.going && leaders[st.name] == h.cfg.Node:
			h.dropOrphan(ctx, s, st.name)
		}
	}
}

// sawOwnersLocked takes the owners read from etcd. seen keeps, for each
// contract, the last owner seen that is not this node, besides the win
// the campaign records: a poll can read this node's key leading the
// election before its campaign has returned the win, and were seen then
// this node, the win would be told as from itself and not as a takeover
// from the node that died, which runs the contract at once (it would wait
// for the contract's interval after the dead owner's last run instead).
func (h *HA) sawOwnersLocked(leaders map[string]string) {
	h.owners = leaders
	for name, o := range leaders {
		if o != h.cfg.Node {
			h.seen[name] = o
		}
	}
}

// dropOrphan deletes this session's candidate key in contract name's
// election, which leads though this instance does not campaign: a campaign
// cancelled (resigned) while its key was being written left it, and
// nothing else would delete it while the session lives, so the instance
// that should own the contract would wait behind it for ever.
func (h *HA) dropOrphan(ctx context.Context, s *concurrency.Session, name string) {
	// The election's prefix is owners/NAME/, and concurrency.Election
	// adds a "/" of its own before the lease.
	key := fmt.Sprintf("%sowners/%s//%x", h.cfg.Prefix, name, s.Lease())
	rctx, cancel := context.WithTimeout(ctx, h.cfg.TTL)
	defer cancel()
	resp, err := h.cfg.Client.Delete(rctx, key)
	if err == nil && resp.Deleted > 0 {
		h.log.Warn("contract election: dropped this node's key left by a cancelled campaign", "contract", name, "node", h.cfg.Node)
	}
}

// Owners returns the owner node of every contract that has one, from the
// elections under prefix: the candidate with the lowest create revision
// leads. It fails when etcd cannot be read.
func Owners(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]string, error) {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	resp, err := cli.Get(ctx, prefix+"owners/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	leaders := map[string]string{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), prefix+"owners/")
		name, _, ok := strings.Cut(rest, "/")
		if _, seen := leaders[name]; ok && !seen {
			leaders[name] = string(kv.Value)
		}
	}
	return leaders, nil
}

// Preferred returns the node rendezvous hashing gives contract name among
// the nodes last seen.
func (h *HA) Preferred(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.preferredLocked(name)
}

// campaign starts this node's campaign for a contract; when it wins, the
// claim is owned and the daemon is told.
func (h *HA) campaign(ctx context.Context, s *concurrency.Session, name string, c *claim) {
	cctx, cancel := context.WithCancel(ctx)
	el := concurrency.NewElection(s, h.cfg.Prefix+"owners/"+name+"/")
	ended := make(chan struct{})
	h.mu.Lock()
	c.campaign, c.el, c.ended = cancel, el, ended
	h.mu.Unlock()
	go func() {
		defer close(ended)
		err := el.Campaign(cctx, h.cfg.Node)
		h.mu.Lock()
		if c.el != el {
			// Resigned or dropped meanwhile.
			h.mu.Unlock()
			if err == nil {
				rctx, done := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.TTL)
				_ = el.Resign(rctx)
				done()
			}
			return
		}
		c.campaign = nil
		if err != nil {
			c.el = nil
			h.mu.Unlock()
			cancel()
			return
		}
		c.owned, c.key, c.rev = true, el.Key(), el.Rev()
		prev := h.seen[name]
		h.owners[name], h.seen[name] = h.cfg.Node, h.cfg.Node
		h.mu.Unlock()
		args := []any{"contract", name, "node", h.cfg.Node}
		if prev != "" && prev != h.cfg.Node {
			args = append(args, "taken_over_from", prev)
		}
		h.log.Info("contract owned by this node", args...)
		h.notify(name, true, prev)
	}()
}

// dropAll forgets every ownership after the session ended.
func (h *HA) dropAll(why string) {
	h.mu.Lock()
	var lost []string
	for name, c := range h.claims {
		if c.campaign != nil {
			c.campaign()
		}
		if c.owned {
			lost = append(lost, name)
			delete(h.owners, name)
		}
		c.campaign, c.el, c.owned, c.key, c.rev = nil, nil, false, "", 0
	}
	h.mu.Unlock()
	sort.Strings(lost)
	for _, name := range lost {
		h.log.Warn("contract no longer owned by this node", "contract", name, "node", h.cfg.Node, "reason", why)
		h.notify(name, false, "")
	}
}

func (h *HA) notify(name string, owned bool, from string) {
	h.mu.Lock()
	f := h.changed
	h.mu.Unlock()
	if f != nil {
		f(name, owned, from)
	}
}

// Fenced steps down from a contract whose write was refused for its
// ownership: the lease that won it has ended.
func (h *HA) Fenced(name string) {
	h.mu.Lock()
	c := h.claims[name]
	owned := c != nil && c.owned
	if owned {
		c.owned, c.key, c.rev, c.el = false, "", 0, nil
		delete(h.owners, name)
	}
	h.mu.Unlock()
	if owned {
		h.log.Warn("contract no longer owned by this node: a write was refused, another instance owns it", "contract", name, "node", h.cfg.Node)
		h.notify(name, false, "")
	}
}

// OwnedCount returns how many contracts this instance owns.
func (h *HA) OwnedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.claims {
		if c.owned {
			n++
		}
	}
	return n
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
