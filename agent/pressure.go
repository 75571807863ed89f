package agent

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// Node-pressure eviction (issue 10 item 8), as the kubelet's hard
// eviction: while the node is under MemoryPressure or DiskPressure (the
// agent's hard thresholds) it evicts one pod at a time, the next only
// once the last one's containers are gone, until the signal clears. An
// evicted pod is killed at once (hard eviction has no grace period), is
// not started again, and its status says Failed, reason Evicted, with a
// message naming the signal; its controller replaces it elsewhere (the
// scheduler keeps new pods off through the pressure taints).
//
// The order is the kubelet's: BestEffort first; then Burstable pods
// whose memory working set exceeds their requests (under memory
// pressure; the containers' working sets come from the runtime); then
// the other Burstable; Guaranteed last. Within each, the lower priority
// first, then the larger use over requests, then the newest. Under disk
// pressure the agent has no per-pod disk figures, so use does not rank.

// pressureSignal is the resource the node is short of, "" when none.
func pressureSignal(conds []api.NodeCondition) string {
	for _, c := range conds {
		if c.Status != api.ConditionTrue {
			continue
		}
		switch c.Type {
		case api.NodeMemoryPressure:
			return "memory"
		case api.NodeDiskPressure:
			return "ephemeral-storage"
		}
	}
	return ""
}

// evictionTier is p's place in the order: BestEffort 0, Burstable over
// its requests 1, other Burstable 2, Guaranteed 3.
func evictionTier(p *api.Pod, over int64) int {
	class := p.Status.QOSClass
	if class == "" {
		class = api.QOSClassOf(&p.Spec)
	}
	switch class {
	case "BestEffort":
		return 0
	case "Burstable":
		if over > 0 {
			return 1
		}
		return 2
	}
	return 3
}

// memoryRequest is the sum of p's containers' memory requests, bytes.
func memoryRequest(p *api.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests["memory"]; ok {
			n += q.Value()
		}
	}
	return n
}

// evictionOrder sorts pods, the first to evict first; usage is each
// pod's working set by UID (nil: unknown, as under disk pressure).
func evictionOrder(pods []*api.Pod, usage map[string]uint64) {
	prio := func(p *api.Pod) int32 {
		if p.Spec.Priority != nil {
			return *p.Spec.Priority
		}
		return 0
	}
	over := make(map[*api.Pod]int64, len(pods))
	if usage != nil {
		for _, p := range pods {
			over[p] = int64(usage[string(p.UID)]) - memoryRequest(p)
		}
	}
	slices.SortStableFunc(pods, func(a, b *api.Pod) int {
		if c := cmp.Compare(evictionTier(a, over[a]), evictionTier(b, over[b])); c != 0 {
			return c
		}
		if c := cmp.Compare(prio(a), prio(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(over[b], over[a]); c != 0 {
			return c
		}
		// Newest first: it has done the least work.
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
}

// podMemory sums the working sets of the running containers by pod UID;
// a container whose figure cannot be read counts 0.
func (a *Agent) podMemory(ctx context.Context) map[string]uint64 {
	out := map[string]uint64{}
	cs, err := a.rt.ListContainers(ctx)
	if err != nil {
		a.log.Warn("node under memory pressure: containers not listed; pods are ranked without their use", "err", err)
		return out
	}
	for _, c := range cs {
		if c.State != runtime.StateRunning {
			continue
		}
		u, err := a.rt.ContainerUsage(ctx, c.ID)
		if err != nil {
			continue
		}
		out[c.Labels[runtime.LabelPodUID]] += u.MemoryWorkingSetBytes
	}
	return out
}

// systemCritical is the priority from which pods are never evicted for
// pressure, as the kubelet spares system-critical pods.
const systemCritical = 2000000000

// relievePressure evicts one pod if the node is under pressure and the
// previous victim is gone.
func (a *Agent) relievePressure(ctx context.Context, conds []api.NodeCondition) {
	signal := pressureSignal(conds)
	if signal == "" {
		return
	}
	a.pods.mu.Lock()
	if done := a.pods.victimDone; done != nil {
		select {
		case <-done:
		default:
			a.pods.mu.Unlock()
			return // the last victim is still stopping
		}
	}
	var pods []*api.Pod
	for _, p := range a.pods.desired {
		if p.Spec.Priority == nil || *p.Spec.Priority < systemCritical {
			pods = append(pods, p)
		}
	}
	a.pods.mu.Unlock()
	if len(pods) == 0 {
		return
	}
	var usage map[string]uint64
	if signal == "memory" {
		usage = a.podMemory(ctx)
	}
	evictionOrder(pods, usage)
	a.evictForPressure(ctx, pods[0], signal)
}

// evictForPressure stops p at once, keeps it stopped, and reports it
// Failed/Evicted.
func (a *Agent) evictForPressure(ctx context.Context, p *api.Pod, signal string) {
	uid := string(p.UID)
	msg := "The node was low on resource: " + signal + ". "
	a.log.Warn("node under pressure: evicting a pod", "signal", signal, "pod", p.Namespace+"/"+p.Name, "qos", api.QOSClassOf(&p.Spec))
	a.pods.mu.Lock()
	a.pods.evicted[uid] = true
	a.pods.mu.Unlock()
	var done <-chan struct{}
	if h := a.dropPod(uid, 0); h != nil {
		done = h.done
	} else {
		ch := make(chan struct{})
		done = ch
		a.wg.Go(func() {
			defer close(ch)
			a.stopContainers(ctx, p, 0)
		})
	}
	a.pods.mu.Lock()
	a.pods.victimDone = done
	a.pods.mu.Unlock()
	a.podEvent(p, "", eventWarning, "Evicted", msg)
	a.wg.Go(func() { a.reportEvicted(ctx, p, msg) })
}

// reportEvicted writes p's status Failed/Evicted, retrying while the
// control plane is away.
func (a *Agent) reportEvicted(ctx context.Context, p *api.Pod, msg string) {
	wait := time.Second
	for ctx.Err() == nil {
		upd := *p
		upd.Status.Phase = api.PodFailed
		upd.Status.Reason = "Evicted"
		upd.Status.Message = msg
		upd.Status.Conditions = slices.Clone(p.Status.Conditions)
		for i := range upd.Status.Conditions {
			if c := &upd.Status.Conditions[i]; c.Type == api.PodReady || c.Type == api.ContainersReady {
				c.Status, c.Reason = api.ConditionFalse, "PodFailed"
			}
		}
		upd.ResourceVersion = ""
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := a.cl.UpdateStatus(rctx, &upd)
		cancel()
		switch {
		case err == nil:
			a.contact()
			return
		case api.IsNotFound(err), api.ReasonOf(err) == api.ReasonForbidden:
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}
