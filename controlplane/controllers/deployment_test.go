package controllers

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

func newDeployment(name string, replicas int32, surge, unavailable string) *api.Deployment {
	labels := map[string]string{"app": name}
	d := &api.Deployment{
		ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name},
		Spec: api.DeploymentSpec{
			Replicas: int32p(replicas),
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: template(labels, "nginx:1.25"),
		},
	}
	if surge != "" {
		d.Spec.Strategy = api.DeploymentStrategy{Type: api.RollingUpdateDeploymentStrategyType, RollingUpdate: &api.RollingUpdateDeployment{
			MaxSurge: intstr(surge), MaxUnavailable: intstr(unavailable),
		}}
	}
	return d
}

// rolledOut reports whether a deployment is where `rollout status` stops
// waiting: the latest generation observed, every replica updated and
// available, no old ones left.
func rolledOut(d *api.Deployment) (bool, string) {
	st, n := d.Status, replicasOf(d.Spec.Replicas)
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == n && st.Replicas == n && st.AvailableReplicas == n,
		fmt.Sprintf("generation %d, status %+v", d.Generation, st)
}

// rollOut plays the agent until the deployment is rolled out: each time
// something changes it marks one more pod of the deployment ready.
func (e *env) rollOut(name string) *api.Deployment {
	e.t.Helper()
	var d *api.Deployment
	e.waitFor("rollout of "+name, func() (bool, string) {
		d = e.get(deploymentsRes, "default", name).(*api.Deployment)
		if ok, why := rolledOut(d); ok {
			return true, why
		} else {
			for _, p := range e.pods(d.Spec.Selector.MatchLabels) {
				if podActive(p) && !podReady(p) {
					e.markReady(p)
					break
				}
			}
			return false, why
		}
	})
	return d
}

func setImage(image string) func(api.Object) {
	return func(o api.Object) { o.(*api.Deployment).Spec.Template.Spec.Containers[0].Image = image }
}

// invariants follows a deployment's replica sets and pods event by event
// (a store watch, so no state is skipped) and records the largest sum of
// replica set sizes and the fewest ready pods it saw.
type invariants struct {
	mu       sync.Mutex
	sizes    map[string]int32
	ready    map[string]bool
	hashes   map[string]string // pod → pod-template-hash, pods that exist
	maxSize  int32
	minReady int
	maxKinds int // most distinct template hashes among existing pods
	// loading is set while the initial list is applied: its partial
	// states are not states the cluster was in.
	loading bool
}

func (e *env) watchInvariants(d *api.Deployment) *invariants {
	e.t.Helper()
	inv := &invariants{sizes: map[string]int32{}, ready: map[string]bool{}, hashes: map[string]string{}, minReady: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	for _, r := range []*api.Resource{rsRes, podsRes} {
		objs, rv, err := e.f.List(r)
		if err != nil {
			e.t.Fatal(err)
		}
		inv.mu.Lock()
		inv.loading = true
		inv.mu.Unlock()
		for _, obj := range objs {
			inv.apply(d, api.Added, obj)
		}
		inv.mu.Lock()
		inv.loading = false
		inv.mu.Unlock()
		ch, err := e.f.Watch(ctx, r, rv)
		if err != nil {
			e.t.Fatal(err)
		}
		wg.Go(func() {
			for ev := range ch {
				inv.apply(d, ev.Type, ev.Object)
			}
		})
	}
	return inv
}

func (inv *invariants) apply(d *api.Deployment, typ string, obj api.Object) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	switch o := obj.(type) {
	case *api.ReplicaSet:
		if !isControlledBy(o, d.UID) {
			return
		}
		if typ == api.Deleted {
			delete(inv.sizes, o.Name)
		} else {
			inv.sizes[o.Name] = replicasOf(o.Spec.Replicas)
		}
		if inv.loading {
			return
		}
		var sum int32
		for _, n := range inv.sizes {
			sum += n
		}
		inv.maxSize = max(inv.maxSize, sum)
		return
	case *api.Pod:
		if !hasLabels(o.Labels, d.Spec.Selector.MatchLabels) {
			return
		}
		if typ == api.Deleted {
			delete(inv.ready, o.Name)
			delete(inv.hashes, o.Name)
		} else {
			inv.ready[o.Name] = podActive(o) && podReady(o)
			inv.hashes[o.Name] = o.Labels[labelPodTemplateHash]
		}
		if inv.loading {
			return
		}
		n := 0
		for _, r := range inv.ready {
			if r {
				n++
			}
		}
		inv.minReady = min(inv.minReady, n)
		kinds := map[string]bool{}
		for _, h := range inv.hashes {
			kinds[h] = true
		}
		inv.maxKinds = max(inv.maxKinds, len(kinds))
	}
}

