package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

// inputKind says what an inbox entry carries.
type inputKind uint8

const (
	inNode inputKind = iota
	inPod
	inService
	inBound
)

// input is one thing for the owner goroutine to apply between cycles: an
// informer event or the outcome of a Bind call.
type input struct {
	kind     inputKind
	typ      string
	obj, old api.Object
	batch    *bindBatch
}

// runner is the state of one Run. Everything but the inbox belongs to
// the owner goroutine (loop).
type runner struct {
	ctx     context.Context
	l       *Loop
	cluster *scheduler.Cluster
	scheds  map[string]*scheduler.Scheduler
	pods    map[podKey]*podEntry
	active  fifo
	timed   timedHeap
	counts  [numStates]int
	// moveParked asks for the parked pods to be tried again: something
	// changed that could make them fit.
	moveParked bool
	now        time.Time
	binds      *batcher
	writes     *writer

	inMu         sync.Mutex
	inbox, spare []input
}

func newRunner(ctx context.Context, l *Loop) *runner {
	r := &runner{
		ctx:     ctx,
		l:       l,
		cluster: scheduler.NewCluster(),
		pods:    map[podKey]*podEntry{},
	}
	r.binds = newBatcher(l, r.post)
	r.writes = newWriter(l)
	return r
}

// post hands an input to the owner goroutine; informer handlers and
// binders call it and never wait for the owner.
func (r *runner) post(in input) {
	r.inMu.Lock()
	r.inbox = append(r.inbox, in)
	r.inMu.Unlock()
	r.l.signal()
}

// loop is the owner goroutine: apply what arrived, then schedule one pod;
// when there is nothing to schedule, wait for an input or a due pod.
func (r *runner) loop() {
	l := r.l
	l.schedsChanged.Store(false)
	r.scheds = l.schedulers()
	l.log.Info("scheduler loop started", "nodes", r.cluster.NumNodes(), "schedulers", slices.Sorted(maps.Keys(r.scheds)))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for r.ctx.Err() == nil {
		r.now = l.now()
		r.drain()
		if l.schedsChanged.Swap(false) {
			r.swapSchedulers()
		}
		if r.moveParked {
			r.retryParked()
		}
		r.promote()
		if e := r.active.pop(); e != nil {
			r.scheduleOne(e)
			r.publish()
			continue
		}
		r.publish()
		var due <-chan time.Time
		if top := r.timed.peek(); top != nil {
			timer.Reset(max(top.due.Sub(r.now), time.Millisecond))
			due = timer.C
		}
		select {
		case <-r.ctx.Done():
		case <-l.wake:
		case <-due:
		}
	}
	l.log.Info("scheduler loop stopped", "pending", len(r.pods))
}

// drain applies the inbox.
func (r *runner) drain() {
	r.inMu.Lock()
	in := r.inbox
	r.inbox = r.spare[:0]
	r.inMu.Unlock()
	for i := range in {
		r.apply(&in[i])
		in[i] = input{}
	}
	r.spare = in[:0]
}

func (r *runner) apply(in *input) {
	switch in.kind {
	case inNode:
		r.onNode(in)
	case inPod:
		r.onPod(in)
	case inService:
		r.onService(in)
	case inBound:
		r.onBound(in.batch)
	}
}

// publish makes the counts visible to Stats and the metrics.
func (r *runner) publish() {
	r.l.pending.Store(int64(len(r.pods) - r.counts[stBound]))
	r.l.binding.Store(int64(r.counts[stBinding]))
	r.l.m.queues(r.counts[stActive], r.counts[stBackoff]+r.counts[stConflict], r.counts[stParked]+r.counts[stNoScheduler])
}

// setState moves e to s, keeping the counts.
func (r *runner) setState(e *podEntry, s state) {
	if e.state != stGone {
		r.counts[e.state]--
	}
	if s != stGone {
		r.counts[s]++
	}
	e.state = s
}

