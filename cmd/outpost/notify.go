package main

import (
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// sdNotifyReady tells systemd (Type=notify) that the agent runs its pods.
// Outside systemd it does nothing.
func sdNotifyReady(log *slog.Logger) func() {
	return func() {
		if ok, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
			log.Warn("sd_notify READY", "err", err)
		} else if ok {
			log.Info("told systemd the agent is ready")
		}
	}
}
