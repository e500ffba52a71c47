# Development commands. `make test` is the test command: the README and
# .ci/run use exactly it.

GO ?= go
# bash, for set -o pipefail in bench.
SHELL := /bin/bash
# staticcheck is run from the Go module proxy, pinned. The proxy serves it by
# module version only (not by release names such as 2025.1.1).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# How long each fuzz target runs.
FUZZTIME ?= 30s
# The packages whose fuzz targets `make fuzz` runs: the line decoder
# (protocol), the line splitter (internal/framing), the whole session
# (transport/stdio), the HTTP handler, the config loader, the MCP
# client's reading side (mcpclient), exec-tool argv and file-resource
# paths (catalog).
FUZZPKGS := ./protocol ./internal/framing ./transport/stdio ./transport/http ./config ./mcpclient ./catalog
# One fuzzing process at a time, and a short minimization: the machine is
# shared, and a finding is kept (testdata/fuzz/) however long it is.
FUZZFLAGS ?= -parallel 1 -fuzzminimizetime 5s

# The version `make build` stamps in (snodod version): git describe in a
# checkout, a worktree included, whose VCS stamp go build misses; empty
# outside one, and the binary then reads its build info.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
# Installed by npm ci; newer than the lock file once it is installed: the
# TypeScript client, and the conformance suite with the Node 22 it runs on.
E2E_NODE := e2e/node/node_modules/.package-lock.json
E2E_CONFORMANCE := e2e/conformance/node_modules/.package-lock.json

.PHONY: build install test bench fuzz fuzz-ci soak lint

build:
	$(GO) build $(if $(VERSION),-ldflags "-X main.version=$(VERSION)") -o bin/snodod ./cmd/snodod

# install puts the binary in $(PREFIX)/bin: ~/.local/bin by default, a
# directory of the user's that login shells put on PATH. GUI MCP clients do
# not read that PATH: their configuration names the absolute path (README).
PREFIX ?= $(HOME)/.local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/snodod $(DESTDIR)$(PREFIX)/bin/snodod

# The main module, then the bench harness's own tests (its statistics and
# table; bench/ is a separate module so peer SDKs stay out of snodod's).
# The TypeScript e2e test's packages are installed first (below), so a
# fresh clone runs it instead of skipping it.
test: $(E2E_NODE) $(E2E_CONFORMANCE)
	$(GO) test -race -count=1 ./...
	cd bench && $(GO) test -count=1 ./...

# The e2e tests' npm packages, exactly as each package-lock.json pins them;
# installed again when the lock file changes. Without npm, make test fails
# and says what to install.
e2e/%/node_modules/.package-lock.json: e2e/%/package-lock.json
	@command -v npm >/dev/null || { echo "make test runs e2e tests on Node.js packages, which need Node.js 20 or later and npm: install them (apt-get install nodejs npm), then run make test again, or install the packages yourself with: npm ci --prefix e2e/$*"; exit 1; }
	npm ci --prefix e2e/$* --no-audit --no-fund
	@touch $@

# bench runs the Go micro-benchmarks (their output is kept in
# bench/bin/gobench.txt for the page), then the harness in bench/ (its own
# module): snodod against the Go and TypeScript SDKs, mcp-go and a raw
# floor over stdio, snodod serve with many sessions and hosting a server,
# the scaling curves, and Streamable HTTP against the SDKs' HTTP servers.
# It prints one table and rewrites docs/bench.md, docs/bench.png and
# docs/bench-scaling.png; then the upgrade scenario (bench/cmd/upgradebench)
# rewrites docs/bench-upgrade.md, and the remote-server scenario against
# mcp-remote (bench/cmd/remotebench) adds its section to docs/bench.md.
# BENCH_QUICK=1: one repeat with smaller
# counts, for development.
BENCH_GOFLAGS := $(if $(filter 1,$(BENCH_QUICK)),-benchtime 200ms,)

bench: build bench/node/node_modules/.package-lock.json
	mkdir -p bench/bin
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem $(BENCH_GOFLAGS) ./... | tee bench/bin/gobench.txt
	cd bench && $(GO) build -o bin/ ./peers/gosdk ./peers/mcpgo ./peers/raw ./peers/gosdkhttp ./cmd/mcpbench
	cd bench && BENCH_QUICK=$(BENCH_QUICK) bin/mcpbench -snodod ../bin/snodod -docs ../docs -gobench bin/gobench.txt
	cd bench && $(GO) build -o bin/ ./cmd/upgradebench && BENCH_QUICK=$(BENCH_QUICK) bin/upgradebench -snodod ../bin/snodod -docs ../docs
	cd bench && $(GO) build -o bin/ ./cmd/remotebench && BENCH_QUICK=$(BENCH_QUICK) bin/remotebench -snodod ../bin/snodod -server bin/gosdkhttp -node node -docs ../docs

# The TypeScript peer's packages, exactly as bench/node/package-lock.json
# pins them; reinstalled when the lock file changes. Without npm the
# harness leaves the TypeScript column out.
bench/node/node_modules/.package-lock.json: bench/node/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix bench/node --no-audit --no-fund; \
	else echo "npm not found: the TypeScript peer is left out of make bench"; fi

# .ci/fuzz runs each target in turn (go test fuzzes one at a time) and
# stops at the first finding: go test writes the input under the package's
# testdata/fuzz/TARGET/, where it stays as a regression case that every
# `make test` runs (commit it with the fix).
fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZFLAGS="$(FUZZFLAGS)" .ci/fuzz $(FUZZPKGS)

# fuzz-ci is what .ci/run runs: every target for 10 s.
fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=10s

# soak runs e2e/soak_test.go (build tag soak; not in CI): SOAK_SESSIONS
# sessions through snodod serve for SOAK_TIME, with reloads every 30 s and
# a hosted server killed every 60 s; it fails on a lost or wrong answer or
# a process left behind, and rewrites docs/bench-soak.md.
SOAK_TIME ?= 10m
SOAK_SESSIONS ?= 1000
soak: $(E2E_NODE)
	SOAK_TIME=$(SOAK_TIME) SOAK_SESSIONS=$(SOAK_SESSIONS) SOAK_DOCS=$(CURDIR)/docs/bench-soak.md \
		$(GO) test -tags soak -run '^TestSoak$$' -count=1 -timeout 0 -v ./e2e

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l found unformatted files (run gofmt -w on them):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