func (inv *invariants) get() (maxSize int32, minReady, maxKinds int) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.maxSize, inv.minReady, inv.maxKinds
}

func TestDeploymentRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		replicas           int32
		surge, unavailable string
		maxSurge, maxUnav  int32 // as resolved: surge rounded up, unavailable down
	}{
		{4, "1", "1", 1, 1},
		{5, "30%", "30%", 2, 1},
		{3, "0", "1", 0, 1},
		{4, "25%", "25%", 1, 1},
		{10, "3", "20%", 3, 2},
	} {
		t.Run(fmt.Sprintf("%d-%s-%s", tc.replicas, tc.surge, tc.unavailable), func(t *testing.T) {
			e := newEnv(t)
			e.start(nil)
			d := e.create(newDeployment("web", tc.replicas, tc.surge, tc.unavailable)).(*api.Deployment)
			d = e.rollOut("web")
			rss := e.replicaSetsOf(d.UID)
			if len(rss) != 1 {
				t.Fatalf("%d replica sets, want 1", len(rss))
			}
			rs1 := rss[0]
			hash := rs1.Labels[labelPodTemplateHash]
			if hash == "" || rs1.Name != "web-"+hash || rs1.Spec.Selector.MatchLabels[labelPodTemplateHash] != hash ||
				rs1.Spec.Template.Labels[labelPodTemplateHash] != hash {
				t.Errorf("replica set %s: labels %v, selector %v, template labels %v", rs1.Name, rs1.Labels, rs1.Spec.Selector.MatchLabels, rs1.Spec.Template.Labels)
			}
			for _, p := range e.podsOf(rs1.UID) {
				if p.Labels[labelPodTemplateHash] != hash {
					t.Errorf("pod %s lacks pod-template-hash %s: %v", p.Name, hash, p.Labels)
				}
			}
			if rs1.Annotations[annRevision] != "1" || d.Annotations[annRevision] != "1" {
				t.Errorf("revisions: replica set %q, deployment %q; want 1 and 1", rs1.Annotations[annRevision], d.Annotations[annRevision])
			}

			inv := e.watchInvariants(d)
			e.update(deploymentsRes, "default", "web", false, setImage("nginx:1.26"))
			// While no new pod gets ready, the rollout goes exactly as far
			// as the bounds allow and stops: the old replica set down by
			// maxUnavailable, the new one up to maxSurge+maxUnavailable.
			wantOld, wantNew := tc.replicas-tc.maxUnav, min(tc.replicas, tc.maxSurge+tc.maxUnav)
			e.waitFor("the rollout to use its bounds", func() (bool, string) {
				var old, cur int32
				var oldPods, newPods int
				for _, rs := range e.replicaSetsOf(d.UID) {
					if rs.UID == rs1.UID {
						old, oldPods = replicasOf(rs.Spec.Replicas), len(e.podsOf(rs.UID))
					} else {
						cur, newPods = replicasOf(rs.Spec.Replicas), len(e.podsOf(rs.UID))
					}
				}
				return old == wantOld && cur == wantNew && oldPods == int(wantOld) && newPods == int(wantNew),
					fmt.Sprintf("old %d (%d pods), new %d (%d pods)", old, oldPods, cur, newPods)
			})
			d = e.rollOut("web")
			// Checked on every change of the store, stall and rollout.
			maxSize, minReady, _ := inv.get()
			if want := tc.replicas + tc.maxSurge; maxSize != want {
				t.Errorf("largest sum of replica set sizes %d, want replicas+maxSurge = %d", maxSize, want)
			}
			if want := int(tc.replicas - tc.maxUnav); minReady != want {
				t.Errorf("fewest ready pods %d, want replicas-maxUnavailable = %d", minReady, want)
			}
			rss = e.replicaSetsOf(d.UID)
			if len(rss) != 2 {
				t.Fatalf("%d replica sets, want 2", len(rss))
			}
			for _, rs := range rss {
				switch rs.UID {
				case rs1.UID:
					if replicasOf(rs.Spec.Replicas) != 0 {
						t.Errorf("old replica set has %d replicas", replicasOf(rs.Spec.Replicas))
					}
				default:
					if rs.Annotations[annRevision] != "2" || rs.Spec.Template.Spec.Containers[0].Image != "nginx:1.26" {
						t.Errorf("new replica set: revision %q image %s", rs.Annotations[annRevision], rs.Spec.Template.Spec.Containers[0].Image)
					}
				}
			}
			if d.Annotations[annRevision] != "2" {
				t.Errorf("deployment revision %q, want 2", d.Annotations[annRevision])
			}
			conds := map[string]string{}
			for _, c := range d.Status.Conditions {
				conds[c.Type] = c.Status + "/" + c.Reason
			}
			if conds[condAvailable] != "True/"+reasonMinimumReplicasAvailable || conds[condProgressing] != "True/"+reasonNewReplicaSetAvailable {
				t.Errorf("conditions %v", conds)
			}
			if len(e.events("web", reasonScalingReplicaSet)) == 0 {
				t.Errorf("no ScalingReplicaSet events")
			}
		})
	}
}

