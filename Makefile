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

test:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

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
