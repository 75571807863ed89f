package agent

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/runtime"
)

// podHandle is a running worker and how to reach it.
type podHandle struct {
	// poke makes the worker look at its containers now.
	poke    func()
	updates chan *api.Pod
	// stop carries the grace period the worker stops the containers with.
	stop chan time.Duration
	done chan struct{}
}

// pods is the desired set and its workers.
type pods struct {
	mu      sync.Mutex
	desired map[string]*api.Pod // by UID
	workers map[string]*podHandle
	// sent is the last status sent for each pod; pending the next one.
	sent    map[string]api.PodStatus
	pending map[string]pendingStatus
	kick    chan struct{}
	// byContainer finds the pod of a container, for exit events.
	byContainer map[string]string
	// finishing holds the pods being deleted gracefully whose deletion
	// this agent is finishing (stopping them, then deleting the object).
	finishing map[string]*api.Pod
	// fenced holds the pods the agent stopped by its own rule while cut
	// off (fence.go).
	fenced map[string]fenced
	// evicted holds the pods evicted for node pressure (pressure.go):
	// never started again; victimDone closes when the last one stopped.
	evicted    map[string]bool
	victimDone <-chan struct{}
}

type pendingStatus struct {
	pod    *api.Pod
	status api.PodStatus
}

func newPods() *pods {
	return &pods{
		desired: map[string]*api.Pod{},
		workers: map[string]*podHandle{},
		sent:    map[string]api.PodStatus{},
		pending: map[string]pendingStatus{},
		kick:    make(chan struct{}, 1),

		byContainer: map[string]string{},
		finishing:   map[string]*api.Pod{},
		fenced:      map[string]fenced{},
		evicted:     map[string]bool{},
	}
}

// wants reports whether the agent should run pod: bound here, not being
// deleted, and not finished.
func (a *Agent) wants(p *api.Pod) bool {
	evicted := p.Status.Phase == api.PodFailed && p.Status.Reason == "Evicted"
	return p.Spec.NodeName == a.cfg.NodeName && p.DeletionTimestamp == nil && !evicted
}

