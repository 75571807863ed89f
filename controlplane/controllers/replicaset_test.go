package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
)

var webLabels = map[string]string{"app": "web"}

// waitActive waits until the replica set controls exactly n active pods
// and returns them.
func (e *env) waitActive(uid string, n int) []*api.Pod {
	e.t.Helper()
	var pods []*api.Pod
	e.waitFor(fmt.Sprintf("%d active pods", n), func() (bool, string) {
		pods = active(e.podsOf(uid))
		return len(pods) == n && len(e.podsOf(uid)) == n, fmt.Sprintf("pods %v", names(e.podsOf(uid)))
	})
	return pods
}

func TestReplicaSetCreatesAndReplacesPods(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	rs := e.create(newReplicaSet("web", 3, webLabels)).(*api.ReplicaSet)
	pods := e.waitActive(rs.UID, 3)
	for _, p := range pods {
		ref := api.ControllerRef(&p.ObjectMeta)
		if ref.Kind != "ReplicaSet" || ref.Name != "web" || ref.APIVersion != "apps/v1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: controller reference %+v", p.Name, ref)
		}
		if !strings.HasPrefix(p.Name, "web-") || p.GenerateName != "web-" || p.Labels["app"] != "web" {
			t.Errorf("pod %s: generateName %q labels %v", p.Name, p.GenerateName, p.Labels)
		}
	}
	e.waitFor("a SuccessfulCreate event", func() (bool, string) { return len(e.events("web", reasonSuccessfulCreate)) > 0, "none" })
	if evs := e.events("web", reasonSuccessfulCreate); len(evs) != 1 || !strings.HasPrefix(evs[0].Message, "Created 3 pods: ") {
		t.Errorf("want one SuccessfulCreate event for the batch, got %d: %v", len(evs), evs)
	}

	// A deleted pod, an evicted one and one that finished are replaced;
	// the finished ones are deleted.
	e.delete(podsRes, "default", pods[0].Name)
	e.setPhase(pods[1], api.PodFailed, "Evicted", false)
	e.setPhase(pods[2], api.PodSucceeded, "", false)
	e.waitFor("three new pods", func() (bool, string) {
		cur := e.podsOf(rs.UID)
		for _, p := range cur {
			for _, old := range pods {
				if p.UID == old.UID {
					return false, "old pod " + p.Name + " still there"
				}
			}
		}
		return len(cur) == 3, fmt.Sprintf("pods %v", names(cur))
	})

	for _, p := range e.podsOf(rs.UID) {
		e.markReady(p)
	}
	e.waitFor("status", func() (bool, string) {
		cur := e.get(rsRes, "default", "web").(*api.ReplicaSet)
		want := api.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: cur.Generation}
		return cur.Status == want, fmt.Sprintf("%+v", cur.Status)
	})
}

func TestReplicaSetMinReadySeconds(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	rs := newReplicaSet("web", 1, webLabels)
	rs.Spec.MinReadySeconds = 30
	uid := e.create(rs).GetObjectMeta().UID
	p := e.waitActive(uid, 1)[0]
	// Ready just now: not available for 30 seconds.
	e.setStatus(p, api.PodRunning, "", true, e.clock.Now())
	e.waitFor("ready, not available", func() (bool, string) {
		st := e.get(rsRes, "default", "web").(*api.ReplicaSet).Status
		return st.ReadyReplicas == 1 && st.AvailableReplicas == 0, fmt.Sprintf("%+v", st)
	})
	e.clock.Advance(31e9)
	e.update(rsRes, "default", "web", false, func(o api.Object) { o.GetObjectMeta().Annotations = map[string]string{"poke": "1"} })
	e.waitFor("available", func() (bool, string) {
		st := e.get(rsRes, "default", "web").(*api.ReplicaSet).Status
		return st.AvailableReplicas == 1, fmt.Sprintf("%+v", st)
	})
}