// rollOutTo changes the image and waits for the rollout.
func (e *env) rollOutTo(name, image string) *api.Deployment {
	e.t.Helper()
	e.update(deploymentsRes, "default", name, false, setImage(image))
	return e.rollOut(name)
}

func TestDeploymentUndoReusesOldReplicaSet(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := e.create(newDeployment("web", 2, "1", "0")).(*api.Deployment)
	e.rollOut("web")
	rs1 := e.replicaSetsOf(d.UID)[0]
	e.rollOutTo("web", "nginx:1.26")

	// What `outpost rollout undo` does: put revision 1's template back.
	e.update(deploymentsRes, "default", "web", false, func(o api.Object) {
		cp, err := controller.Copy(e.get(rsRes, "default", rs1.Name))
		if err != nil {
			t.Fatal(err)
		}
		tmpl := cp.(*api.ReplicaSet).Spec.Template
		delete(tmpl.Labels, labelPodTemplateHash)
		o.(*api.Deployment).Spec.Template = tmpl
	})
	d = e.rollOut("web")
	rss := e.replicaSetsOf(d.UID)
	if len(rss) != 2 {
		t.Fatalf("%d replica sets after undo, want 2 (the old one reused)", len(rss))
	}
	for _, rs := range rss {
		if rs.UID == rs1.UID {
			if rs.Annotations[annRevision] != "3" || replicasOf(rs.Spec.Replicas) != 2 {
				t.Errorf("reused replica set: revision %q replicas %d, want 3 and 2", rs.Annotations[annRevision], replicasOf(rs.Spec.Replicas))
			}
		} else if replicasOf(rs.Spec.Replicas) != 0 {
			t.Errorf("replica set %s of the undone revision has %d replicas", rs.Name, replicasOf(rs.Spec.Replicas))
		}
	}
	if d.Annotations[annRevision] != "3" {
		t.Errorf("deployment revision %q, want 3", d.Annotations[annRevision])
	}
}