// setPod makes p desired (or not) and tells its worker, starting or
// stopping it. It saves the desired set first, so that a restart finds
// what was last asked.
func (a *Agent) setPod(ctx context.Context, p *api.Pod, existing []runtime.ContainerStatus, saved bool) {
	uid := string(p.UID)
	a.pods.mu.Lock()
	evicted := a.pods.evicted[uid]
	a.pods.mu.Unlock()
	if evicted {
		return // evicted for node pressure: it stays stopped
	}
	if a.isFenced(uid) && a.wants(p) {
		a.unfence(ctx, p)
		return
	}
	if !a.wants(p) {
		if p.Spec.NodeName != a.cfg.NodeName {
			a.forgetFenced(uid)
		}
		if p.Spec.NodeName == a.cfg.NodeName && p.DeletionTimestamp != nil {
			a.finishDelete(ctx, p)
			return
		}
		a.dropPod(uid, -1)
		return
	}
	// The state file needs what the agent acts on, the spec: a status
	// change (most events are the agent's own status writes coming back)
	// costs no write, and so no fsync.
	a.pods.mu.Lock()
	old := a.pods.desired[uid]
	a.pods.mu.Unlock()
	if !saved && (old == nil || !reflect.DeepEqual(old.Spec, p.Spec)) {
		if err := a.state.putPod(p); err != nil {
			a.log.Error("save pod to the state file", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	a.pods.desired[uid] = p
	if h := a.pods.workers[uid]; h != nil {
		// The newest version wins; never block here, under the lock the
		// worker needs to report.
		select {
		case <-h.updates:
		default:
		}
		h.updates <- p
		return
	}
	if a.fenceDeadlinePassed(p, a.fence.now()) {
		// Not started: cut off for longer than it may run so (fence.go).
		a.pods.desired[uid] = p
		a.wg.Go(func() { a.fencePod(ctx, p) })
		return
	}
	h := &podHandle{updates: make(chan *api.Pod, 1), stop: make(chan time.Duration, 1), done: make(chan struct{})}
	a.pods.workers[uid] = h
	w := newWorker(a, p, existing)
	h.poke = w.poke
	a.wg.Go(func() {
		defer close(h.done)
		w.run(ctx, h.updates, h.stop)
	})
}

// dropPod stops the pod's worker (which stops its containers, giving them
// grace, or the pod's own grace period when negative) and forgets the
// pod. It returns the stopped worker's handle, nil if there was none.
func (a *Agent) dropPod(uid string, grace time.Duration) *podHandle {
	if err := a.state.deletePod(uid); err != nil {
		a.log.Error("remove pod from the state file", "uid", uid, "err", err)
	}
	a.pods.mu.Lock()
	delete(a.pods.desired, uid)
	h := a.pods.workers[uid]
	delete(a.pods.workers, uid)
	delete(a.pods.pending, uid)
	delete(a.pods.sent, uid)
	for id, u := range a.pods.byContainer {
		if u == uid {
			delete(a.pods.byContainer, id)
		}
	}
	a.pods.mu.Unlock()
	if h != nil {
		h.stop <- grace
	}
	return h
}

// resetPods makes the desired set exactly list (the control plane's view
// wins), stopping pods that are no longer there.
func (a *Agent) resetPods(ctx context.Context, list []*api.Pod, existing map[string][]runtime.ContainerStatus) {
	keep := map[string]bool{}
	var wanted []*api.Pod
	var terminating []*api.Pod
	for _, p := range list {
		switch {
		case a.wants(p):
			keep[string(p.UID)] = true
			wanted = append(wanted, p)
		case p.Spec.NodeName == a.cfg.NodeName && p.DeletionTimestamp != nil:
			terminating = append(terminating, p)
		}
	}
	if err := a.state.replacePods(wanted); err != nil {
		a.log.Error("save pods to the state file", "err", err)
	}
	var gone []string
	for _, p := range terminating {
		a.finishDelete(ctx, p)
	}
	// Fenced pods the control plane no longer has here were replaced.
	listed := map[string]bool{}
	for _, p := range list {
		if p.Spec.NodeName == a.cfg.NodeName {
			listed[string(p.UID)] = true
		}
	}
	a.pods.mu.Lock()
	var replaced []string
	for uid := range a.pods.fenced {
		if !listed[uid] {
			replaced = append(replaced, uid)
		}
	}
	a.pods.mu.Unlock()
	for _, uid := range replaced {
		a.log.Info("a pod this node stopped while cut off is gone from the control plane: forgetting it", "uid", uid)
		a.forgetFenced(uid)
	}
	a.pods.mu.Lock()
	for uid := range a.pods.desired {
		if !keep[uid] && a.pods.finishing[uid] == nil {
			gone = append(gone, uid)
		}
	}
	a.pods.mu.Unlock()
	for _, uid := range gone {
		a.log.Info("pod no longer bound here: stopping it", "uid", uid)
		a.dropPod(uid, -1)
	}
	for _, p := range wanted {
		a.setPod(ctx, p, existing[string(p.UID)], true)
	}
}

// reportPod queues pod's status for the reporter if it changed.
func (a *Agent) reportPod(pod *api.Pod, st api.PodStatus) {
	uid := string(pod.UID)
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	if _, ok := a.pods.desired[uid]; !ok {
		return
	}
	if prev, ok := a.pods.sent[uid]; ok && reflect.DeepEqual(prev, st) {
		delete(a.pods.pending, uid)
		return
	}
	a.pods.pending[uid] = pendingStatus{pod: pod, status: st}
	select {
	case a.pods.kick <- struct{}{}:
	default:
	}
}

// reportLoop sends queued pod statuses; while the control plane is away
// they wait (the newest status of each pod only) and go when it answers.
func (a *Agent) reportLoop(ctx context.Context) {
	retry := time.NewTicker(2 * time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.pods.kick:
		case <-retry.C:
		}
		a.pods.mu.Lock()
		batch := make([]pendingStatus, 0, len(a.pods.pending))
		for _, p := range a.pods.pending {
			batch = append(batch, p)
		}
		a.pods.mu.Unlock()
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for _, p := range batch {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				a.sendStatus(ctx, p)
			})
		}
		wg.Wait()
	}
}

