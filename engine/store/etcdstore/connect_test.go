package etcdstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Connect refuses a setup it cannot use before it makes a client: no
// endpoint, a certificate without its key, a CA file that is missing or
// holds no PEM.
func TestConnectRefusesABadSetup(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eps := []string{"http://127.0.0.1:2379"}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no endpoint", Config{}, "no endpoint"},
		{"certificate without key", Config{Endpoints: eps, Cert: filepath.Join(dir, "c.pem")}, "certificate and key go together"},
		{"missing CA", Config{Endpoints: eps, CACert: filepath.Join(dir, "none.pem")}, "no such file"},
		{"CA without PEM", Config{Endpoints: eps, CACert: notPEM}, "no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := Connect(t.Context(), tc.cfg)
			if err == nil {
				cli.Close()
				t.Fatalf("Connect(%+v) made a client, want an error with %q", tc.cfg, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Connect: %v, want %q", err, tc.want)
			}
		})
	}
}
