# contractd — see README.md.
GO       ?= go
BIN      ?= bin
# Fuzzing is bounded by executions, not time: a wall-clock -fuzztime can end
# in a spurious "context deadline exceeded" on a loaded machine (Go's fuzz
# coordinator, go.dev/issue/75804).
FUZZTIME ?= 10000x

# What `contractd --version` and contractd_build_info say, stamped in with
# -ldflags so that a build without its VCS history (a tarball, a Debian
# source package, -buildvcs=false) says it too: the release tag (v1.2.3 is
# 1.2.3), else 0.0.0~gitYYYYMMDD.COMMIT; the commit; and the commit's date,
# or SOURCE_DATE_EPOCH's. Each can be given: make deb VERSION=1.2.3.
ifeq ($(origin COMMIT),undefined)
COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
ifeq ($(origin DATE),undefined)
DATE := $(shell date -u -d "@$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)}" +%Y-%m-%dT%H:%M:%SZ)
endif
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null | sed -e 's/^v//' -e 's/-\([0-9]*\)-g/+\1.g/' | grep . || \
	echo "0.0.0~git$$(date -u -d '$(DATE)' +%Y%m%d).$$(echo '$(COMMIT)' | cut -c1-12)")
endif
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)

.PHONY: all build test bench demo lint fuzz soak clean deb

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/contractd ./cmd/contractd
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fixture ./fixtures/cmd/fixture

# The README's test command (and CI's, through .ci/run): installs sshd, the
# ssh client, a static busybox and curl when it can (.ci/setup), then vet,
# every package's tests, a short fuzz of the contract parser and a lint of
# every shipped contract; it ends with each package's closing line, the
# skipped tests counted by reason, and the total time. With CI=true or
# CONTRACTD_REQUIRE_REAL=1 a missing sshd, Docker engine or busybox fails.
test:
	$(GO) run ./fixtures/testrun -go $(GO) -fuzztime $(FUZZTIME)

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=2000000x ./contracts

# The chaos soak of `contractd serve` (fixtures/chaos, docs/operations.md
# "Chaos soak"): SOAK_MINUTES of random faults against resident sessions to
# two real sshds and a Docker container, then the counts: daemon exits,
# leftover processes on the targets, duplicate repairs, and the daemon's
# goroutines, fds and RSS. A missing sshd or Docker engine fails it.
# CONTRACTD_CHAOS_SEED=N replays a run's faults.
SOAK_MINUTES ?= 10
soak:
	CONTRACTD_CHAOS=$(SOAK_MINUTES)m CONTRACTD_REQUIRE_REAL=1 $(GO) test -count=1 -v -run 'Chaos' \
		-timeout $$(( $(SOAK_MINUTES) * 2 + 15 ))m ./fixtures/chaos

# Every performance figure, measured side by side in one run; writes
# docs/benchmarks.md.
bench:
	$(GO) run ./fixtures/bench -out docs/benchmarks.md

demo:
	$(GO) run ./cmd/contractd demo

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run ./cmd/contractd lint --strict fixtures/contracts/*.md

# The Debian package (packaging/deb): the binary with its manual page and
# bash and zsh completions, the systemd units, the Prometheus rules and the
# example contracts, built by nfpm (installed through the Go module proxy
# when missing). Writes $(DIST)/contractd_VERSION-1_ARCH.deb.
DIST         ?= dist
NFPM_VERSION ?= v2.48.0
# Debian ships binaries stripped; Go's panics still name functions and lines.
deb: LDFLAGS += -s -w
deb: build
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' DATE='$(DATE)' BIN='$(BIN)' DIST='$(DIST)' GO='$(GO)' \
		NFPM_VERSION='$(NFPM_VERSION)' bash packaging/deb/build.sh

clean:
	rm -rf $(BIN) $(DIST)