// sendStatus writes one pod's status, reading the pod again on a
// conflict.
func (a *Agent) sendStatus(ctx context.Context, p pendingStatus) {
	uid := string(p.pod.UID)
	pod := p.pod
	for attempt := 0; attempt < 3; attempt++ {
		upd := *pod
		upd.Status = p.status
		upd.Status.QOSClass = pod.Status.QOSClass
		upd.Status.NominatedNodeName = pod.Status.NominatedNodeName
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := a.cl.UpdateStatus(rctx, &upd)
		cancel()
		switch {
		case err == nil:
			a.contact()
			a.pods.mu.Lock()
			if cur, ok := a.pods.pending[uid]; ok && reflect.DeepEqual(cur.status, p.status) {
				delete(a.pods.pending, uid)
			}
			if _, ok := a.pods.desired[uid]; ok {
				a.pods.sent[uid] = p.status
			}
			a.pods.mu.Unlock()
			return
		case api.IsConflict(err):
			obj, gerr := a.cl.Get(ctx, podsResource, pod.Namespace, pod.Name, client.GetOptions{})
			if gerr != nil {
				return
			}
			fresh, ok := obj.(*api.Pod)
			if !ok || fresh.UID != pod.UID || leavesTerminalPhase(fresh, p.status) {
				return
			}
			pod = fresh
		case api.IsNotFound(err), api.ReasonOf(err) == api.ReasonForbidden:
			// Deleted, or bound elsewhere since: the watch will say so.
			return
		case api.ReasonOf(err) != "":
			// The control plane answered, and refused.
			a.contact()
			a.metrics.syncError(loopPodStatus)
			a.log.Warn("pod status refused", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			return
		default:
			if ctx.Err() == nil {
				a.offline(err)
				a.metrics.syncError(loopPodStatus)
			}
			return
		}
	}
}

// leavesTerminalPhase reports whether writing st would take pod out of
// Failed or Succeeded, which a pod never leaves: a status queued before
// an eviction wrote Failed (reportEvicted) must not bring it back to
// Running when its first write meets the eviction's and is retried.
func leavesTerminalPhase(pod *api.Pod, st api.PodStatus) bool {
	return api.IsPodPhaseTerminal(pod.Status.Phase) && !api.IsPodPhaseTerminal(st.Phase)
}

// watchPods keeps the desired set in line with the pods bound to this
// node: a list (the control plane's view wins), then a watch (see
// client.ListWatch).
func (a *Agent) watchPods(ctx context.Context) {
	opts := client.ListOptions{FieldSelector: "spec.nodeName=" + a.cfg.NodeName}
	a.cl.ListWatch(ctx, podsResource, "", opts, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			a.contact()
			list := make([]*api.Pod, 0, len(objs))
			for _, o := range objs {
				if p, ok := o.(*api.Pod); ok {
					list = append(list, p)
				}
			}
			a.resetPods(ctx, list, nil)
		},
		Event: func(typ string, obj api.Object) {
			p, ok := obj.(*api.Pod)
			if !ok {
				return
			}
			if typ == client.EventDeleted {
				a.log.Info("pod deleted: stopping it", "pod", p.Namespace+"/"+p.Name)
				a.dropPod(string(p.UID), -1)
				a.forgetFenced(string(p.UID))
				a.pods.mu.Lock()
				delete(a.pods.evicted, string(p.UID))
				a.pods.mu.Unlock()
				return
			}
			a.setPod(ctx, p, nil, false)
		},
		Error: func(_ string, err error) {
			a.offline(err)
			a.metrics.syncError(loopPods)
		},
	})
}

