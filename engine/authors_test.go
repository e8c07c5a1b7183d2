package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/transports"
)

// What new authors tripped on (#23), as the run meets it.

// TestPerAgentKeyNamedLikeAnItemKeyIsFilledByIt: lint and the run read
// one rule for a per-agent key: named like a for_each item key, it is the
// item's value, unless a step reports a field of that name; a binding
// reads the item key by name too. Lint accepts the contract without a
// warning (contracts.TestPerAgentKeyFilledByNothingIsTrue).
func TestPerAgentKeyNamedLikeAnItemKeyIsFilledByIt(t *testing.T) {
	src := "---\n" + `name: backups
runtime_contract: 2
targets:
  box: {local: true}
for_each:
  backups: [{name: db, file: db.tar, keep: 7}, {name: www, file: www.tar, keep: 3}]
---

## Maintains

- agents: map of per-backup snapshots

### Per-Agent Snapshot Schema

` + "```json" + `
{"db": {"file": "db.tar", "age_h": 3, "kept": 7}, "www": {"file": "www.tar", "age_h": 3, "kept": 3}}
` + "```" + `

| Key | Value |
|-----|-------|
| ` + "`kept`" + ` | ` + "`keep`" + ` |

## Execution

### Backup {#backup agent=$name on=box for_each=backups}

` + "```sh {id=stat as=json fields=\"age_h:int file:string\"}\nstat-backup \"${file}\"\n```" + `

| Field | Healthy | Critical |
|-------|---------|----------|
| ` + "`age_h`" + ` | < 26 | >= 26 |
`
	c, ds := contracts.Parse("backups.md", []byte(src), contracts.Options{})
	if c == nil || len(ds) != 0 {
		t.Fatalf("lint:\n%s", ds)
	}
	box := &fakeTarget{name: "box", exec: func(ctx context.Context, cmd transports.Command) (transports.Result, error) {
		// www's step reports its file's full path; db's reports none.
		if strings.Contains(cmd.Script, "www.tar") {
			return transports.Result{Stdout: `{"age_h": 1, "file": "/srv/www.tar"}`}, nil
		}
		return transports.Result{Stdout: `{"age_h": 2}`}, nil
	}}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	eng, err := New(Options{StateDir: dir, Opener: &fakeOpener{targets: map[string]*fakeTarget{"box": box}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(dirStore(t, dir), "backups", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	agents := st.Snapshot["agents"].(map[string]any)
	db, www := agents["db"].(map[string]any), agents["www"].(map[string]any)
	if db["file"] != "db.tar" || db["kept"] != float64(7) || db["age_h"] != float64(2) {
		t.Errorf("db snapshot %v; want file db.tar (the item's), kept 7 (bound to the item key by name), age_h 2", db)
	}
	if www["file"] != "/srv/www.tar" || www["kept"] != float64(3) {
		t.Errorf("www snapshot %v; want file /srv/www.tar (the step's field wins over the item's), kept 3", www)
	}
}
