package agent

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// watchdog pets systemd's watchdog (WatchdogSec= in the unit) at half its
// interval, but only while the node loop keeps turning: an agent stuck
// somewhere is restarted by systemd, and its pods go on meanwhile.
func (a *Agent) watchdog(ctx context.Context, alive *atomic.Int64) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	stale := 3 * max(a.cfg.StatusCheck, time.Second)
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if time.Since(time.Unix(0, alive.Load())) > stale {
				a.log.Warn("the node loop is stuck: not petting systemd's watchdog")
				continue
			}
			_, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		}
	}
}