func TestDeploymentRecreate(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := newDeployment("web", 3, "", "")
	d.Spec.Strategy.Type = api.RecreateDeploymentStrategyType
	d = e.create(d).(*api.Deployment)
	d = e.rollOut("web")
	inv := e.watchInvariants(d)
	d = e.rollOutTo("web", "nginx:1.26")
	if _, _, kinds := inv.get(); kinds != 1 {
		t.Errorf("pods of %d templates existed at once; Recreate allows 1", kinds)
	}
	if n := len(e.replicaSetsOf(d.UID)); n != 2 {
		t.Errorf("%d replica sets, want 2", n)
	}
}

func TestDeploymentRevisionHistoryLimit(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := newDeployment("web", 1, "1", "0")
	d.Spec.RevisionHistoryLimit = int32p(1)
	d = e.create(d).(*api.Deployment)
	e.rollOut("web")
	first := e.replicaSetsOf(d.UID)[0]
	e.rollOutTo("web", "nginx:1.26")
	e.rollOutTo("web", "nginx:1.27")
	e.waitFor("history pruned to one old replica set", func() (bool, string) {
		rss := e.replicaSetsOf(d.UID)
		var revs []string
		gone := true
		for _, rs := range rss {
			revs = append(revs, rs.Annotations[annRevision])
			gone = gone && rs.UID != first.UID
		}
		return len(rss) == 2 && gone, fmt.Sprintf("revisions %v", revs)
	})
}

func TestDeploymentPausedAndScaled(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := e.create(newDeployment("web", 2, "1", "0")).(*api.Deployment)
	e.rollOut("web")
	e.update(deploymentsRes, "default", "web", false, func(o api.Object) { o.(*api.Deployment).Spec.Paused = true })
	n := e.syncCount("deployment", "default/web")
	e.update(deploymentsRes, "default", "web", false, setImage("nginx:1.26"))
	e.waitSynced("deployment", "default/web", n)
	if rss := e.replicaSetsOf(d.UID); len(rss) != 1 {
		t.Fatalf("a paused deployment rolled out: %d replica sets", len(rss))
	}
	e.waitFor("DeploymentPaused", func() (bool, string) {
		c := findCondition(e.get(deploymentsRes, "default", "web").(*api.Deployment).Status.Conditions, condProgressing)
		return c != nil && c.Reason == reasonDeploymentPaused && c.Status == api.ConditionUnknown, fmt.Sprintf("%+v", c)
	})
	// Scaling works while paused.
	e.update(deploymentsRes, "default", "web", false, func(o api.Object) { o.(*api.Deployment).Spec.Replicas = int32p(4) })
	e.waitFor("scaled to 4 while paused", func() (bool, string) {
		rss := e.replicaSetsOf(d.UID)
		return len(rss) == 1 && replicasOf(rss[0].Spec.Replicas) == 4 && rss[0].Annotations[annDesiredReplicas] == "4",
			fmt.Sprintf("%d replica sets", len(rss))
	})
	e.update(deploymentsRes, "default", "web", false, func(o api.Object) { o.(*api.Deployment).Spec.Paused = false })
	d = e.rollOut("web")
	if rss := e.replicaSetsOf(d.UID); len(rss) != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.26" {
		t.Errorf("after resuming: %d replica sets", len(rss))
	}
}

func TestDeploymentProportionalScaling(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := e.create(newDeployment("web", 10, "3", "2")).(*api.Deployment)
	e.rollOut("web")
	rs1 := e.replicaSetsOf(d.UID)[0]
	// New pods never get ready: the rollout stops at old 8, new 5.
	e.update(deploymentsRes, "default", "web", false, setImage("nginx:1.26"))
	sizes := func() (old, cur int32, s string) {
		for _, rs := range e.replicaSetsOf(d.UID) {
			if rs.UID == rs1.UID {
				old = replicasOf(rs.Spec.Replicas)
			} else {
				cur = replicasOf(rs.Spec.Replicas)
			}
		}
		return old, cur, fmt.Sprintf("old %d, new %d", old, cur)
	}
	e.waitFor("rollout stuck at old 8, new 5", func() (bool, string) {
		old, cur, s := sizes()
		return old == 8 && cur == 5, s
	})
	// Scaling to 20 shares the 10 more (plus the surge, 23 in all) in
	// proportion: old 8→14, new 5→9.
	e.update(deploymentsRes, "default", "web", false, func(o api.Object) { o.(*api.Deployment).Spec.Replicas = int32p(20) })
	e.waitFor("proportional scale-up", func() (bool, string) {
		old, cur, s := sizes()
		return old == 14 && cur == 9, s
	})
}

