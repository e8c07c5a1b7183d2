package serve

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets the daemon tests, which mostly wait on timers, run eight at
// a time even on a two-core machine, unless -test.parallel says otherwise.
// Started with SERVE_LOCK_HELPER or SERVE_IDLE_HELPER, the test binary is
// instead the other process of a lock or RSS test.
func TestMain(m *testing.M) {
	if spec := os.Getenv("SERVE_LOCK_HELPER"); spec != "" {
		os.Exit(holdLock(spec))
	}
	if spec := os.Getenv("SERVE_IDLE_HELPER"); spec != "" {
		os.Exit(serveIdle(spec))
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8") // the flag exists once testing is initialised
	}
	os.Exit(m.Run())
}
