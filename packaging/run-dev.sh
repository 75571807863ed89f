#!/usr/bin/env bash
# `make run`: start `outpost dev`, wait until it answers, load the examples,
# say how to look at them, and keep running until Ctrl-C.
set -euo pipefail
BIN=${BIN:-bin/outpost}
DATA=${DATA:-$HOME/.local/share/outpost}

"$BIN" dev --data-dir "$DATA" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' INT TERM EXIT

for _ in $(seq 1 150); do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "outpost dev exited; see the messages above" >&2
		exit 1
	fi
	if "$BIN" get namespaces >/dev/null 2>&1; then
		break
	fi
	sleep 0.2
done
# Simulated nodes stand in for agents until `outpost agent` exists: they
# register, heartbeat and mark the pods bound to them Running.
"$BIN" sim agents -f examples/sim/nodes.yaml &
simpid=$!
trap 'kill "$simpid" "$pid" 2>/dev/null; wait "$simpid" "$pid" 2>/dev/null || true' INT TERM EXIT
"$BIN" apply -f examples/

cat <<MSG

outpost dev is running (API https://127.0.0.1:6443, data in $DATA).
The admin config is in ~/.config/outpost/config. In another shell:

  $BIN get namespaces
  $BIN get nodes
  $BIN get pods -o wide
  $BIN describe pod hello-pod
  $BIN rollout status deployment/hello
  $BIN adm taint nodes us-a dedicated=db:NoSchedule
  $BIN sim silence eu-a
  $BIN adm raft list-peers

The nodes are simulated ('outpost sim agents', examples/sim/nodes.yaml): they
mark pods Running without starting containers until 'outpost agent' exists.
Ctrl-C stops it; run 'make run' again and every object is still there.
MSG
wait "$pid"