// removeOrphans stops and removes outpost's containers whose pod is not
// desired (deleted while the agent was down). Containers without
// outpost's labels are never listed, so never touched.
func (a *Agent) removeOrphans(ctx context.Context) {
	all, err := a.rt.ListContainers(ctx)
	if err != nil {
		return
	}
	// Listed before the lock, which every pod's worker takes.
	withFiles := a.podFileUIDs()
	a.pods.mu.Lock()
	var orphans []runtime.ContainerStatus
	for _, st := range all {
		uid := st.Labels[runtime.LabelPodUID]
		if _, ok := a.pods.desired[uid]; !ok && a.pods.finishing[uid] == nil {
			if _, busy := a.pods.workers[uid]; !busy {
				orphans = append(orphans, st)
			}
		}
	}
	var netOrphans []string
	if a.cfg.PodNetwork != nil {
		for _, uid := range a.cfg.PodNetwork.Pods() {
			if _, ok := a.pods.desired[uid]; !ok && a.pods.finishing[uid] == nil {
				if _, busy := a.pods.workers[uid]; !busy {
					netOrphans = append(netOrphans, uid)
				}
			}
		}
	}
	var fileOrphans []string
	for _, uid := range withFiles {
		_, desired := a.pods.desired[uid]
		_, busy := a.pods.workers[uid]
		if !desired && !busy && a.pods.finishing[uid] == nil {
			fileOrphans = append(fileOrphans, uid)
		}
	}
	a.pods.mu.Unlock()
	for _, uid := range fileOrphans {
		a.removePodFiles(uid)
	}
	for _, uid := range netOrphans {
		// A pod deleted while this agent was away: only its UID is
		// known, which is what the plugins' cached ADD is found by.
		a.log.Info("removing the network of a pod no longer bound here", "uid", uid)
		if err := a.cfg.PodNetwork.Teardown(ctx, podnet.Pod{UID: uid}); err != nil {
			a.log.Warn("remove an orphan pod network", "uid", uid, "err", err)
		}
	}
	for _, st := range orphans {
		a.log.Info("removing a container of a pod no longer bound here", "container", st.ID,
			"pod", st.Labels[runtime.LabelPodNamespace]+"/"+st.Labels[runtime.LabelPodName])
		if st.State == runtime.StateRunning {
			if err := a.rt.StopContainer(ctx, st.ID, DefaultTerminateWait); err != nil {
				a.log.Warn("stop orphan", "container", st.ID, "err", err)
			}
		}
		if err := a.rt.RemoveContainer(ctx, st.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			a.log.Warn("remove orphan", "container", st.ID, "err", err)
		}
	}
}

// trackContainer records that container id belongs to pod uid.
func (a *Agent) trackContainer(id, uid string) {
	a.pods.mu.Lock()
	a.pods.byContainer[id] = uid
	a.pods.mu.Unlock()
}

// pollInterval is how often workers look at running containers.
func (a *Agent) pollInterval() time.Duration {
	if a.exitsWatched.Load() {
		return pollWatched
	}
	return pollRunning
}

// followExits wakes the worker of each container the runtime says
// exited. While the event stream is down, workers poll every second;
// when it breaks, every worker looks once, for the exits it missed.
func (a *Agent) followExits(ctx context.Context, ew runtime.ExitWatcher) {
	wait := time.Second
	for ctx.Err() == nil {
		ch, err := ew.WatchExits(ctx)
		if err == nil {
			a.exitsWatched.Store(true)
			wait = time.Second
			for id := range ch {
				a.pods.mu.Lock()
				h := a.pods.workers[a.pods.byContainer[id]]
				a.pods.mu.Unlock()
				if h != nil {
					h.poke()
				}
			}
			a.exitsWatched.Store(false)
			a.pokeAll()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}

// pokeAll makes every worker look at its containers now.
func (a *Agent) pokeAll() {
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	for _, h := range a.pods.workers {
		h.poke()
	}
}