// toActive queues e for scheduling.
func (r *runner) toActive(e *podEntry) {
	r.timed.remove(e)
	r.setState(e, stActive)
	r.active.push(e)
}

// toTimed puts e in a timed state that ends at due.
func (r *runner) toTimed(e *podEntry, s state, due time.Time) {
	r.setState(e, s)
	e.due = due
	r.timed.set(e)
}

// enqueue queues e if its scheduler runs, else waits for one.
func (r *runner) enqueue(e *podEntry) {
	if r.scheds[e.pod.Spec.SchedulerName] == nil {
		r.waitForScheduler(e)
		return
	}
	r.toActive(e)
}

// remove stops tracking e.
func (r *runner) remove(e *podEntry) {
	r.timed.remove(e)
	r.setState(e, stGone)
	if r.pods[e.key] == e {
		delete(r.pods, e.key)
	}
	e.removed = true
	if e.wrote {
		r.writes.forget(e.key)
	}
}

// waitForScheduler parks a pod whose scheduler does not run; after the
// grace the pod is told so, once (SCH-12).
func (r *runner) waitForScheduler(e *podEntry) {
	if e.reported {
		r.timed.remove(e)
		r.setState(e, stNoScheduler)
		return
	}
	r.toTimed(e, stNoScheduler, e.added.Add(r.l.grace))
}

// promote moves the pods whose time came out of the timed heap.
func (r *runner) promote() {
	for top := r.timed.peek(); top != nil && !top.due.After(r.now); top = r.timed.peek() {
		r.timed.remove(top)
		if top.state == stNoScheduler && r.scheds[top.pod.Spec.SchedulerName] == nil {
			r.reportNoScheduler(top)
			continue
		}
		r.toActive(top)
	}
}

func (r *runner) reportNoScheduler(e *podEntry) {
	e.reported = true
	names := slices.Sorted(maps.Keys(r.scheds))
	running := strings.Join(names, ", ")
	if running == "" {
		running = "none"
	}
	msg := fmt.Sprintf("no scheduler named %q is running; running: %s", e.pod.Spec.SchedulerName, running)
	e.wrote = true
	r.writes.post(e.key, writeReq{uid: e.pod.UID, reason: ReasonSchedulerNotRunning, message: msg})
}

// retryParked queues the parked pods again, each after its backoff.
func (r *runner) retryParked() {
	r.moveParked = false
	changed := false
	for _, e := range r.timed.items {
		if e.state == stParked {
			r.setState(e, stBackoff)
			e.due = e.lastTry.Add(backoff(e.attempts))
			changed = true
		}
	}
	if changed {
		r.timed.reorder()
	}
}

// swapSchedulers takes the set SetSchedulers left.
func (r *runner) swapSchedulers() {
	r.scheds = r.l.schedulers()
	r.l.log.Info("schedulers changed", "schedulers", slices.Sorted(maps.Keys(r.scheds)))
	for _, e := range r.pods {
		if e.state == stNoScheduler && r.scheds[e.pod.Spec.SchedulerName] != nil {
			r.toActive(e)
		}
	}
	// A new policy may place what the old one could not.
	r.moveParked = true
}

