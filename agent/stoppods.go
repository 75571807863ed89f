package agent

import (
	"context"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/runtime"
)

// stopAllPods stops and removes every container the agent started, each
// pod's with its own grace period (all pods at once, so the wait is the
// longest grace, not their sum), and gives back their networks. It is
// what Config.StopPodsOnExit asks for when the agent ends: `outpost dev
// --stop-pods`, for a development cluster whose demo should not outlive
// it. An agent installed on a host never does this: its pods run on
// while it restarts or is upgraded (SPEC TNT-5).
func (a *Agent) stopAllPods(ctx context.Context) {
	all, err := a.rt.ListContainers(ctx)
	if err != nil {
		a.log.Warn("list containers to stop them", "err", err)
		return
	}
	a.pods.mu.Lock()
	grace := map[string]time.Duration{}
	for uid, p := range a.pods.desired {
		grace[uid] = podGrace(p)
	}
	a.pods.mu.Unlock()
	byPod := map[string][]runtime.ContainerStatus{}
	for _, st := range all {
		if uid := st.Labels[runtime.LabelPodUID]; uid != "" {
			byPod[uid] = append(byPod[uid], st)
		}
	}
	a.log.Info("stopping every pod of this node as asked (--stop-pods)", "pods", len(byPod))
	var wg sync.WaitGroup
	for uid, cs := range byPod {
		g, ok := grace[uid]
		if !ok {
			g = DefaultTerminateWait
		}
		wg.Go(func() {
			for _, st := range cs {
				a.stopAndRemove(ctx, st, g, "pod_uid", uid)
			}
		})
	}
	wg.Wait()
	if a.cfg.PodNetwork != nil {
		for _, uid := range a.cfg.PodNetwork.Pods() {
			if err := a.cfg.PodNetwork.Teardown(ctx, podnet.Pod{UID: uid}); err != nil {
				a.log.Warn("remove a pod's network", "uid", uid, "err", err)
			}
		}
	}
}
