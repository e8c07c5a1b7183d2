package serve

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets the daemon tests, which mostly wait on timers, run eight at
// a time even on a two-core machine, unless -test.parallel says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8") // the flag exists once testing is initialised
	}
	os.Exit(m.Run())
}
