package agent

import (
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// NotifyReady returns a Config.Ready that tells systemd (Type=notify) the
// agent runs its pods. Outside systemd (no NOTIFY_SOCKET) it does nothing.
func NotifyReady(log *slog.Logger) func() {
	return func() {
		if ok, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
			log.Warn("sd_notify READY", "err", err)
		} else if ok {
			log.Info("told systemd the agent is ready")
		}
	}
}
