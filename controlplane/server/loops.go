package server

import (
	"context"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/scheduler/loop"
)

// runLoops runs the leader's control loops, the schedulers (SCH-1, SCH-12)
// and the workload controllers, until ctx ends (leadership lost or the
// server stopping). Each gets the in-process client, so its writes go
// through validation and admission like a user's.
func (s *Server) runLoops(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	c := internalClient{s}
	if len(s.cfg.Schedulers) > 0 {
		l, err := loop.New(loop.Config{
			Client:     c,
			Schedulers: s.schedulers.build(),
			Logger:     s.cfg.Logger.With("component", "scheduler"),
			Registerer: s.cfg.Registry,
		})
		if err != nil {
			s.log.Error("the scheduler cannot start", "err", err)
		} else {
			s.schedulers.setOnChange(l.SetSchedulers)
			defer s.schedulers.setOnChange(nil)
			wg.Go(func() {
				if err := l.Run(ctx); err != nil && ctx.Err() == nil {
					s.log.Error("the scheduler stopped", "err", err)
				}
			})
		}
	}
	if !s.cfg.DisableControllers {
		wg.Go(func() {
			err := controllers.Run(ctx, controllers.Config{
				Client: c,
				Logger: s.cfg.Logger.With("component", "controllers"),
				NodeLifecycle: controllers.NodeLifecycle{
					Membership:         s.nodeMembership(),
					MonitorGracePeriod: s.cfg.NodeMonitorGracePeriod,
				},
			})
			if err != nil && ctx.Err() == nil {
				s.log.Error("the controllers stopped", "err", err)
			}
		})
	}
	<-ctx.Done()
}