// scheduleOne runs one cycle for e.
func (r *runner) scheduleOne(e *podEntry) {
	pod := e.pod
	name := pod.Spec.SchedulerName
	s := r.scheds[name]
	if s == nil {
		r.waitForScheduler(e)
		return
	}
	e.lastTry = r.now
	res, err := s.Schedule(r.ctx, r.cluster, pod)
	if err == nil {
		if err := r.cluster.Assume(pod, res.Node); err != nil {
			r.l.log.Debug("assumed pod counted without its affinity terms", "pod", e.key.namespace+"/"+e.key.name, "err", err)
		}
		r.setState(e, stBinding)
		r.l.m.attempt(name, resultScheduled)
		r.binds.add(controller.Binding{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, NodeName: res.Node, Scheduler: name}, e)
		return
	}
	if r.ctx.Err() != nil {
		// Leadership ended mid-cycle; the next leader starts afresh.
		r.toActive(e)
		return
	}
	msg := err.Error()
	switch {
	case errors.As(err, new(*scheduler.FitError)):
		r.l.unschedulable.Add(1)
		r.l.m.attempt(name, resultUnschedulable)
		r.l.log.Debug("pod fits no node", "pod", e.key.namespace+"/"+e.key.name, "reasons", msg)
	case errors.Is(err, scheduler.ErrInvalidPod):
		r.l.failed.Add(1)
		r.l.m.attempt(name, resultError)
		r.l.log.Debug("pod cannot be scheduled as written", "pod", e.key.namespace+"/"+e.key.name, "err", err)
	default:
		r.l.failed.Add(1)
		r.l.m.attempt(name, resultError)
		r.l.log.Warn("scheduling failed; retrying", "pod", e.key.namespace+"/"+e.key.name, "err", err)
		e.attempts++
		r.toTimed(e, stBackoff, r.now.Add(backoff(e.attempts)))
		return
	}
	// Trying again is useless until the cluster or the pod changes.
	e.attempts++
	r.toTimed(e, stParked, r.now.Add(unschedulableRecheck))
	e.wrote = true
	r.writes.post(e.key, writeReq{uid: pod.UID, reason: ReasonUnschedulable, message: msg, scheduler: name, event: true})
}

