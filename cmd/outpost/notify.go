package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// notifyServerStarted tells systemd (Type=notify, the unit `outpost
// install server` writes) that the server listens, and pets systemd's
// watchdog (WatchdogSec=) for as long as the API answers /livez through
// its own listener: a server whose accept loop or handlers are wedged is
// restarted. READY=1 comes once the listeners are up, not once the
// cluster has a leader: a member waiting for its peers is started, and
// `outpost install` waits for /readyz itself. Outside systemd (no
// NOTIFY_SOCKET) it does nothing.
func notifyServerStarted(ctx context.Context, s *server.Server, log *slog.Logger) {
	if ok, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("sd_notify READY", "err", err)
	} else if ok {
		log.Info("told systemd the server is started")
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	c, err := client.New(s.AdminConfig())
	if err != nil {
		log.Warn("systemd watchdog: no client of this server's API; not petting the watchdog", "err", err)
		return
	}
	go func() {
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, cancel := context.WithTimeout(ctx, interval/4)
			_, _, err := c.Do(pctx, http.MethodGet, "/livez", nil, nil)
			cancel()
			if err != nil {
				log.Warn("the API does not answer /livez: not petting systemd's watchdog", "err", err)
				continue
			}
			_, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		}
	}()
}
