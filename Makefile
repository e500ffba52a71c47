# Development commands. `make test` is the test command: the README and
# .ci/run use exactly it.

GO ?= go
# staticcheck is run from the Go module proxy, pinned. The proxy serves it by
# module version only (not by release names such as 2025.1.1).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# How long each fuzz target runs.
FUZZTIME ?= 30s
# The packages whose fuzz targets `make fuzz` runs.
FUZZPKGS := ./protocol

.PHONY: build test bench fuzz lint

build:
	$(GO) build -o bin/snodod ./cmd/snodod

# The main module, then the bench harness's own tests (its statistics and
# table; bench/ is a separate module so peer SDKs stay out of snodod's).
test:
	$(GO) test -race -count=1 ./...
	cd bench && $(GO) test -count=1 ./...

# bench runs the Go micro-benchmarks, then the harness in bench/ (its own
# module): snodod against the Go and TypeScript SDKs, mcp-go and a raw
# floor, and snodod serve with many sessions. It prints one table and
# rewrites docs/bench.md and docs/bench.png; then the HTTP scenario
# (bench/cmd/httpbench) rewrites docs/bench-http.md. BENCH_QUICK=1: one
# repeat with smaller counts, for development.
BENCH_GOFLAGS := $(if $(filter 1,$(BENCH_QUICK)),-benchtime 200ms,)

bench: build bench/node/node_modules/.package-lock.json
	$(GO) test -run '^$$' -bench . -benchmem $(BENCH_GOFLAGS) ./...
	cd bench && $(GO) build -o bin/ ./peers/gosdk ./peers/mcpgo ./peers/raw ./cmd/mcpbench
	cd bench && BENCH_QUICK=$(BENCH_QUICK) bin/mcpbench -snodod ../bin/snodod -docs ../docs
	cd bench && $(GO) build -o bin/ ./peers/gosdkhttp ./cmd/httpbench && bin/httpbench -snodod ../bin/snodod -gosdk bin/gosdkhttp -docs ../docs

# The TypeScript peer's packages, exactly as bench/node/package-lock.json
# pins them; reinstalled when the lock file changes. Without npm the
# harness leaves the TypeScript column out.
bench/node/node_modules/.package-lock.json: bench/node/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix bench/node --no-audit --no-fund; \
	else echo "npm not found: the TypeScript peer is left out of make bench"; fi

# go test runs one fuzz target at a time, so each is run in turn.
fuzz:
	@set -e; for pkg in $(FUZZPKGS); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l found unformatted files (run gofmt -w on them):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
