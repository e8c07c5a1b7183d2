# contractd — see README.md.
GO       ?= go
BIN      ?= bin
FUZZTIME ?= 10s

.PHONY: all build test bench demo lint fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/contractd ./cmd/contractd
	CGO_ENABLED=0 $(GO) build -o $(BIN)/fixture ./fixtures/cmd/fixture

# The README's test command: vet, every package's tests, a short fuzz of the
# contract parser, and a lint of every shipped contract.
test:
	@bash .ci/setup
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./contracts
	$(GO) run ./cmd/contractd lint fixtures/contracts/*.md

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=5m ./contracts

# Every performance figure, measured side by side in one run; writes
# docs/benchmarks.md.
bench:
	$(GO) run ./fixtures/bench -out docs/benchmarks.md

demo:
	$(GO) run ./cmd/contractd demo

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run ./cmd/contractd lint --strict=false fixtures/contracts/*.md

clean:
	rm -rf $(BIN)
