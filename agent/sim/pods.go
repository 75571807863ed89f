package sim

import (
	"context"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// inform keeps one resource in view for the whole simulation with one
// node credential (see client.ListWatch).
func (a *Agents) inform(r *api.Resource, reset func([]api.Object), event func(typ string, obj api.Object)) {
	a.watcher.ListWatch(a.ctx, r, "", client.ListOptions{}, client.ListWatchHandler{
		Reset: reset,
		Event: event,
		Error: func(op string, err error) { a.warn(op+" failed", "resource", r.Plural, "err", err) },
	})
}

// resetNodes and nodeEvent follow the silenced annotation of our nodes and
// whether the server has them Ready.
func (a *Agents) resetNodes(objs []api.Object) {
	for _, o := range objs {
		a.nodeEvent(client.EventAdded, o)
	}
}

func (a *Agents) nodeEvent(typ string, obj api.Object) {
	node, ok := obj.(*api.Node)
	if !ok || typ == client.EventDeleted {
		return
	}
	n := a.byName[node.Name]
	if n == nil {
		return
	}
	n.latest.See(node)
	n.serverReady.Store(api.ReadyIn(node.Status.Conditions))
	a.maybeUpdate(n, node)
	a.maybeReplaceBinary(n, node)
	ann := node.Annotations[SilencedAnnotation]
	if prev := n.annotation.Swap(&ann); prev != nil && *prev == ann {
		return
	}
	// A change of the annotation switches the node; while it stays put,
	// Silence, Resume and the signals may have switched it since.
	a.setSilenced(n, ann == "true", "annotation "+SilencedAnnotation)
}

// needsRunning reports whether pod is one of ours that the simulation
// has still to act on: bound to one of our nodes and either not yet
// Running or finished (to start), or being deleted (to stop and delete,
// as a real agent finishes a graceful delete).
func (a *Agents) needsRunning(pod *api.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	if _, ours := a.byName[pod.Spec.NodeName]; !ours {
		return false
	}
	return pod.DeletionTimestamp != nil || pod.Status.Phase == "" || pod.Status.Phase == api.PodPending
}

func podKey(pod *api.Pod) string { return pod.Namespace + "/" + pod.Name }

// resetPods replaces what is pending with what a fresh list says.
func (a *Agents) resetPods(objs []api.Object) {
	a.podMu.Lock()
	clear(a.pending)
	var keys []string
	for _, o := range objs {
		if pod, ok := o.(*api.Pod); ok && a.needsRunning(pod) {
			k := podKey(pod)
			a.pending[k] = pod
			keys = append(keys, k)
		}
	}
	a.podMu.Unlock()
	for _, k := range keys {
		a.podq.Add(k)
	}
}

func (a *Agents) podEvent(typ string, obj api.Object) {
	pod, ok := obj.(*api.Pod)
	if !ok {
		return
	}
	k := podKey(pod)
	a.podMu.Lock()
	if typ == client.EventDeleted || !a.needsRunning(pod) {
		delete(a.pending, k)
		a.podMu.Unlock()
		return
	}
	a.pending[k] = pod
	a.podMu.Unlock()
	a.podq.Add(k)
}

// requeuePods queues the pending pods of node, which just resumed.
func (a *Agents) requeuePods(node string) {
	a.podMu.Lock()
	var keys []string
	for k, p := range a.pending {
		if p.Spec.NodeName == node {
			keys = append(keys, k)
		}
	}
	a.podMu.Unlock()
	for _, k := range keys {
		a.podq.Add(k)
	}
}

func (a *Agents) podWorker() {
	for {
		k, ok := a.podq.Get()
		if !ok {
			return
		}
		a.startPod(k)
		a.podq.Done(k)
	}
}

// startPod marks the latest version of pending pod k Running, as the node
// it is bound to. A conflict means a newer version is on its way through
// the watch, which queues the pod again.
func (a *Agents) startPod(k string) {
	a.podMu.Lock()
	pod := a.pending[k]
	a.podMu.Unlock()
	if pod == nil {
		return
	}
	n := a.byName[pod.Spec.NodeName]
	n.mu.RLock()
	if n.silenced || !n.registered.Load() {
		n.mu.RUnlock()
		return // stays pending; Resume queues it again
	}
	ctx, cancel := context.WithTimeout(a.ctx, writeTimeout)
	defer cancel()
	var err error
	if pod.DeletionTimestamp != nil {
		// A simulated pod stops at once: finish its delete.
		zero := int64(0)
		_, err = n.cl.DeleteWith(ctx, podsResource, pod.Namespace, pod.Name,
			client.DeleteOptions{Preconditions: &client.Preconditions{UID: pod.UID}, GracePeriodSeconds: &zero})
		if api.IsConflict(err) {
			err = nil // another pod holds the name now
		}
	} else {
		upd := *pod
		upd.Status = runningStatus(pod, n.hostIP, podIP(n.podRange, n.nextIP.Add(1)-1), api.NewTime(time.Now()))
		_, _, err = n.cl.UpdateStatus(ctx, &upd)
	}
	n.mu.RUnlock()
	switch {
	case err == nil, api.IsNotFound(err):
		a.podMu.Lock()
		if a.pending[k] == pod {
			delete(a.pending, k)
		}
		a.podMu.Unlock()
	case api.IsConflict(err), a.ctx.Err() != nil:
	default:
		a.warn("pod status update failed", "pod", k, "node", n.name, "err", err)
		time.AfterFunc(time.Second, func() { a.podq.Add(k) })
	}
}

// runningStatus is pod's status once its node has started it: Running,
// every condition True, each container running and ready since now.
func runningStatus(pod *api.Pod, hostIP, ip string, now *api.Time) api.PodStatus {
	st := pod.Status
	st.Phase = api.PodRunning
	st.Reason, st.Message = "", ""
	st.HostIP = hostIP
	if st.PodIP == "" {
		st.PodIP = ip
	}
	if pod.Spec.HostNetwork {
		st.PodIP = st.HostIP
	}
	if st.StartTime == nil {
		st.StartTime = now
	}
	want := []string{api.PodInitialized, api.PodReady, api.ContainersReady, api.PodScheduled}
	conds := make([]api.PodCondition, 0, len(want)+len(pod.Status.Conditions))
	for _, typ := range want {
		c := api.PodCondition{Type: typ, Status: api.ConditionTrue, LastTransitionTime: now}
		for _, old := range pod.Status.Conditions {
			if old.Type == typ && old.Status == api.ConditionTrue {
				c = old
			}
		}
		conds = append(conds, c)
	}
	for _, old := range pod.Status.Conditions {
		known := false
		for _, typ := range want {
			known = known || old.Type == typ
		}
		if !known {
			conds = append(conds, old)
		}
	}
	st.Conditions = conds
	started := true
	st.InitContainerStatuses = make([]api.ContainerStatus, len(pod.Spec.InitContainers))
	for i, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses[i] = api.ContainerStatus{
			Name:        c.Name,
			Ready:       true,
			Image:       c.Image,
			ImageID:     "sim://" + c.Image,
			ContainerID: "sim://" + pod.UID + "/" + c.Name,
			State: api.ContainerState{Terminated: &api.ContainerStateTerminated{
				Reason: "Completed", StartedAt: now, FinishedAt: now,
				ContainerID: "sim://" + pod.UID + "/" + c.Name,
			}},
		}
	}
	st.ContainerStatuses = make([]api.ContainerStatus, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		st.ContainerStatuses[i] = api.ContainerStatus{
			Name:        c.Name,
			Ready:       true,
			Started:     &started,
			Image:       c.Image,
			ImageID:     "sim://" + c.Image,
			ContainerID: "sim://" + pod.UID + "/" + c.Name,
			State:       api.ContainerState{Running: &api.ContainerStateRunning{StartedAt: now}},
		}
	}
	return st
}