func TestReplicaSetScaleDownDeletesNotReadyFirst(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	rs := e.create(newReplicaSet("web", 4, webLabels)).(*api.ReplicaSet)
	pods := e.waitActive(rs.UID, 4)
	ready := map[string]bool{pods[0].Name: true, pods[2].Name: true}
	for _, p := range pods {
		if ready[p.Name] {
			e.markReady(p)
		}
	}
	e.waitFor("2 ready", func() (bool, string) {
		st := e.get(rsRes, "default", "web").(*api.ReplicaSet).Status
		return st.ReadyReplicas == 2, fmt.Sprintf("%+v", st)
	})
	e.update(rsRes, "default", "web", false, func(o api.Object) { o.(*api.ReplicaSet).Spec.Replicas = int32p(2) })
	left := e.waitActive(rs.UID, 2)
	for _, p := range left {
		if !ready[p.Name] {
			t.Errorf("scale-down kept not-ready pod %s and deleted a ready one", p.Name)
		}
	}
	e.waitFor("a SuccessfulDelete event", func() (bool, string) { return len(e.events("web", reasonSuccessfulDelete)) > 0, "none" })
	if evs := e.events("web", reasonSuccessfulDelete); len(evs) != 1 || !strings.HasPrefix(evs[0].Message, "Deleted 2 pods: ") {
		t.Errorf("want one SuccessfulDelete event for the batch, got %v", evs)
	}
}

func TestReplicaSetAdoptsOrphansAndReleasesMismatches(t *testing.T) {
	e := newEnv(t)
	orphan := e.create(&api.Pod{
		ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "orphan", Labels: map[string]string{"app": "web"}},
		Spec:       api.PodSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.25"}}},
	}).(*api.Pod)
	e.start(nil)
	rs := e.create(newReplicaSet("web", 2, webLabels)).(*api.ReplicaSet)
	pods := e.waitActive(rs.UID, 2)
	if !slicesContains(names(pods), "orphan") {
		t.Fatalf("the matching orphan was not adopted: %v", names(pods))
	}
	if got := e.f.Writes("create pods"); got != 2 { // the orphan, and one pod
		t.Errorf("pods created = %d, want 2 (the orphan and one more)", got)
	}
	// A pod whose labels stop matching is released and replaced.
	e.update(podsRes, "default", orphan.Name, false, func(o api.Object) { o.GetObjectMeta().Labels = map[string]string{"app": "debug"} })
	e.waitFor("released and replaced", func() (bool, string) {
		p := e.get(podsRes, "default", "orphan")
		cur := e.podsOf(rs.UID)
		return len(p.GetObjectMeta().OwnerReferences) == 0 && len(cur) == 2 && !slicesContains(names(cur), "orphan"),
			fmt.Sprintf("orphan refs %v, pods %v", p.GetObjectMeta().OwnerReferences, names(cur))
	})
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// laggyClient holds back the pod watch while held, so that the
// controllers' cache lags their own writes, as it may on a busy leader.
type laggyClient struct {
	*controllertest.Fake
	mu   sync.Mutex
	open chan struct{} // closed while the watch flows
}

func newLaggyClient(f *controllertest.Fake) *laggyClient {
	l := &laggyClient{Fake: f, open: make(chan struct{})}
	close(l.open)
	return l
}

func (l *laggyClient) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = make(chan struct{})
}

func (l *laggyClient) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.open)
}

