# outpost: build, run and test. `make run` and `make test` are the two
# commands a new machine needs; both install what they need on Debian when
# run as root.
SHELL := /bin/bash
GO ?= go
export GOFLAGS ?= -mod=mod
# encoding/json on its v2 engine: decoding and encoding API objects (every
# write, on every server) cost a third to a half less. The code builds and
# its tests pass without it too.
export GOEXPERIMENT ?= jsonv2
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/outpost-edge/outpost/controlplane/version.Version=$(VERSION)
BIN := bin/outpost
DATA ?= $(HOME)/.local/share/outpost
# Packages whose tests exercise concurrency run under the race detector.
RACE_PKGS := ./raftstore/... ./controlplane/store/... ./controlplane/server/... ./controlplane/client/... \
	./controlplane/controller/... ./controlplane/controllers/... ./controlplane/scheduler/loop/... ./agent/... ./testing/...
OTHER_PKGS := ./controlplane/api/... ./controlplane/admission/... ./controlplane/scheduler ./controlplane/scheduler/policy/... \
	./controlplane/scheduler/taints/... ./controlplane/auth/... ./controlplane/pki/... ./controlplane/cli/... ./cmd/...

.PHONY: all build run test test-deps deps vet unit race fuzz bench soak clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/outpost

# deps installs what building needs. Go 1.26 itself must be present
# (Debian's golang package is too old); everything else comes from the Go
# module proxy.
deps:
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is required: install it from https://go.dev/dl and put it on PATH"; exit 1; }
	$(GO) mod download

test-deps: deps
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		need=""; for p in iproute2 procps; do dpkg -s $$p >/dev/null 2>&1 || need="$$need $$p"; done; \
		if [ -n "$$need" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; fi; \
	fi

# run builds outpost, starts a one-process dev cluster (control plane on
# 127.0.0.1:6443, data under $(DATA)) and loads examples/; the admin config
# goes to ~/.config/outpost/config so `bin/outpost get pods` works in another
# shell.
run: deps build
	BIN=$(BIN) DATA=$(DATA) packaging/run-dev.sh

vet:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 $(OTHER_PKGS)

race:
	$(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)

test: test-deps vet build unit race
	@echo "make test: all passed"

# fuzz runs every fuzz target for FUZZTIME each (the corpora run in `make test`).
FUZZTIME ?= 30s
fuzz:
	@for t in $$($(GO) test -list 'Fuzz.*' ./controlplane/api | grep ^Fuzz); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./controlplane/api || exit 1; done

bench: build
	$(GO) run ./testing/bench -out BENCHMARKS.md -bin $(BIN)

soak: build
	OUTPOST_SOAK=1 $(GO) test -count=1 -timeout 60m -run 'Linearizab|Crash' -v ./testing/...

clean:
	rm -rf bin
