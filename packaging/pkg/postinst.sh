#!/bin/sh
# outpost's package starts nothing: "outpost install server|agent" writes
# the configuration and enables and starts a service. systemd is only told
# to read the units the package put in place.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
echo "outpost: nothing started. Run 'outpost install server' or 'outpost install agent --server URL --token-file FILE'."
