package contracts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkLoad1000 loads 1,000 distinct zulip-health-sized contracts through
// LoadMany, as `contractd serve` does for a directory. One op is all 1,000.
func BenchmarkLoad1000(b *testing.B) {
	src, err := os.ReadFile(zulipFixture)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	paths := make([]string, 1000)
	for i := range paths {
		v := strings.Replace(string(src), "name: zulip-health", fmt.Sprintf("name: zulip-health-%04d", i), 1)
		v = strings.Replace(v, "version: 3.3.0", fmt.Sprintf("version: 3.3.%d", i), 1)
		paths[i] = filepath.Join(dir, fmt.Sprintf("c%04d.md", i))
		if err := os.WriteFile(paths[i], []byte(v), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cpu0, cpuOK := processCPU()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		cs, ds := LoadMany(paths, Options{})
		for i, c := range cs {
			if c == nil {
				b.Fatalf("%s: %s", paths[i], ds[i])
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "load_1000_contracts_s")
	// CPU seconds per 1,000 contracts: on a shared, busy machine the wall
	// time above grows with everyone else's load; this does much less.
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric((cpu1-cpu0).Seconds()/float64(b.N), "cpu_s/op")
	}
}
