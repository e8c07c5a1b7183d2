package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/contractd/contractd/engine/serve"
	"github.com/contractd/contractd/engine/store"
	"github.com/contractd/contractd/engine/store/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdFlags reach the etcd cluster of a group of instances: `serve`
// and `status` take them. The TLS and auth flags are etcdctl's, prefixed
// with etcd-.
type etcdFlags struct {
	endpoints    string
	prefix       string
	cacert       string
	cert         string
	key          string
	user         string
	passwordFile string
	timeout      time.Duration
}

func (h *etcdFlags) register(fs *flag.FlagSet, getenv func(string) string, what string) {
	fs.StringVar(&h.endpoints, "etcd", "", what)
	fs.StringVar(&h.prefix, "etcd-prefix", serve.DefaultPrefix, "etcd key `PREFIX` the instances share")
	fs.StringVar(&h.cacert, "etcd-cacert", getenv("ETCDCTL_CACERT"), "CA bundle `FILE` that signed the etcd servers' certificates")
	fs.StringVar(&h.cert, "etcd-cert", getenv("ETCDCTL_CERT"), "client certificate `FILE` for etcd")
	fs.StringVar(&h.key, "etcd-key", getenv("ETCDCTL_KEY"), "client key `FILE` for etcd")
	fs.StringVar(&h.user, "etcd-user", getenv("ETCDCTL_USER"), "etcd `USER` (role-based auth); the password comes from --etcd-password-file or $ETCDCTL_PASSWORD")
	fs.StringVar(&h.passwordFile, "etcd-password-file", "", "`FILE` holding the etcd user's password")
}

// on reports whether --etcd was given.
func (h *etcdFlags) on() bool { return h.endpoints != "" }

// haFlags are `serve`'s flags for running as one of several instances on
// etcd.
type haFlags struct {
	etcdFlags
	node string
	ttl  time.Duration
}

func (h *haFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	host, _ := os.Hostname()
	h.etcdFlags.register(fs, getenv, "share the contracts with other instances through etcd at `URL[,URL…]`: each contract is run by one live instance, state lives in etcd (see docs/operations.md, High availability)")
	fs.StringVar(&h.node, "node", host, "this instance's `NAME` among the instances (--etcd)")
	fs.DurationVar(&h.ttl, "lease-ttl", serve.DefaultLeaseTTL, "etcd lease TTL, whole seconds: an instance that dies is replaced within 2 × TTL")
}

// connect opens the etcd client and returns the instance's HA state and
// the fenced store its runs write through. It fails on a bad flag or an
// unreadable certificate, key or password file; an unreachable etcd is
// not an error here (the daemon starts, probes and reports, and says so).
func (h *haFlags) connect(ctx context.Context, getenv func(string) string, log *slog.Logger) (*clientv3.Client, *serve.HA, *etcdstore.Store, error) {
	h.timeout = h.ttl
	cli, err := h.client(ctx, getenv, log)
	if err != nil {
		return nil, nil, nil, err
	}
	ha, err := serve.NewHA(serve.HAConfig{Client: cli, Node: h.node, Prefix: h.prefix, TTL: h.ttl, Log: log})
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	st := etcdstore.New(ctx, cli, h.prefix, etcdstore.Options{Fence: ha.Fence, Timeout: h.ttl})
	return cli, ha, st, nil
}

// client opens the etcd client the flags describe (etcdstore.Connect),
// its warnings and errors logged to log (see etcdLogger; nil: a command's
// error says what went wrong, and the client's own lines are left out). It
// fails on a bad flag or an unreadable certificate, key or password file;
// it does not wait for etcd to answer.
func (h *etcdFlags) client(ctx context.Context, getenv func(string) string, log *slog.Logger) (*clientv3.Client, error) {
	cfg := etcdstore.Config{CACert: h.cacert, Cert: h.cert, Key: h.key}
	for _, e := range strings.Split(h.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("--etcd: no endpoint")
	}
	if h.timeout <= 0 {
		h.timeout = etcdstore.DefaultTimeout
	}
	cfg.Timeout = h.timeout
	if log != nil {
		cfg.Logger = etcdLogger(log)
	}
	if h.user != "" {
		user, pass, inline := strings.Cut(h.user, ":")
		if !inline {
			pass = getenv("ETCDCTL_PASSWORD")
			if h.passwordFile != "" {
				b, err := os.ReadFile(h.passwordFile)
				if err != nil {
					return nil, fmt.Errorf("--etcd-password-file: %w", err)
				}
				pass = strings.TrimSpace(string(b))
			}
		}
		cfg.Username, cfg.Password = user, pass
	}
	return etcdstore.Connect(ctx, cfg)
}

// stateSource is where a command reads and changes contracts' state: the
// state dir, or with --etcd the state a group of `serve --etcd` instances
// shares, which every node and every host reads alike.
type stateSource struct {
	st    store.Backend
	where string // for messages: "/var/lib/contractd", "etcd under /contractd/"
	// shared is set for etcd: the contracts' owners are known, and a run
	// stopped before its end is settled by the owner, not by a reader.
	shared bool
	owners func() (map[string]string, error) // nil unless shared
	close  func()
}

// openState opens the state a command reads and changes: the group's etcd
// with --etcd (an operator's store: its writes never overwrite a run's,
// see etcdstore.Store.Unfenced), else the state dir. It fails on a bad
// --etcd flag or an unreadable TLS or password file, or a state dir that
// cannot be created; an unreachable etcd fails the reads that follow.
func (m *Main) openState(ctx context.Context, sf stateFlags, ef etcdFlags) (*stateSource, error) {
	if !ef.on() {
		st, err := store.Open(sf.stateDir)
		if err != nil {
			return nil, err
		}
		return &stateSource{st: st, where: sf.stateDir, close: func() {}}, nil
	}
	cli, err := ef.client(ctx, m.Getenv, nil)
	if err != nil {
		return nil, err
	}
	st := etcdstore.New(ctx, cli, ef.prefix, etcdstore.Options{Timeout: ef.timeout})
	return &stateSource{
		st: st, where: "etcd under " + ef.prefix, shared: true,
		owners: func() (map[string]string, error) {
			rctx, cancel := context.WithTimeout(ctx, ef.timeout)
			defer cancel()
			owners, err := serve.Owners(rctx, cli, ef.prefix)
			if err != nil {
				return nil, fmt.Errorf("owners: %w: %v", store.ErrUnavailable, err)
			}
			return owners, nil
		},
		close: func() { cli.Close() },
	}, nil
}
