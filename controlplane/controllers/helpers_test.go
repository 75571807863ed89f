package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
)

const waitTimeout = 15 * time.Second

var (
	podsRes        = api.ResourceForKind("Pod")
	rsRes          = api.ResourceForKind("ReplicaSet")
	deploymentsRes = api.ResourceForKind("Deployment")
	daemonSetsRes  = api.ResourceForKind("DaemonSet")
	nodesRes       = api.ResourceForKind("Node")
	eventsRes      = api.ResourceForKind("Event")
)

// fakeClock is a settable clock for availability and deadlines.
type fakeClock struct{ off atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// env runs the controllers against a store-backed fake client.
type env struct {
	t     *testing.T
	f     *controllertest.Fake
	clock *fakeClock

	// holdTerminating stops the nodes finishing graceful deletes; a pod
	// deleted then stays Terminating until the test says otherwise.
	holdTerminating atomic.Bool

	mu     sync.Mutex
	syncs  map[string]int // "controller/key" → reconciles done
	notify chan struct{}  // poked on every store change and reconcile
	// delivered is the last resourceVersion of each "Kind/name" the
	// controllers' informers delivered.
	delivered map[string]uint64

	stop func()

	// fakeTimers, set before start, makes the controllers' looks again
	// of fakeTimerMin or more wait for advance rather than real time.
	fakeTimers bool
	timersMu   sync.Mutex
	timers     []fakeTimer
}

// fakeTimer is a controller's look again, due by the test clock.
type fakeTimer struct {
	due  time.Time
	fire func()
}

// fakeTimerMin: shorter looks again (cache lag, availability checks)
// keep real time, so tests that do not advance the clock still end.
const fakeTimerMin = 10 * time.Second

// advance moves the test clock and fires the controllers' looks again
// that are due by it (with fakeTimers).
func (e *env) advance(d time.Duration) {
	e.clock.Advance(d)
	now := e.clock.Now()
	e.timersMu.Lock()
	var due []fakeTimer
	kept := e.timers[:0]
	for _, t := range e.timers {
		if !t.due.After(now) {
			due = append(due, t)
		} else {
			kept = append(kept, t)
		}
	}
	e.timers = kept
	e.timersMu.Unlock()
	for _, t := range due {
		t.fire()
	}
}

// takeTimer is hooks.after under fakeTimers.
func (e *env) takeTimer(d time.Duration, fire func()) bool {
	if !e.fakeTimers || d < fakeTimerMin {
		return false
	}
	e.timersMu.Lock()
	defer e.timersMu.Unlock()
	e.timers = append(e.timers, fakeTimer{due: e.clock.Now().Add(d), fire: fire})
	return true
}

// pendingTimers is how many looks again wait for advance.
func (e *env) pendingTimers() int {
	e.timersMu.Lock()
	defer e.timersMu.Unlock()
	return len(e.timers)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, f: controllertest.New(), clock: &fakeClock{}, syncs: map[string]int{}, notify: make(chan struct{}, 1), delivered: map[string]uint64{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range []*api.Resource{podsRes, rsRes, deploymentsRes, daemonSetsRes, nodesRes} {
		ch, err := e.f.Watch(ctx, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for ev := range ch {
				if p, ok := ev.Object.(*api.Pod); ok && ev.Type != api.Deleted && p.DeletionTimestamp != nil && !e.holdTerminating.Load() {
					e.finishDelete(p)
				}
				e.poke()
			}
		})
	}
	t.Cleanup(func() {
		e.stopControllers()
		cancel()
		wg.Wait()
	})
	return e
}

// finishDelete does what p's node would: p stopped, it deletes p.
func (e *env) finishDelete(p *api.Pod) {
	zero := int64(0)
	err := e.f.Delete(context.Background(), podsRes, p.Namespace, p.Name,
		api.DeleteOptions{Preconditions: api.Preconditions{UID: p.UID}, GracePeriodSeconds: &zero})
	if err != nil && !api.IsNotFound(err) && !api.IsConflict(err) {
		e.t.Errorf("finish the delete of pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// releaseTerminating lets the nodes finish every graceful delete, those
// held so far included.
func (e *env) releaseTerminating() {
	e.holdTerminating.Store(false)
	objs, _, err := e.f.List(podsRes)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range objs {
		if p := o.(*api.Pod); p.DeletionTimestamp != nil {
			e.finishDelete(p)
		}
	}
}

func (e *env) poke() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// start runs the controllers on client (the fake itself when nil).
func (e *env) start(client controller.Client) {
	e.t.Helper()
	if client == nil {
		client = e.f
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	go func() {
		done <- run(ctx, Config{Client: client, Logger: log, Now: e.clock.Now}, hooks{delivered: e.noteDelivered, after: e.takeTimer, synced: func(ctrl, key string) {
			e.mu.Lock()
			e.syncs[ctrl+"/"+key]++
			e.mu.Unlock()
			e.poke()
		}})
	}()
	e.stop = func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}
}

func (e *env) stopControllers() {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// syncCount is how many reconciles of key controller ctrl finished.
func (e *env) syncCount(ctrl, key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.syncs[ctrl+"/"+key]
}

// waitFor waits until cond holds, re-checking on every store change and
// reconcile (and at least every 50ms, for conditions on time); it fails
// the test with cond's last explanation at the deadline.
func (e *env) waitFor(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			e.t.Fatalf("timed out waiting for %s: %s", what, why)
		case <-e.notify:
		case <-tick.C:
		}
	}
}

// noteDelivered is the controllers' delivered hook.
func (e *env) noteDelivered(kind, name, rv string) {
	n, _ := strconv.ParseUint(rv, 10, 64)
	e.mu.Lock()
	if n > e.delivered[kind+"/"+name] {
		e.delivered[kind+"/"+name] = n
	}
	e.mu.Unlock()
	e.poke()
}

// waitDelivered waits until the controllers have heard of obj as it is
// (its resourceVersion) or later.
func (e *env) waitDelivered(obj api.Object) {
	e.t.Helper()
	r := api.ResourceOf(obj)
	m := obj.GetObjectMeta()
	want, _ := strconv.ParseUint(m.ResourceVersion, 10, 64)
	e.waitFor(fmt.Sprintf("the controllers to see %s %s at %d", r.Kind, m.Name, want), func() (bool, string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		got := e.delivered[r.Kind+"/"+m.Name]
		return got >= want, fmt.Sprint("seen ", got)
	})
}

// waitSynced waits until ctrl reconciled key more than n times.
func (e *env) waitSynced(ctrl, key string, n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%s to reconcile %s", ctrl, key), func() (bool, string) {
		c := e.syncCount(ctrl, key)
		return c > n, fmt.Sprintf("%d reconciles", c)
	})
}

func (e *env) create(obj api.Object) api.Object {
	e.t.Helper()
	out, err := e.f.Create(context.Background(), obj)
	if err != nil {
		e.t.Fatalf("create %T: %v", obj, err)
	}
	return out
}

func (e *env) get(r *api.Resource, ns, name string) api.Object {
	e.t.Helper()
	obj, err := e.f.Get(r, ns, name)
	if err != nil {
		e.t.Fatalf("get %s %s: %v", r.Kind, name, err)
	}
	return obj
}

// update changes a fresh copy of an object with fn and writes it,
// retrying on conflicts with the controllers.
func (e *env) update(r *api.Resource, ns, name string, status bool, fn func(api.Object)) api.Object {
	e.t.Helper()
	for range 100 {
		cur, err := controller.Copy(e.get(r, ns, name))
		if err != nil {
			e.t.Fatal(err)
		}
		fn(cur)
		var out api.Object
		if status {
			out, err = e.f.UpdateStatus(context.Background(), cur)
		} else {
			out, err = e.f.Update(context.Background(), cur)
		}
		if err == nil {
			return out
		}
		if !api.IsConflict(err) {
			e.t.Fatalf("update %s %s: %v", r.Kind, name, err)
		}
	}
	e.t.Fatalf("update %s %s: conflicts without end", r.Kind, name)
	return nil
}

func (e *env) delete(r *api.Resource, ns, name string) {
	e.t.Helper()
	if err := e.f.Delete(context.Background(), r, ns, name, api.DeleteOptions{}); err != nil {
		e.t.Fatalf("delete %s %s: %v", r.Kind, name, err)
	}
}

func (e *env) list(r *api.Resource) []api.Object {
	e.t.Helper()
	objs, _, err := e.f.List(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return objs
}

// pods returns the pods whose labels hold every pair of labels.
func (e *env) pods(labels map[string]string) []*api.Pod {
	var out []*api.Pod
	for _, obj := range e.list(podsRes) {
		if p := obj.(*api.Pod); hasLabels(p.Labels, labels) {
			out = append(out, p)
		}
	}
	return out
}

// podsOf returns the pods controlled by uid.
func (e *env) podsOf(uid string) []*api.Pod {
	var out []*api.Pod
	for _, obj := range e.list(podsRes) {
		if isControlledBy(obj, uid) {
			out = append(out, obj.(*api.Pod))
		}
	}
	return out
}

// replicaSetsOf returns the replica sets controlled by uid, by name.
func (e *env) replicaSetsOf(uid string) []*api.ReplicaSet {
	var out []*api.ReplicaSet
	for _, obj := range e.list(rsRes) {
		if isControlledBy(obj, uid) {
			out = append(out, obj.(*api.ReplicaSet))
		}
	}
	slices.SortFunc(out, func(a, b *api.ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// events returns the events about the object named name with reason.
func (e *env) events(name, reason string) []*api.Event {
	var out []*api.Event
	for _, obj := range e.list(eventsRes) {
		if ev := obj.(*api.Event); ev.InvolvedObject.Name == name && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// markReady makes a pod Running and Ready, as an agent would.
func (e *env) markReady(p *api.Pod) {
	e.t.Helper()
	e.setPhase(p, api.PodRunning, "", true)
}

// setPhase sets a pod's phase, reason and Ready condition (true an hour
// ago by the test clock, so minReadySeconds has passed).
func (e *env) setPhase(p *api.Pod, phase, reason string, ready bool) {
	e.t.Helper()
	e.setStatus(p, phase, reason, ready, e.clock.Now().Add(-time.Hour))
}

func (e *env) setStatus(p *api.Pod, phase, reason string, ready bool, since time.Time) {
	e.t.Helper()
	status := api.ConditionFalse
	if ready {
		status = api.ConditionTrue
	}
	for range 100 {
		cur, err := e.f.Get(podsRes, p.Namespace, p.Name)
		if api.IsNotFound(err) {
			return
		}
		if err != nil {
			e.t.Fatal(err)
		}
		obj, err := controller.Copy(cur)
		if err != nil {
			e.t.Fatal(err)
		}
		cp := obj.(*api.Pod)
		cp.Status.Phase, cp.Status.Reason = phase, reason
		cp.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: status, LastTransitionTime: api.NewTime(since)}}
		_, err = e.f.UpdateStatus(context.Background(), cp)
		if err == nil || api.IsNotFound(err) {
			return
		}
		if !api.IsConflict(err) {
			e.t.Fatalf("status of pod %s: %v", p.Name, err)
		}
	}
	e.t.Fatalf("status of pod %s: conflicts without end", p.Name)
}

func int32p(v int32) *int32 { return &v }

func intstr(v string) *api.IntOrString {
	if strings.HasSuffix(v, "%") {
		x := api.FromString(v)
		return &x
	}
	var n int32
	fmt.Sscan(v, &n)
	x := api.FromInt(n)
	return &x
}

func template(labels map[string]string, image string) api.PodTemplateSpec {
	return api.PodTemplateSpec{
		ObjectMeta: api.ObjectMeta{Labels: labels},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "app", Image: image}}},
	}
}

func newReplicaSet(name string, replicas int32, labels map[string]string) *api.ReplicaSet {
	return &api.ReplicaSet{
		ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name},
		Spec: api.ReplicaSetSpec{
			Replicas: int32p(replicas),
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: template(labels, "nginx:1.25"),
		},
	}
}

func newNode(name string, labels map[string]string) *api.Node {
	return &api.Node{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: labels},
		Status: api.NodeStatus{
			Capacity: api.ResourceList{
				"cpu":    api.MustParseQuantity("4"),
				"memory": api.MustParseQuantity("8Gi"),
				"pods":   api.MustParseQuantity("110"),
			},
			Conditions: []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}},
		},
	}
}

// names returns the names of pods, sorted.
func names(pods []*api.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	slices.Sort(out)
	return out
}

// active returns the pods that are neither finished nor being deleted.
func active(pods []*api.Pod) []*api.Pod {
	var out []*api.Pod
	for _, p := range pods {
		if podActive(p) {
			out = append(out, p)
		}
	}
	return out
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