func (l *laggyClient) gate() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *laggyClient) Watch(ctx context.Context, r *api.Resource, fromRV uint64) (<-chan api.WatchEvent, error) {
	in, err := l.Fake.Watch(ctx, r, fromRV)
	if err != nil || r.Plural != "pods" {
		return in, err
	}
	out := make(chan api.WatchEvent)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case <-l.gate():
			case <-ctx.Done():
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

var _ controller.Client = (*laggyClient)(nil)

func TestReplicaSetNeverOvershootsWhenCacheLags(t *testing.T) {
	e := newEnv(t)
	lc := newLaggyClient(e.f)
	e.start(lc)
	// Wait for the controllers to be at work before holding the watch
	// back.
	e.create(newReplicaSet("warm", 0, map[string]string{"app": "warm"}))
	e.waitSynced("replicaset", "default/warm", 0)
	lc.hold()
	rs := e.create(newReplicaSet("web", 5, webLabels)).(*api.ReplicaSet)
	e.waitFor("5 pods in the store", func() (bool, string) {
		n := len(e.podsOf(rs.UID))
		return n == 5, fmt.Sprintf("%d pods", n)
	})
	// Each change of the replica set makes the controller look again
	// while its cache still shows no pods.
	for i := range 3 {
		n := e.syncCount("replicaset", "default/web")
		e.update(rsRes, "default", "web", false, func(o api.Object) {
			o.GetObjectMeta().Annotations = map[string]string{"poke": fmt.Sprint(i)}
		})
		e.waitSynced("replicaset", "default/web", n)
		if got := len(e.podsOf(rs.UID)); got != 5 {
			t.Fatalf("%d pods while the cache lagged, want 5", got)
		}
	}
	lc.release()
	e.waitFor("status with 5 replicas", func() (bool, string) {
		st := e.get(rsRes, "default", "web").(*api.ReplicaSet).Status
		return st.Replicas == 5, fmt.Sprintf("%+v", st)
	})
	if got := e.f.Writes("create pods"); got != 5 {
		t.Errorf("created %d pods, want 5", got)
	}
	if got := e.f.Writes("delete pods"); got != 0 {
		t.Errorf("deleted %d pods, want 0", got)
	}
}

func TestReplicaSetRestartDoesNotOvershoot(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	rs := e.create(newReplicaSet("web", 3, webLabels)).(*api.ReplicaSet)
	e.waitActive(rs.UID, 3)
	e.stopControllers()
	e.start(nil) // a new leader term: fresh caches, no memory
	n := e.syncCount("replicaset", "default/web")
	e.update(rsRes, "default", "web", false, func(o api.Object) { o.GetObjectMeta().Annotations = map[string]string{"poke": "1"} })
	e.waitSynced("replicaset", "default/web", n)
	if got := len(e.podsOf(rs.UID)); got != 3 || e.f.Writes("create pods") != 3 {
		t.Errorf("after restart: %d pods, %d created; want 3 and 3", got, e.f.Writes("create pods"))
	}
}

func TestReplicaSetSlowStartStopsOnFailure(t *testing.T) {
	e := newEnv(t)
	fc := &failingCreates{Fake: e.f}
	e.start(fc)
	rs := e.create(newReplicaSet("web", 20, webLabels)).(*api.ReplicaSet)
	e.waitSynced("replicaset", "default/web", 0)
	if len(e.events("web", reasonFailedCreate)) != 1 {
		t.Errorf("want a FailedCreate event")
	}
	// Each reconcile tried a first batch of one, which failed: no more
	// were tried (one reconcile may be under way).
	got := fc.attempts()
	if syncs := e.syncCount("replicaset", "default/web"); got > syncs+1 {
		t.Errorf("%d pod creates tried in %d reconciles, want one per reconcile", got, syncs)
	}
	if got := len(e.podsOf(rs.UID)); got != 0 {
		t.Errorf("%d pods, want 0", got)
	}
}

// failingCreates refuses every pod create.
type failingCreates struct {
	*controllertest.Fake
	mu sync.Mutex
	n  int
}

func (f *failingCreates) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	if _, ok := obj.(*api.Pod); ok {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		return nil, api.NewForbidden("pods are refused here")
	}
	return f.Fake.Create(ctx, obj)
}

func (f *failingCreates) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func TestPodsToDeleteOrder(t *testing.T) {
	mk := func(name, node, phase string, ready bool, restarts int32, created int64) *api.Pod {
		p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, CreationTimestamp: &api.Time{Time: timeAt(created)}}}
		p.Spec.NodeName = node
		p.Status.Phase = phase
		st := api.ConditionFalse
		if ready {
			st = api.ConditionTrue
		}
		p.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: st, LastTransitionTime: &api.Time{Time: timeAt(created + 10)}}}
		p.Status.ContainerStatuses = []api.ContainerStatus{{Name: "app", RestartCount: restarts}}
		return p
	}
	pods := []*api.Pod{
		mk("running-ready-old", "n1", api.PodRunning, true, 0, 1),
		mk("running-ready-new", "n2", api.PodRunning, true, 0, 5),
		mk("running-notready", "n3", api.PodRunning, false, 0, 1),
		mk("pending", "n4", api.PodPending, false, 0, 1),
		mk("unbound", "", api.PodPending, false, 0, 1),
		mk("crashy", "n5", api.PodRunning, false, 7, 1),
	}
	order := podsToDelete(pods, len(pods))
	want := []string{"unbound", "pending", "crashy", "running-notready", "running-ready-new", "running-ready-old"}
	for i, p := range order {
		if p.Name != want[i] {
			t.Fatalf("deletion order %v, want %v", podNames(order), want)
		}
	}
}

