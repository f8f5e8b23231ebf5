# Cubicle: `make run` sets up the host and serves the computers API;
# `make test` runs the whole test suite. Both install what they need.
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
BIN := bin/cubicle
BENCH_BIN := bin/cubicle-bench

.PHONY: all setup testdeps build run test lint bench clean

all: build

setup:
	@bash scripts/setup.sh

# The npm packages the tests drive (the AI SDK, the MCP client, the OpenAPI
# validator), pinned by their lockfiles.
testdeps:
	@bash scripts/testdeps.sh

# The agent uses syscall.AllThreadsSyscall, which Go refuses in cgo binaries:
# cubicle is always built without cgo (a static binary). It carries the lean
# agent (cmd/cubicle-agent, built first; see internal/sandbox/linux/agentbin).
# cubicle-bench, the benchmarks (the server carries none), runs the cubicle
# next to it.
AGENT_EMBED := internal/sandbox/linux/agentbin/cubicle-agent
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(AGENT_EMBED) ./cmd/cubicle-agent
	CGO_ENABLED=0 $(GO) build -trimpath -tags cubicle_agent -o $(BIN) ./cmd/cubicle
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BENCH_BIN) ./cmd/cubicle-bench

# The embedded default: SQLite and computers' disks under DATA. On first
# start an admin key is printed once (or set CUBICLE_ADMIN_KEY).
DATA ?= /var/lib/cubicle
LISTEN ?= 127.0.0.1:8080
run: setup build
	./$(BIN) serve --listen $(LISTEN) --data $(DATA)

lint:
	@test -z "$$(gofmt -l cmd internal)" || { echo "gofmt needed:"; gofmt -l cmd internal; exit 1; }
	$(GO) vet ./...

# Tests run as root against real namespaces, cgroups and seccomp. Test
# binaries are built with -race (which needs cgo); computers still run the
# cgo-free cubicle binary as their agent (CUBICLE_BIN).
test: setup testdeps build lint
	CGO_ENABLED=1 CUBICLE_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 30m ./...

bench: setup
	bash scripts/bench.sh

clean:
	rm -rf bin $(AGENT_EMBED)
