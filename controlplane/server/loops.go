package server

import (
	"context"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controllers"
)

// runLoops runs the leader's control loops, the schedulers (SCH-1, SCH-12)
// and the workload controllers, until ctx ends (leadership lost or the
// server stopping); the core starts it after the leader barrier. Each
// gets the core's in-process client c, so its writes go through
// validation and admission like a user's.
func (s *Server) runLoops(ctx context.Context, c controller.Client) {
	var wg sync.WaitGroup
	defer wg.Wait()
	lv := newLiveness()
	s.liveness.Store(lv)
	defer s.liveness.CompareAndSwap(lv, nil)
	defer s.zones.Reset()
	wg.Go(func() { s.runSchedulers(ctx, c) })
	if !s.cfg.DisableControllers {
		wg.Go(func() {
			err := controllers.Run(ctx, controllers.Config{
				Client: c,
				Logger: s.cfg.Logger.With("component", "controllers"),
				NodeLifecycle: controllers.NodeLifecycle{
					Membership:         s.nodeMembership(),
					Liveness:           lv,
					MonitorGracePeriod: s.cfg.NodeMonitorGracePeriod,
					Eviction:           s.cfg.Eviction,
					Zones:              s.zones,
				},
				FenceMargin:     s.cfg.FenceMargin,
				MachineProvider: s.cfg.MachineProvider,
			})
			if err != nil && ctx.Err() == nil {
				s.log.Error("the controllers stopped", "err", err)
			}
		})
	}
	<-ctx.Done()
}
