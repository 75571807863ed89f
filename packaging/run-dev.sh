#!/usr/bin/env bash
# `make run`: start `outpost dev` (control plane and this host's agent in
# one process), wait until the node is Ready, load the demo image onto it,
# apply examples/demo.yaml, say how to look at it, and keep running until
# Ctrl-C.
set -euo pipefail
BIN=${BIN:-bin/outpost}
DATA=${DATA:-$HOME/.local/share/outpost}
IMAGE=${IMAGE:-bin/demo-image.tar}

# As root with the CNI plugins, iptables and nft (make run installs them)
# the agent gives pods networks of their own, Services cluster IPs and
# DNS names (--pod-network auto; SPEC NET-1..4).
"$BIN" dev --data-dir "$DATA" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
# Ctrl-C is how `make run` is meant to end: stop cleanly, exit 0.
trap 'exit 0' INT TERM

wait_for() { # what, command...
	local what=$1; shift
	for _ in $(seq 1 300); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "outpost dev exited; see the messages above" >&2
			exit 1
		fi
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	echo "timed out waiting for $what" >&2
	exit 1
}
wait_for "the API" "$BIN" get namespaces
node=$(hostname)
echo "waiting for node $node to register and become Ready..."
# The stored Node may still say Ready from the last run: wait for the
# agent's endpoint too, which answers only once this run's agent is up.
wait_for "node $node" bash -c "'$BIN' get node '$node' | grep -qw Ready"
wait_for "the agent's endpoint" bash -c "exec 3<>/dev/tcp/127.0.0.1/10250"
"$BIN" image import "$IMAGE" --all
"$BIN" apply -f examples/demo.yaml

cat <<MSG

outpost dev is running (API https://127.0.0.1:6443, data in $DATA), with
this host as node $node running real containers through containerd.
The admin config is in ~/.config/outpost/config. In another shell:

  $BIN get nodes
  $BIN get pods -o wide
  $BIN logs -f \$($BIN get pods -l app=ticker -o name | head -1)
  $BIN logs -f \$($BIN get pods -l app=caller -o name | head -1)   # Service hello, by name
  $BIN get services,endpointslices
  $BIN exec \$($BIN get pods -l app=hello-node -o name | head -1) -- /demo
  curl http://127.0.0.1:8088/
  $BIN scale deployment/ticker --replicas 4
  $BIN describe node $node

Ctrl-C stops it; containers keep running until the agent comes back, and
'make run' again finds every object where it was.
MSG
wait "$pid"
