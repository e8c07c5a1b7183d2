package main

import (
	"fmt"
	"io"

	"github.com/contractd/contractd/engine/serve"
)

// commit and date are set at build time, with version, by the Makefile:
// -ldflags "-X main.version=… -X main.commit=… -X main.date=…", so a
// binary built from a source tree without its VCS history (a tarball, a
// Debian source package, -buildvcs=false) still says what it is.
var commit, date string

// buildInfo describes this binary: what the build set, else the VCS stamp
// the Go toolchain embedded, else the module version `go install` gives
// it, else "dev" and "unknown".
func buildInfo() serve.BuildInfo {
	v := version
	if v == "dev" {
		v = ""
	}
	return serve.ReadBuildInfo(v, commit, date)
}

// writeVersion writes the line `contractd --version` prints: the
// version, the commit and the build date, and the Go version.
func writeVersion(w io.Writer) {
	b := buildInfo()
	fmt.Fprintf(w, "contractd %s (commit %s, built %s, %s)\n", b.Version, b.Revision, b.Date, b.GoVersion)
}
