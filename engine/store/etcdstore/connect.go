package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config is how to reach an etcd cluster, in etcdctl's terms.
type Config struct {
	Endpoints []string // the members' client URLs
	// CACert is the CA bundle (PEM file) that signed the members'
	// certificates; Cert and Key are the client's certificate and key (PEM
	// files), given together. TLS is on when any of the three is set.
	CACert, Cert, Key string
	// Username and Password are for etcd's role-based auth; off when
	// Username is "".
	Username, Password string
	// Timeout bounds dialling a member and each keep-alive probe; zero
	// means DefaultTimeout, a store's own.
	Timeout time.Duration
	// Logger receives the client's own log; nil leaves it out.
	Logger *zap.Logger
}

// Connect returns a client of the cluster cfg describes, living as long as
// ctx. It does not wait for etcd to answer: an unreachable cluster fails
// the requests that follow, not Connect. It fails when cfg names no
// endpoint, when a CA, certificate or key file cannot be read or holds no
// PEM, when Cert and Key are not given together, and when the client
// cannot be made.
func Connect(ctx context.Context, cfg Config) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoint")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cc := clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: timeout, DialKeepAliveTime: timeout, DialKeepAliveTimeout: timeout,
		Context: ctx, Logger: cfg.Logger, Username: cfg.Username, Password: cfg.Password,
	}
	if cc.Logger == nil {
		cc.Logger = zap.NewNop()
	}
	if cfg.CACert != "" || cfg.Cert != "" || cfg.Key != "" {
		tc, err := cfg.tls()
		if err != nil {
			return nil, err
		}
		cc.TLS = tc
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// tls builds the client's TLS from CACert, Cert and Key.
func (cfg Config) tls() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pem, err := os.ReadFile(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("etcd CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA bundle %s: no PEM certificate in it", cfg.CACert)
		}
		tc.RootCAs = pool
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("etcd client certificate and key go together")
	}
	if cfg.Cert != "" {
		pair, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate and key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
