package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/fixtures/need"
	"github.com/contractd/contractd/fixtures/sshd"
	"github.com/contractd/contractd/transports"
)

// TestRunOverRealSSH runs a contract against a real loopback sshd through
// the production opener: exec steps batched over one session, an http step
// tunnelled through the ssh target (the loopback of that host), and a
// repair on the same connection.
func TestRunOverRealSSH(t *testing.T) {
	need.SSHD(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := sshd.Start(ctx, sshd.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"connected": false}`)
	}))
	defer web.Close()
	marker := t.TempDir() + "/repaired"
	src := "---\n" + fmt.Sprintf(`kind: responsibility
name: over-ssh
version: 1.0.0
runtime_contract: 2
agent: box
guards: {grace: 1s}
targets:
  box: {ssh: %s@%s, known_hosts: %s, identity: [%s]}
vars:
  web: %s
`, srv.User, srv.Addr, srv.KnownHostsFile, srv.IdentityFile, web.URL) + "---\n" + `
# Over SSH

## Execution

### Box {#box agent=box on=box}

` + "```bash {id=host}\nhostname >/dev/null && echo up\n```" + `

Expected: ` + "`up`" + `

` + "```sh {id=count as=json}\necho '{\"n\": 3}'\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`n`" + ` | < 5 | ≥ 5 |

` + "```http {id=api via=box}\nGET ${web}/\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`connected`" + ` | ` + "`true`" + ` | ` + "`false`" + ` |

| Condition | Action |
|-----------|--------|
| ` + "`connected: false`" + ` | ` + "`touch " + marker + "`" + ` |
`
	c, diags := contracts.Parse("over-ssh.md", []byte(src), contracts.Options{})
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	pool := transports.NewPool(transports.PoolOptions{})
	defer pool.Close()
	// ReleaseTargets: the stage releases the connection, the repair redials.
	eng, err := New(Options{StateDir: t.TempDir(), Opener: PoolOpener{Pool: pool}, ReleaseTargets: true, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	st := rep.Stages[0]
	if !strings.HasPrefix(st.Target, "ssh ") || len(st.Steps) != 3 {
		t.Fatalf("stage %+v", st)
	}
	if st.Steps[0].Severity != contracts.SeverityHealthy || st.Steps[1].Severity != contracts.SeverityHealthy {
		t.Fatalf("exec steps over ssh: %+v %+v", st.Steps[0], st.Steps[1])
	}
	if st.Steps[2].HTTPStatus != "200" || st.Steps[2].Severity != contracts.SeverityCritical {
		t.Fatalf("tunnelled http step: %+v", st.Steps[2])
	}
	if len(rep.Actions) != 1 || rep.Actions[0].Status != "ran" {
		t.Fatalf("actions %+v", rep.Actions)
	}
	if out, err := srv.Run(ctx, "test -f "+marker+" && echo yes"); err != nil || strings.TrimSpace(out) != "yes" {
		t.Fatalf("the repair did not run on the ssh host: %q %v", out, err)
	}
}
