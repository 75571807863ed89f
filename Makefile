# outpost: build, run and test. `make run` and `make test` are the two
# commands a new machine needs; both install what they need on Debian when
# run as root.
SHELL := /bin/bash
GO ?= go
export GOFLAGS ?= -mod=mod
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/outpost-edge/outpost/controlplane/version.Version=$(VERSION)
BIN := bin/outpost
DATA ?= $(HOME)/.local/share/outpost
# Packages whose tests exercise concurrency run under the race detector.
RACE_PKGS := ./raftstore/... ./controlplane/store/... ./controlplane/core/... ./controlplane/server/... ./controlplane/client/... \
	./controlplane/controller/... ./controlplane/controllers/... ./controlplane/scheduler/loop/... ./agent/... ./testing/... \
	./runtime/... ./gossip/... ./osupdate/... ./controlplane/release/... ./selfupdate/... ./controlplane/events/...
OTHER_PKGS := ./controlplane/api/... ./controlplane/admission/... ./controlplane/scheduler ./controlplane/scheduler/policy/... \
	./controlplane/scheduler/taints/... ./controlplane/auth/... ./controlplane/pki/... ./controlplane/cli/... ./cmd/... ./internal/realtest ./internal/portcheck ./internal/exepages \
	./internal/install ./controlplane/console ./internal/memlimit

.PHONY: all build run stop test test-deps host-deps deps vet unit race fuzz bench soak clean demo-image man completions package

all: build

# The log writer containerd's shims run beside every container is built
# first and embedded (agent/logwriterbin): a standard-library binary holds
# a sixth of the memory the whole outpost binary would, per container.
# outpost itself is built without cgo (issue 16 item 4): the cgo build links
# libc dynamically and, because a dependency imports plugin, exports every
# Go symbol (7 MB of .dynsym/.dynstr that ld.so reads at each start); the
# static binary is 10 MB smaller and every process of it maps that much
# less. Nothing in outpost needs cgo: Go's own DNS resolver and os/user.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o agent/logwriterbin/bin/outpost-logwriter ./packaging/logwriter
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/outpost

# deps installs what building needs. Go 1.26 itself must be present
# (Debian's golang package is too old); everything else comes from the Go
# module proxy.
deps:
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is required: install it from https://go.dev/dl and put it on PATH"; exit 1; }
	$(GO) mod download