func TestDeploymentProgressDeadline(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := newDeployment("web", 2, "1", "0")
	d.Spec.ProgressDeadlineSeconds = int32p(60)
	e.create(d)
	progressing := func(reason, status string) {
		t.Helper()
		e.waitFor("Progressing "+reason, func() (bool, string) {
			c := findCondition(e.get(deploymentsRes, "default", "web").(*api.Deployment).Status.Conditions, condProgressing)
			return c != nil && c.Reason == reason && c.Status == status, fmt.Sprintf("%+v", c)
		})
	}
	e.waitFor("two pods that never get ready", func() (bool, string) {
		d := e.get(deploymentsRes, "default", "web").(*api.Deployment)
		c := findCondition(d.Status.Conditions, condProgressing)
		return d.Status.Replicas == 2 && d.Status.UpdatedReplicas == 2 && c != nil && c.Reason == reasonReplicaSetUpdated, fmt.Sprintf("%+v", d.Status)
	})
	e.clock.Advance(2 * time.Minute)
	e.update(deploymentsRes, "default", "web", false, func(o api.Object) { o.GetObjectMeta().Annotations = map[string]string{"poke": "1"} })
	progressing(reasonProgressDeadlineExceeded, api.ConditionFalse)
	e.rollOut("web")
	progressing(reasonNewReplicaSetAvailable, api.ConditionTrue)
}

// Kubernetes' default deadline (600 s) passing on the test clock, with
// no change to the deployment or its pods, fails the rollout: the
// controller looks again by itself at the deadline and sets Progressing
// False, ProgressDeadlineExceeded, which `rollout status` reports with
// exit 1 (issue 15 item 7).
func TestDeploymentProgressDeadlinePassesByItself(t *testing.T) {
	e := newEnv(t)
	e.fakeTimers = true
	e.start(nil)
	d := newDeployment("web", 2, "1", "0")
	d.Spec.ProgressDeadlineSeconds = nil // defaulted to 600
	e.create(d)
	cond := func() *api.DeploymentCondition {
		return findCondition(e.get(deploymentsRes, "default", "web").(*api.Deployment).Status.Conditions, condProgressing)
	}
	e.waitFor("two pods that never get ready, and a look again at the deadline", func() (bool, string) {
		d := e.get(deploymentsRes, "default", "web").(*api.Deployment)
		c := cond()
		return *d.Spec.ProgressDeadlineSeconds == 600 && d.Status.UpdatedReplicas == 2 && c != nil && c.Reason == reasonReplicaSetUpdated &&
			e.pendingTimers() > 0, fmt.Sprintf("%+v, %d timers", d.Status, e.pendingTimers())
	})
	e.advance(590 * time.Second)
	if c := cond(); c.Reason != reasonReplicaSetUpdated || c.Status != api.ConditionTrue {
		t.Fatalf("before the deadline: %+v", c)
	}
	e.advance(15 * time.Second)
	e.waitFor("ProgressDeadlineExceeded", func() (bool, string) {
		c := cond()
		return c.Reason == reasonProgressDeadlineExceeded && c.Status == api.ConditionFalse &&
			strings.HasSuffix(c.Message, "has timed out progressing."), fmt.Sprintf("%+v", c)
	})
}

