package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/contractd/contractd/engine/guard"
)

// BenchmarkWriteLedger measures one durable ledger write (temp file, fsync,
// rename, directory fsync) for a contract with eight units.
func BenchmarkWriteLedger(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l := NewLedger("a2a-selfheal")
	for i := range 8 {
		u := l.Unit(fmt.Sprintf("lab-a2a-%d", i))
		u.Repairs = []time.Time{t0, t0.Add(time.Hour)}
		u.Conditions = map[string]*guard.Condition{"wedged": {Held: 2, Since: t0}}
	}
	for b.Loop() {
		if err := s.WriteLedger("a2a-selfheal", l); err != nil {
			b.Fatal(err)
		}
	}
}
