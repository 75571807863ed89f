#!/bin/sh
# On removal (not on upgrade) stop and disable the services "outpost
# install" enabled: the package's units go away with it, and an enabled
# unit without its file would be left dangling. Their configuration
# (/etc/outpost) and data (/var/lib/outpost) stay: "outpost uninstall
# --purge", before removing the package, takes those too.
set -e
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	for u in outpost-agent.service outpost-server.service; do
		systemctl disable --now "$u" >/dev/null 2>&1 || true
	done
fi
