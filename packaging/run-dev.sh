#!/usr/bin/env bash
# `make run`: start `outpost dev` (control plane and this host's agent in
# one process), wait until the node is Ready, load the demo image onto it,
# create what of examples/demo.yaml is absent, say how to look at it, and
# keep running until Ctrl-C, which stops the demo's pods too (KEEP_PODS=1
# leaves them running, as an installed agent's pods outlive it).
set -euo pipefail
BIN=${BIN:-bin/outpost}
DATA=${DATA:-$HOME/.local/share/outpost}
IMAGE=${IMAGE:-bin/demo-image.tar}
# AGENT_LISTEN moves the agent's endpoint off 10250; DEV_FLAGS are more
# flags of `outpost dev` (its other ports: outpost dev --help).
AGENT_LISTEN=${AGENT_LISTEN:-127.0.0.1:10250}
DEV_FLAGS=${DEV_FLAGS:-}
stop_pods=--stop-pods
if [ -n "${KEEP_PODS:-}" ]; then stop_pods=; fi

# As root with the CNI plugins, iptables and nft (make run installs them)
# the agent gives pods networks of their own, Services cluster IPs and
# DNS names (--pod-network auto; SPEC NET-1..4).
# shellcheck disable=SC2086 # DEV_FLAGS are words
"$BIN" dev --data-dir "$DATA" --agent-listen "$AGENT_LISTEN" $stop_pods $DEV_FLAGS &
pid=$!
mkdir -p "$DATA"
echo "$pid" > "$DATA/dev.pid"
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -f "$DATA/dev.pid"' EXIT
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
agent_host=${AGENT_LISTEN%:*}
agent_port=${AGENT_LISTEN##*:}
wait_for "the agent's endpoint" bash -c "exec 3<>/dev/tcp/${agent_host:-127.0.0.1}/$agent_port"
"$BIN" image import "$IMAGE" --all
# Only what is absent is created: a second `make run` leaves what the
# user changed (a scale, an edit) as it is.
if out=$("$BIN" create -f examples/demo.yaml 2>&1); then
	echo "$out"
elif grep -v -e '(AlreadyExists)' -e ' created$' <<<"$out" >&2; then
	exit 1
else
	grep ' created$' <<<"$out" || true
	echo "the demo's objects already there are left as they are (examples/demo.yaml is not applied again)"
fi

cat <<MSG

outpost dev is running (API https://127.0.0.1:6443, data in $DATA), with
this host as node $node running real containers through containerd.
The admin config is in ~/.config/outpost/config; the web console is at
https://127.0.0.1:6443/ui/ (log in with the token: line of that file).
In another shell:

  $BIN get nodes
  $BIN get pods -o wide
  $BIN logs -f deployment/ticker
  $BIN logs -f deployment/caller   # the caller reaching Service hello by its name
  $BIN get services,endpointslices
  $BIN exec daemonset/hello-node -- /demo echo hello from inside
  curl http://127.0.0.1:8088/
  $BIN scale deployment/ticker --replicas 4
  $BIN describe node $node

Ctrl-C stops it and the demo's pods (KEEP_PODS=1 make run leaves them
running, as an installed agent's pods outlive it); 'make run' again finds
every object where it was, and 'make stop' stops one running elsewhere.
MSG
wait "$pid"