# host-deps installs, as root on Debian, what the agent and its tests
# drive for real: containerd and runc (the agent starts its own
# containerd), iproute2 (test hosts in network namespaces), procps,
# debootstrap and systemd-container (test hosts that boot a real systemd
# under systemd-nspawn; their Debian rootfs is built once and cached),
# chromium (the web console's end-to-end test, testing/console), crun (the
# agent's --oci-runtime crun and its tests).
# crun refuses a hybrid cgroup layout (v1 controllers plus a cgroup2 mount
# at /sys/fs/cgroup/unified) while the cgroup2 hierarchy holds a controller
# no v1 hierarchy took (hugetlb on hosts that mount only some v1
# controllers): each such controller is mounted as a v1 hierarchy, as
# systemd's hybrid layout does, which runc is fine with too.
# gcc: the race detector (cgo) and the test of a binary linked by the system
# linker (internal/exepages) need a C compiler.
HOST_PKGS := gcc crun containerd runc iproute2 procps debootstrap systemd-container openssl containernetworking-plugins iptables nftables chromium
host-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		need=""; for p in $(HOST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || need="$$need $$p"; done; \
		if [ -n "$$need" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; fi; \
		u=/sys/fs/cgroup/unified; \
		if [ -f $$u/cgroup.controllers ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then \
			for c in $$(cat $$u/cgroup.controllers); do \
				mkdir -p /sys/fs/cgroup/$$c && mount -t cgroup -o $$c cgroup /sys/fs/cgroup/$$c || exit 1; \
			done; \
		fi; \
	fi

test-deps: deps host-deps

# run builds outpost, starts a one-process dev cluster (control plane on
# 127.0.0.1:6443, data under $(DATA)) and loads examples/; the admin config
# goes to ~/.config/outpost/config so `bin/outpost get pods` works in another
# shell.
# Ctrl-C ends it and stops the demo's pods (KEEP_PODS=1 leaves them
# running); AGENT_LISTEN=127.0.0.1:PORT moves the agent's endpoint off a
# busy 10250, DEV_FLAGS passes more flags to `outpost dev`.
run: deps host-deps build demo-image
	BIN=$(BIN) DATA=$(DATA) packaging/run-dev.sh

# stop ends a `make run` running in another shell (or in the background),
# which stops its pods as Ctrl-C does.
stop:
	@pidf=$(DATA)/dev.pid; \
	if [ -f $$pidf ] && kill -0 $$(cat $$pidf) 2>/dev/null; then \
		pid=$$(cat $$pidf); kill $$pid; echo "stopping outpost dev (pid $$pid) and its pods..."; \
		for i in $$(seq 1 600); do kill -0 $$pid 2>/dev/null || { echo "stopped"; exit 0; }; sleep 0.1; done; \
		echo "outpost dev (pid $$pid) is still running after 60 s" >&2; exit 1; \
	else echo "no make run is running with data in $(DATA)"; fi

# demo-image builds the demo's workload, a static binary, and packs it into
# an OCI archive that `outpost image import` loads (there is no registry).
demo-image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/demo ./packaging/demo
	$(GO) run ./packaging/demoimage -bin bin/demo -out bin/demo-image.tar

# man and completions write what the packages install (issue 15 item 5):
# bin/man/outpost.1, outpost-get.1, ... (one page per command, from its
# help; dated by the last commit so that packages build reproducibly) and
# bin/completions/outpost.bash, _outpost (zsh) and outpost.fish.
man: build
	rm -rf bin/man
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) $(BIN) man bin/man

completions: build
	rm -rf bin/completions && mkdir -p bin/completions
	$(BIN) completion bash >bin/completions/outpost.bash
	$(BIN) completion zsh >bin/completions/_outpost
	$(BIN) completion fish >bin/completions/outpost.fish

vet:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	OUTPOST_TEST_REAL=1 OUTPOST_MUTATION_DETECTOR=1 $(GO) test -count=1 $(OTHER_PKGS)

# OUTPOST_TEST_REAL=1: tests of real parts (containerd, network
# namespaces) must run, and fail when what they need is missing, instead
# of skipping. OUTPOST_MUTATION_DETECTOR=1: the server processes that
# end-to-end tests start check that nothing changes a stored object (it
# is on in test binaries anyway; controlplane/store/mutation.go).
race:
	OUTPOST_TEST_REAL=1 OUTPOST_MUTATION_DETECTOR=1 $(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)

test: test-deps vet build unit race
	@echo "make test: all passed"

# fuzz runs every fuzz target for FUZZTIME each (the corpora run in `make test`).
FUZZTIME ?= 30s
FUZZ_PKGS := ./controlplane/api ./controlplane/admission ./controlplane/store ./raftstore ./agent/host
fuzz:
	@for p in $(FUZZ_PKGS); do for t in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
		echo "== $$p $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$p || exit 1; done; done

# bin/etcd-bench runs etcd 3.6.8 beside outpost for the write table's etcd
# column; a module of its own (testing/bench/etcd/go.mod), so etcd never
# enters outpost's go.mod or binary.
bin/etcd-bench: testing/bench/etcd/go.mod testing/bench/etcd/main.go
	cd testing/bench/etcd && $(GO) build -trimpath -o $(CURDIR)/bin/etcd-bench .

bench: build bin/etcd-bench
	$(GO) run ./testing/bench -out BENCHMARKS.md -bin $(BIN) -etcd bin/etcd-bench
	set -o pipefail; OUTPOST_TEST_REAL=1 OUTPOST_CONSOLE_NODES=1000 OUTPOST_CONSOLE_PODS=10000 $(GO) test -count=1 -v -run TestConsolePerformance ./testing/console | grep -E 'perf_test|^(ok|FAIL|---)'

soak: build
	OUTPOST_SOAK=1 $(GO) test -count=1 -timeout 60m -run 'Linearizab|Crash|Planted|Randomized' -v ./testing/...

# package builds bin/outpost_VERSION_ARCH.deb and bin/outpost-VERSION-1.ARCH.rpm
# (nfpm from the Go module proxy; packaging/package.sh says what they hold).
package: build
	packaging/package.sh $(BIN) bin $(VERSION)

clean:
	rm -rf bin
