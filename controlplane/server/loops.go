package server

import (
	"context"
	"errors"
	"path/filepath"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/version"
	"github.com/outpost-edge/outpost/raftstore"
)

// runLoops runs the leader's control loops, the schedulers (SCH-1, SCH-12)
// and the workload controllers, until ctx ends (leadership lost or the
// server stopping); the core starts it after the leader barrier. Each
// gets the core's in-process client c, so its writes go through
// validation and admission like a user's.
func (s *Server) runLoops(ctx context.Context, c controller.Client) {
	// The scheduler and the controllers both follow pods, nodes and
	// services: one cache and one watch of each serves both.
	infs := controller.NewInformers(ctx, c, s.cfg.Logger.With("component", "informers"))
	defer infs.Wait()
	var wg sync.WaitGroup
	defer wg.Wait()
	lv := newLiveness()
	s.liveness.Store(lv)
	defer s.liveness.CompareAndSwap(lv, nil)
	defer s.zones.Reset()
	wg.Go(func() { s.runSchedulers(ctx, c, infs) })
	if !s.cfg.DisableControllers {
		wg.Go(func() {
			err := controllers.Run(ctx, controllers.Config{
				Client:    c,
				Informers: infs,
				Logger:    s.cfg.Logger.With("component", "controllers"),
				NodeLifecycle: controllers.NodeLifecycle{
					Membership:         s.nodeMembership(),
					Liveness:           lv,
					MonitorGracePeriod: s.cfg.NodeMonitorGracePeriod,
					Eviction:           s.cfg.Eviction,
					Zones:              s.zones,
				},
				FenceMargin:     s.cfg.FenceMargin,
				MachineProvider: s.cfg.MachineProvider,
				Raft:            raftMembers{s},
				Registerer:      s.cfg.Registry,
				PoolLock:        &s.poolMu,
				Version:         version.Version,
				ReleaseDir:      filepath.Join(s.cfg.DataDir, "releases"),
			})
			if err != nil && ctx.Err() == nil {
				s.log.Error("the controllers stopped", "err", err)
			}
		})
	}
	<-ctx.Done()
}

// raftMembers is the raft membership as the quorum guard sees it.
type raftMembers struct{ s *Server }

func (r raftMembers) Members(ctx context.Context) ([]controllers.RaftMember, error) {
	peers, err := r.s.node.Peers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]controllers.RaftMember, 0, len(peers))
	for _, p := range peers {
		out = append(out, controllers.RaftMember{ID: p.ID, Voter: p.Suffrage == "Voter", Leader: p.Leader, Reachable: p.Reachable,
			Version: p.Version, Info: p.Info, LastIndex: p.LastIndex})
	}
	return out, nil
}

// Remove removes member id; one already gone is removed.
func (r raftMembers) Remove(ctx context.Context, id string) error {
	if err := r.s.node.Remove(ctx, id); err != nil && !errors.Is(err, raftstore.ErrUnknownServer) {
		return err
	}
	return nil
}

func (r raftMembers) TransferLeadership(ctx context.Context, id string) error {
	return r.s.node.TransferLeadership(ctx, id)
}
