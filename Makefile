# contractd — see README.md.
GO       ?= go
BIN      ?= bin
# Fuzzing is bounded by executions, not time: a wall-clock -fuzztime can end
# in a spurious "context deadline exceeded" on a loaded machine (Go's fuzz
# coordinator, go.dev/issue/75804).
FUZZTIME ?= 10000x

.PHONY: all build test bench demo lint fuzz soak clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/contractd ./cmd/contractd
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
	$(GO) test -run='^$$' -fuzz=FuzzPerfdata -fuzztime=2000000x ./steps

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

clean:
	rm -rf $(BIN)