func timeAt(s int64) time.Time { return time.Unix(1_700_000_000+s, 0).UTC() }

func podNames(pods []*api.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// bindTo binds pods to node, as the scheduler would.
func (e *env) bindTo(node string, pods ...*api.Pod) {
	e.t.Helper()
	bs := make([]controller.Binding, len(pods))
	for i, p := range pods {
		bs[i] = controller.Binding{Namespace: p.Namespace, Name: p.Name, UID: p.UID, NodeName: node}
	}
	for i, err := range e.f.Bind(context.Background(), bs) {
		if err != nil {
			e.t.Fatalf("bind %s: %v", pods[i].Name, err)
		}
	}
}

// A pod deleted while its node runs it stays, Terminating, until the node
// has stopped it; the replica set does not replace it before, so that the
// pod and its replacement never run at once (issue 10 item 1).
func TestReplicaSetReplacesTerminatingPodOnlyOnceGone(t *testing.T) {
	e := newEnv(t)
	e.holdTerminating.Store(true)
	e.create(newNode("n1", nil)) // pods of a node that is gone are removed
	e.start(nil)
	rs := e.create(newReplicaSet("web", 2, webLabels)).(*api.ReplicaSet)
	pods := e.waitActive(rs.UID, 2)
	e.bindTo("n1", pods...)

	e.delete(podsRes, "default", pods[0].Name)
	p := e.get(podsRes, "default", pods[0].Name).(*api.Pod)
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != api.DefaultTerminationGracePeriodSeconds {
		t.Fatalf("deleted bound pod: deletionTimestamp %v, grace %v; want it terminating with the default 30 s", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	// The status says one replica once the controller has seen the
	// delete; it decided what to create in the same reconcile.
	e.waitFor("status with 1 replica", func() (bool, string) {
		cur := e.get(rsRes, "default", "web").(*api.ReplicaSet)
		return cur.Status.Replicas == 1, fmt.Sprintf("%+v", cur.Status)
	})
	if got := e.podsOf(rs.UID); len(got) != 2 {
		t.Fatalf("replica set replaced a pod that still terminates: pods %v", names(got))
	}

	// Scaling up while one terminates creates only what is missing with
	// the terminating pod counted.
	e.update(rsRes, "default", "web", false, func(o api.Object) { *o.(*api.ReplicaSet).Spec.Replicas = 3 })
	e.waitFor("a third pod", func() (bool, string) {
		return len(e.podsOf(rs.UID)) == 3, fmt.Sprintf("pods %v", names(e.podsOf(rs.UID)))
	})
	e.waitFor("status with 2 replicas", func() (bool, string) {
		cur := e.get(rsRes, "default", "web").(*api.ReplicaSet)
		return cur.Status.Replicas == 2 && cur.Status.ObservedGeneration == cur.Generation, fmt.Sprintf("%+v", cur.Status)
	})
	if got := e.podsOf(rs.UID); len(got) != 3 {
		t.Fatalf("after scaling to 3 with one pod terminating: pods %v, want 3 in all", names(got))
	}

	// The node stops it and deletes it: now it is replaced.
	e.releaseTerminating()
	e.waitFor("three active pods, the deleted one gone", func() (bool, string) {
		cur := e.podsOf(rs.UID)
		for _, q := range cur {
			if q.UID == pods[0].UID {
				return false, "deleted pod still there"
			}
		}
		return len(active(cur)) == 3 && len(cur) == 3, fmt.Sprintf("pods %v", names(cur))
	})
}