func TestTemplateHashIsStable(t *testing.T) {
	a := template(map[string]string{"app": "web", "tier": "front"}, "nginx:1.25")
	b := template(map[string]string{"tier": "front", "app": "web"}, "nginx:1.25")
	if templateHash(&a, 0) != templateHash(&b, 0) {
		t.Errorf("equal templates hash differently")
	}
	c := template(maps.Clone(a.Labels), "nginx:1.26")
	if templateHash(&a, 0) == templateHash(&c, 0) || templateHash(&a, 0) == templateHash(&a, 1) {
		t.Errorf("different templates (or collision counts) hash alike")
	}
	if h := templateHash(&a, 0); strings.ContainsAny(h, "aeiou013") {
		t.Errorf("hash %q uses letters outside the generated-name alphabet", h)
	}
}

func TestFenceposts(t *testing.T) {
	for _, tc := range []struct {
		replicas            int32
		surge, unavail      string
		wantSurge, wantUnav int32
	}{
		{4, "25%", "25%", 1, 1},
		{5, "30%", "30%", 2, 1},
		{10, "25%", "25%", 3, 2},
		{3, "0", "0%", 0, 1}, // both zero: maxUnavailable 1
		{1, "25%", "25%", 1, 0},
	} {
		d := newDeployment("web", tc.replicas, tc.surge, tc.unavail)
		if s, u := fenceposts(d); s != tc.wantSurge || u != tc.wantUnav {
			t.Errorf("%d replicas, %s/%s: surge %d unavailable %d, want %d %d", tc.replicas, tc.surge, tc.unavail, s, u, tc.wantSurge, tc.wantUnav)
		}
	}
}

// A replica set just scaled down may still report the available pods it
// had: the rollout must not count them, or it scales down below
// replicas-maxUnavailable.
func TestRollingScaleDownCountsNoMoreThanSpec(t *testing.T) {
	e := newEnv(t)
	s := &shared{client: e.f, log: slogDiscard(), now: time.Now, sels: newSelectors()}
	s.rec = newRecorder(e.f, s.log, s.now)
	s.podInf = controller.NewInformer(e.f, podsRes, nil)
	s.rsInf = controller.NewInformer(e.f, rsRes, nil)
	s.pods, s.rss = newIndex(s.podInf), newIndex(s.rsInf)
	s.deployInf = controller.NewInformer(e.f, deploymentsRes, nil)
	c := newDeploymentController(s)
	d := e.create(newDeployment("web", 3, "1", "1")).(*api.Deployment)
	mkRS := func(name, image string, spec, available int32) *api.ReplicaSet {
		rs := newReplicaSet(name, spec, map[string]string{"app": "web", labelPodTemplateHash: name})
		rs.Spec.Template.Spec.Containers[0].Image = image
		rs.OwnerReferences = []api.OwnerReference{newControllerRef(d)}
		stored, err := controller.Copy(e.create(rs)) // Create returns the store's own object
		if err != nil {
			t.Fatal(err)
		}
		rs = stored.(*api.ReplicaSet)
		rs.Status = api.ReplicaSetStatus{Replicas: available, ReadyReplicas: available, AvailableReplicas: available}
		out, err := e.f.UpdateStatus(context.Background(), rs)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*api.ReplicaSet)
	}
	old := mkRS("old", "nginx:1.24", 2, 3) // scaled 3→2, status not caught up
	cur := mkRS("cur", "nginx:1.25", 2, 1)
	r := &rollout{c: c, ctx: context.Background(), key: "default/web", d: d, now: time.Now(), all: []*api.ReplicaSet{old, cur}, newRS: cur, old: []*api.ReplicaSet{old}}
	if _, err := r.reconcileOldRSs(); err != nil {
		t.Fatal(err)
	}
	if got := replicasOf(e.get(rsRes, "default", "old").(*api.ReplicaSet).Spec.Replicas); got != 1 {
		t.Errorf("old replica set scaled to %d, want 1: 1 old + 1 new available = replicas-maxUnavailable", got)
	}
}
