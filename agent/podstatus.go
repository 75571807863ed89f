package agent

import (
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// status computes the pod's status from what the worker knows, keeping
// the conditions' transition times of the pod's current status.
func (w *worker) status() api.PodStatus {
	pod := w.pod
	st := api.PodStatus{
		HostIP:   w.a.address,
		PodIP:    w.a.address,
		QOSClass: pod.Status.QOSClass,
	}
	switch {
	case w.net != nil:
		st.PodIP = w.net.IPs[0].String()
		for _, ip := range w.net.IPs {
			st.PodIPs = append(st.PodIPs, api.PodIPEntry{IP: ip.String()})
		}
	case w.a.ownNetwork(pod):
		st.PodIP = "" // none yet
	case w.a.address != "":
		st.PodIPs = []api.PodIPEntry{{IP: w.a.address}}
	}
	if !w.startTime.IsZero() {
		st.StartTime = api.NewTime(w.startTime)
	}
	initDone := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := w.containerStatus(c, w.recs[c.Name], true)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initDone = false
		}
	}
	var running, started, succeeded, failed, restarting int
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		r := w.recs[c.Name]
		if !initDone && r == nil {
			cs := api.ContainerStatus{Name: c.Name, Image: c.Image, State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: reasonPodInitializing}}}
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
			continue
		}
		cs := w.containerStatus(c, r, false)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		switch {
		case cs.State.Running != nil:
			running++
			started++
		case cs.State.Terminated != nil:
			started++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case cs.State.Waiting != nil && cs.LastState.Terminated != nil:
			started++
			restarting++
		}
	}
	n := len(pod.Spec.Containers)
	switch {
	case n > 0 && succeeded+failed == n && failed == 0:
		st.Phase = api.PodSucceeded
	case n > 0 && succeeded+failed == n:
		st.Phase = api.PodFailed
	case n > 0 && started == n && running+restarting > 0:
		st.Phase = api.PodRunning
	case !initDone && initFailedForGood(pod, st.InitContainerStatuses):
		st.Phase = api.PodFailed
	default:
		st.Phase = api.PodPending
	}
	ready := n > 0 && running == n
	now := w.a.now()
	st.Conditions = []api.PodCondition{
		condition(pod, api.PodInitialized, initDone, now),
		condition(pod, api.PodReady, ready, now),
		condition(pod, api.ContainersReady, ready, now),
		condition(pod, api.PodScheduled, true, now),
	}
	return st
}

// initFailedForGood reports whether an init container failed under
// restartPolicy Never, which fails the pod.
func initFailedForGood(pod *api.Pod, init []api.ContainerStatus) bool {
	if pod.Spec.RestartPolicy != api.RestartPolicyNever {
		return false
	}
	for _, cs := range init {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return true
		}
	}
	return false
}

// containerStatus is one container's status in the Kubernetes shape.
func (w *worker) containerStatus(c *api.Container, r *record, init bool) api.ContainerStatus {
	cs := api.ContainerStatus{Name: c.Name, Image: c.Image}
	if r == nil {
		reason := reasonCreating
		if init {
			reason = reasonPodInitializing
		}
		cs.State.Waiting = &api.ContainerStateWaiting{Reason: reason}
		return cs
	}
	cs.RestartCount = int32(r.attempt)
	if r.imageDigest != "" {
		cs.ImageID = c.Image + "@" + r.imageDigest
	} else if r.cur != nil && r.cur.ImageDigest != "" {
		cs.ImageID = c.Image + "@" + r.cur.ImageDigest
	}
	if r.id != "" {
		cs.ContainerID = "containerd://" + r.id
	}
	if r.prev != nil && r.prev.State == runtime.StateExited {
		cs.LastState.Terminated = terminated(r.prev)
	}
	switch {
	case r.cur != nil && r.cur.State == runtime.StateRunning:
		cs.State.Running = &api.ContainerStateRunning{StartedAt: timePtr(r.cur.StartedAt)}
		cs.Ready = true
		t := true
		cs.Started = &t
	case r.waitReason != "":
		cs.State.Waiting = &api.ContainerStateWaiting{Reason: r.waitReason, Message: r.waitMsg}
		if r.cur != nil && r.cur.State == runtime.StateExited {
			cs.LastState.Terminated = terminated(r.cur)
		}
	case r.cur != nil && r.cur.State == runtime.StateExited && w.restarts(r.cur.ExitCode, init):
		// Ended, and the restart policy will start it again: it waits,
		// as the kubelet shows it, rather than looking finished.
		cs.State.Waiting = &api.ContainerStateWaiting{Reason: reasonCrashLoop}
		cs.LastState.Terminated = terminated(r.cur)
	case r.cur != nil && r.cur.State == runtime.StateExited:
		cs.State.Terminated = terminated(r.cur)
	default:
		cs.State.Waiting = &api.ContainerStateWaiting{Reason: reasonCreating}
	}
	return cs
}

func terminated(st *runtime.ContainerStatus) *api.ContainerStateTerminated {
	reason := st.Reason
	if reason == "" {
		reason = "Error"
		if st.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &api.ContainerStateTerminated{
		ExitCode:    st.ExitCode,
		Reason:      reason,
		Message:     st.Message,
		StartedAt:   timePtr(st.StartedAt),
		FinishedAt:  timePtr(st.FinishedAt),
		ContainerID: "containerd://" + st.ID,
	}
}

func timePtr(t time.Time) *api.Time {
	if t.IsZero() {
		return nil
	}
	return api.NewTime(t)
}

// condition is a pod condition of type typ, keeping its transition time
// from the pod's current status while its value stays.
func condition(pod *api.Pod, typ string, ok bool, now time.Time) api.PodCondition {
	status := api.ConditionFalse
	if ok {
		status = api.ConditionTrue
	}
	c := api.PodCondition{Type: typ, Status: status, LastTransitionTime: api.NewTime(now)}
	for _, old := range pod.Status.Conditions {
		if old.Type == typ && old.Status == status {
			c.LastTransitionTime = old.LastTransitionTime
			c.Reason, c.Message = old.Reason, old.Message
			if typ == api.PodScheduled {
				return old
			}
		}
	}
	return c
}