// onBound applies the outcome of one Bind call.
func (r *runner) onBound(b *bindBatch) {
	var firstErr error
	failed := 0
	for i, e := range b.entries {
		err := b.errs[i]
		if err == nil {
			r.l.scheduled.Add(1)
			r.l.m.e2e(r.now.Sub(e.added))
			if !e.removed && e.state == stBinding {
				r.setState(e, stBound)
			}
			continue
		}
		r.l.failed.Add(1)
		gone := api.IsNotFound(err) || api.IsConflict(err)
		if !gone {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
		if e.removed || e.state != stBinding {
			// The informer already showed the pod bound or deleted; the
			// cluster holds what the store holds.
			continue
		}
		r.cluster.Forget(e.pod)
		// The node it was assumed on has room again.
		r.moveParked = true
		if gone {
			// Deleted, or bound by someone else: the informer will tell.
			// The timer only guards against never hearing of it.
			r.toTimed(e, stConflict, r.now.Add(maxBackoff))
			continue
		}
		e.attempts++
		r.toTimed(e, stBackoff, r.now.Add(backoff(e.attempts)))
	}
	if failed > 0 {
		r.l.log.Warn("bindings failed; retrying", "count", failed, "err", firstErr)
	}
}

func (r *runner) onNode(in *input) {
	n, ok := in.obj.(*api.Node)
	if !ok {
		return
	}
	if in.typ == api.Deleted {
		r.cluster.RemoveNode(n.Name)
		return
	}
	r.cluster.SetNode(n)
	old, _ := in.old.(*api.Node)
	if old == nil || nodeFitChanged(old, n) {
		r.moveParked = true
	}
}

func (r *runner) onService(in *input) {
	s, ok := in.obj.(*api.Service)
	if !ok {
		return
	}
	if in.typ == api.Deleted {
		r.cluster.RemoveService(s.Namespace, s.Name)
	} else {
		r.cluster.SetService(s)
	}
	r.moveParked = true
}

func (r *runner) onPod(in *input) {
	pod, ok := in.obj.(*api.Pod)
	if !ok {
		return
	}
	old, _ := in.old.(*api.Pod)
	key := podKey{pod.Namespace, pod.Name}
	e := r.pods[key]
	if in.typ == api.Deleted {
		r.cluster.RemovePod(pod.Namespace, pod.Name)
		if counted(pod) || assumed(e) {
			r.moveParked = true
		}
		if e != nil {
			r.remove(e)
		}
		return
	}
	if old != nil && old.UID != pod.UID {
		// Deleted and created again between two lists: drop all of the
		// old one, including what was assumed for it.
		r.cluster.RemovePod(pod.Namespace, pod.Name)
		if counted(old) {
			r.moveParked = true
		}
		old = nil
	}
	if e != nil && e.pod.UID != pod.UID {
		if assumed(e) {
			r.cluster.RemovePod(pod.Namespace, pod.Name)
			r.moveParked = true
		}
		r.remove(e)
		e = nil
	}
	switch {
	case pod.DeletionTimestamp != nil || finished(pod):
		r.cluster.RemovePod(pod.Namespace, pod.Name)
		if old != nil && counted(old) || assumed(e) {
			r.moveParked = true
		}
		if e != nil {
			r.remove(e)
		}
	case pod.Spec.NodeName != "":
		// Bound: by us (this confirms the assumption, which SetPod
		// replaces) or by someone else.
		if old == nil || !sameForCluster(old, pod) {
			if err := r.cluster.SetPod(pod); err != nil {
				r.l.log.Warn("placed pod counted without its affinity terms", "pod", key.namespace+"/"+key.name, "err", err)
			}
		} else {
			r.cluster.RefreshPod(pod)
		}
		if e != nil {
			r.remove(e)
		}
	default:
		r.onPending(e, pod)
	}
}

// onPending tracks an unbound pod.
func (r *runner) onPending(e *podEntry, pod *api.Pod) {
	if e == nil {
		e = &podEntry{key: podKey{pod.Namespace, pod.Name}, pod: pod, added: r.now, hidx: -1}
		r.pods[e.key] = e
		r.enqueue(e)
		return
	}
	prev := e.pod
	e.pod = pod
	switch e.state {
	case stBinding, stBound, stConflict:
		// Our own status writes and stale versions arrive here; the
		// binding's outcome decides.
		return
	}
	if prev.Generation == pod.Generation && prev.Spec.SchedulerName == pod.Spec.SchedulerName && maps.Equal(prev.Labels, pod.Labels) {
		return // a status change (ours, mostly) changes no decision
	}
	if prev.Spec.SchedulerName != pod.Spec.SchedulerName {
		e.reported = false
	}
	r.enqueue(e)
}

// assumed reports whether the cluster counts e's pod on the node the
// loop chose, the store not having shown the binding yet.
func assumed(e *podEntry) bool {
	return e != nil && (e.state == stBinding || e.state == stBound)
}

// counted reports whether the cluster counts pod on its node.
func counted(p *api.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !finished(p)
}

// finished reports whether p ran to its end.
func finished(p *api.Pod) bool {
	return api.IsPodPhaseTerminal(p.Status.Phase)
}

// sameForCluster reports whether replacing old by p would change nothing
// the scheduler reads: the agent's status reports of running pods.
func sameForCluster(old, p *api.Pod) bool {
	return old.UID == p.UID && old.Spec.NodeName == p.Spec.NodeName && old.Generation == p.Generation &&
		counted(old) && maps.Equal(old.Labels, p.Labels)
}

// nodeFitChanged reports whether a node changed in what decides if a
// pod fits it: labels, taints, allocatable, unschedulable, conditions.
// A heartbeat changes none of these.
func nodeFitChanged(a, b *api.Node) bool {
	if a.Spec.Unschedulable != b.Spec.Unschedulable || !maps.Equal(a.Labels, b.Labels) {
		return true
	}
	if !slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, func(x, y api.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
	}) {
		return true
	}
	if !sameResources(a.Status.Allocatable, b.Status.Allocatable) || !sameResources(a.Status.Capacity, b.Status.Capacity) {
		return true
	}
	return !slices.EqualFunc(a.Status.Conditions, b.Status.Conditions, func(x, y api.NodeCondition) bool {
		return x.Type == y.Type && x.Status == y.Status
	})
}

func sameResources(a, b api.ResourceList) bool {
	return maps.EqualFunc(a, b, func(x, y api.Quantity) bool { return x.MilliValue() == y.MilliValue() })
}
