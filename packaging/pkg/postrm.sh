#!/bin/sh
# systemd forgets the units the package took away.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
