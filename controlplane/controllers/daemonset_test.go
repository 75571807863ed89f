package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func newDaemonSet(name string, nodeSelector map[string]string) *api.DaemonSet {
	labels := map[string]string{"app": name}
	ds := &api.DaemonSet{
		ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name},
		Spec: api.DaemonSetSpec{
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: template(labels, "agent:1.0"),
		},
	}
	ds.Spec.Template.Spec.NodeSelector = nodeSelector
	return ds
}

// daemonNodes returns the nodes the daemon set's active pods are bound
// to, sorted (a node twice if it has two).
func (e *env) daemonNodes(uid string) []string {
	var out []string
	for _, p := range active(e.podsOf(uid)) {
		out = append(out, p.Spec.NodeName)
	}
	sort.Strings(out)
	return out
}

func (e *env) waitDaemonNodes(uid string, want ...string) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("daemon pods on %v", want), func() (bool, string) {
		got := e.daemonNodes(uid)
		return slices.Equal(got, want) && len(e.podsOf(uid)) == len(want), fmt.Sprintf("on %v", got)
	})
}

func (e *env) waitDaemonStatus(name string, want func(api.DaemonSetStatus) bool) {
	e.t.Helper()
	e.waitFor("daemon set status", func() (bool, string) {
		ds := e.get(daemonSetsRes, "default", name).(*api.DaemonSet)
		return ds.Status.ObservedGeneration == ds.Generation && want(ds.Status), fmt.Sprintf("%+v", ds.Status)
	})
}

func TestDaemonSetPlacement(t *testing.T) {
	e := newEnv(t)
	edge := map[string]string{"role": "edge"}
	e.create(newNode("plain", edge))
	cordoned := newNode("cordoned", edge)
	cordoned.Spec.Unschedulable = true
	e.create(cordoned)
	dedicated := newNode("dedicated", edge)
	dedicated.Spec.Taints = []api.Taint{{Key: "dedicated", Value: "db", Effect: api.TaintEffectNoSchedule}}
	e.create(dedicated)
	e.create(newNode("other-role", map[string]string{"role": "core"}))
	pressured := newNode("pressured", edge)
	pressured.Status.Conditions = append(pressured.Status.Conditions, api.NodeCondition{Type: api.NodeDiskPressure, Status: api.ConditionTrue})
	pressured.Spec.Taints = []api.Taint{{Key: "node.kubernetes.io/disk-pressure", Effect: api.TaintEffectNoSchedule}}
	e.create(pressured)
	notReady := newNode("not-ready", edge)
	notReady.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionFalse}}
	// Tainted as the node lifecycle controller leaves a node that is not
	// ready (TNT-6), before the daemon set appears.
	notReady.Spec.Taints = []api.Taint{{Key: "node.kubernetes.io/not-ready", Effect: api.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/not-ready", Effect: api.TaintEffectNoSchedule}}
	e.create(notReady)
	evicting := newNode("evicting", edge)
	evicting.Spec.Taints = []api.Taint{{Key: "maintenance", Effect: api.TaintEffectNoExecute}}
	e.create(evicting)
	e.start(nil)

	ds := e.create(newDaemonSet("agent", edge)).(*api.DaemonSet)
	// Cordoned, under disk pressure: daemon pods tolerate those. An
	// untolerated NoSchedule or NoExecute taint, or a node the selector
	// does not pick, gets none; so does a node that is not ready, since
	// the node lifecycle controller gives it not-ready:NoSchedule (TNT-6),
	// which daemon pods do not tolerate, as in Kubernetes.
	e.waitDaemonNodes(ds.UID, "cordoned", "plain", "pressured")
	for _, p := range e.podsOf(ds.UID) {
		for _, want := range daemonTolerations {
			if !slices.ContainsFunc(p.Spec.Tolerations, func(t api.Toleration) bool {
				return t.Key == want.Key && t.Effect == want.Effect && t.Operator == api.TolerationOpExists && t.TolerationSeconds == nil
			}) {
				t.Errorf("pod %s lacks toleration %s:%s", p.Name, want.Key, want.Effect)
			}
		}
		if ref := api.ControllerRef(&p.ObjectMeta); ref == nil || ref.Kind != "DaemonSet" || ref.UID != ds.UID {
			t.Errorf("pod %s: controller reference %+v", p.Name, ref)
		}
	}
	e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool {
		return st.DesiredNumberScheduled == 3 && st.CurrentNumberScheduled == 3 && st.NumberMisscheduled == 0 && st.UpdatedNumberScheduled == 3
	})
	if got := e.f.Writes("bind"); got != 0 {
		t.Errorf("%d bindings: daemon pods are created bound", got)
	}

	// A new node gets a pod.
	e.create(newNode("new", edge))
	e.waitDaemonNodes(ds.UID, "cordoned", "new", "plain", "pressured")
	// A node that goes loses its pod; so does one that loses the label.
	e.delete(nodesRes, "", "plain")
	e.update(nodesRes, "", "cordoned", false, func(o api.Object) { o.GetObjectMeta().Labels = nil })
	e.waitDaemonNodes(ds.UID, "new", "pressured")
	// An untolerated NoSchedule taint keeps running pods (as Kubernetes):
	// the node no longer wants one, so the pod counts as misscheduled.
	e.update(nodesRes, "", "new", false, func(o api.Object) {
		o.(*api.Node).Spec.Taints = []api.Taint{{Key: "dedicated", Value: "db", Effect: api.TaintEffectNoSchedule}}
	})
	e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool {
		return st.DesiredNumberScheduled == 1 && st.NumberMisscheduled == 1
	})
	e.waitDaemonNodes(ds.UID, "new", "pressured")
	// Ready pods are counted.
	for _, p := range e.podsOf(ds.UID) {
		e.markReady(p)
	}
	e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool {
		return st.NumberReady == 1 && st.NumberAvailable == 1 && st.NumberUnavailable == 0
	})
}

func TestDaemonSetReplacesFailedPodsAndRespectsResources(t *testing.T) {
	e := newEnv(t)
	e.create(newNode("n1", nil))
	small := newNode("small", nil)
	small.Status.Capacity["cpu"] = api.MustParseQuantity("100m")
	e.create(small)
	e.start(nil)
	ds := newDaemonSet("agent", nil)
	ds.Spec.Template.Spec.Containers[0].Resources.Requests = api.ResourceList{"cpu": api.MustParseQuantity("500m")}
	uid := e.create(ds).GetObjectMeta().UID
	e.waitDaemonNodes(uid, "n1")
	// No room on "small": it is desired but gets no pod.
	e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool {
		return st.DesiredNumberScheduled == 2 && st.CurrentNumberScheduled == 1
	})
	old := e.podsOf(uid)[0]
	e.setPhase(old, api.PodFailed, "Evicted", false)
	e.waitFor("the failed pod replaced", func() (bool, string) {
		pods := e.podsOf(uid)
		return len(pods) == 1 && pods[0].UID != old.UID && podActive(pods[0]), fmt.Sprintf("pods %v", names(pods))
	})
}

// availability follows a daemon set's pods event by event and records
// the fewest nodes that had an available pod.
type availability struct {
	mu      sync.Mutex
	ready   map[string]map[string]bool // node → pod → ready
	min     int
	maxPods int // most pods at once
}

func (e *env) watchAvailability(uid string) *availability {
	e.t.Helper()
	a := &availability{ready: map[string]map[string]bool{}, min: 1 << 30}
	objs, rv, err := e.f.List(podsRes)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, obj := range objs {
		a.apply(uid, api.Added, obj.(*api.Pod))
	}
	a.min = a.count()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.f.Watch(ctx, podsRes, rv)
	if err != nil {
		e.t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range ch {
			a.mu.Lock()
			a.apply(uid, ev.Type, ev.Object.(*api.Pod))
			a.min = min(a.min, a.count())
			a.maxPods = max(a.maxPods, a.pods())
			a.mu.Unlock()
		}
	})
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	return a
}

func (a *availability) apply(uid, typ string, p *api.Pod) {
	if !isControlledBy(p, uid) {
		return
	}
	m := a.ready[p.Spec.NodeName]
	if m == nil {
		m = map[string]bool{}
		a.ready[p.Spec.NodeName] = m
	}
	// A terminating pod is on its way out: the surge bounds the others,
	// as in Kubernetes.
	if typ == api.Deleted || p.DeletionTimestamp != nil {
		delete(m, p.Name)
	} else {
		m[p.Name] = podActive(p) && podReady(p)
	}
}

func (a *availability) count() int {
	n := 0
	for _, pods := range a.ready {
		for _, r := range pods {
			if r {
				n++
				break
			}
		}
	}
	return n
}

func (a *availability) pods() int {
	n := 0
	for _, pods := range a.ready {
		n += len(pods)
	}
	return n
}

func (a *availability) get() (fewestAvailable, mostPods int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.min, a.maxPods
}

// rollOutDaemons plays the agent until every pod of the daemon set runs
// the template with hash and is ready.
func (e *env) rollOutDaemons(uid string, nodes int, hash string) {
	e.t.Helper()
	e.waitFor("daemon set rollout", func() (bool, string) {
		pods := e.podsOf(uid)
		done := len(pods) == nodes
		for _, p := range pods {
			if podActive(p) && !podReady(p) {
				e.markReady(p)
				return false, "marked " + p.Name + " ready"
			}
			done = done && p.Labels[labelControllerRevisionHash] == hash
		}
		return done, fmt.Sprintf("pods %v", names(pods))
	})
}

func TestDaemonSetRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		maxUnavailable, maxSurge string
		minAvailable, maxPods    int // of 4 nodes
	}{
		{"1", "0", 3, 4},
		{"50%", "0", 2, 4},
		{"0", "1", 4, 5},
		{"0", "50%", 4, 6},
	} {
		t.Run(tc.maxUnavailable+"-"+tc.maxSurge, func(t *testing.T) {
			e := newEnv(t)
			for i := range 4 {
				e.create(newNode(fmt.Sprintf("n%d", i), nil))
			}
			e.start(nil)
			ds := newDaemonSet("agent", nil)
			ds.Spec.UpdateStrategy = api.DaemonSetUpdateStrategy{Type: api.RollingUpdateDaemonSetStrategyType, RollingUpdate: &api.RollingUpdateDaemonSet{
				MaxUnavailable: intstr(tc.maxUnavailable), MaxSurge: intstr(tc.maxSurge),
			}}
			ds = e.create(ds).(*api.DaemonSet)
			e.rollOutDaemons(ds.UID, 4, templateHash(&ds.Spec.Template, 0))
			// As `rollout status` would: the controller has seen them all
			// available (an old pod it thinks unavailable is fair game).
			e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool { return st.NumberAvailable == 4 })

			a := e.watchAvailability(ds.UID)
			ds = e.update(daemonSetsRes, "default", "agent", false, func(o api.Object) {
				o.(*api.DaemonSet).Spec.Template.Spec.Containers[0].Image = "agent:2.0"
			}).(*api.DaemonSet)
			hash := templateHash(&ds.Spec.Template, 0)
			e.rollOutDaemons(ds.UID, 4, hash)
			e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool {
				return st.UpdatedNumberScheduled == 4 && st.NumberAvailable == 4 && st.DesiredNumberScheduled == 4
			})
			fewest, most := a.get()
			if fewest != tc.minAvailable {
				t.Errorf("fewest nodes with an available pod %d, want %d", fewest, tc.minAvailable)
			}
			if most != tc.maxPods {
				t.Errorf("most pods at once %d, want %d", most, tc.maxPods)
			}
		})
	}
}

func TestDaemonSetOnDelete(t *testing.T) {
	e := newEnv(t)
	e.create(newNode("n1", nil))
	e.create(newNode("n2", nil))
	e.start(nil)
	ds := newDaemonSet("agent", nil)
	ds.Spec.UpdateStrategy = api.DaemonSetUpdateStrategy{Type: api.OnDeleteDaemonSetStrategyType}
	ds = e.create(ds).(*api.DaemonSet)
	oldHash := templateHash(&ds.Spec.Template, 0)
	e.waitDaemonNodes(ds.UID, "n1", "n2")
	n := e.syncCount("daemonset", "default/agent")
	ds = e.update(daemonSetsRes, "default", "agent", false, func(o api.Object) {
		o.(*api.DaemonSet).Spec.Template.Spec.Containers[0].Image = "agent:2.0"
	}).(*api.DaemonSet)
	e.waitSynced("daemonset", "default/agent", n)
	e.waitDaemonStatus("agent", func(api.DaemonSetStatus) bool { return true }) // the new generation seen
	pods := e.podsOf(ds.UID)
	for _, p := range pods {
		if p.Labels[labelControllerRevisionHash] != oldHash {
			t.Fatalf("OnDelete replaced pod %s", p.Name)
		}
	}
	e.delete(podsRes, "default", pods[0].Name)
	newHash := templateHash(&ds.Spec.Template, 0)
	e.waitFor("the deleted pod recreated from the new template", func() (bool, string) {
		var hashes []string
		for _, p := range e.podsOf(ds.UID) {
			hashes = append(hashes, p.Spec.NodeName+"="+p.Labels[labelControllerRevisionHash])
		}
		sort.Strings(hashes)
		want := []string{pods[0].Spec.NodeName + "=" + newHash, pods[1].Spec.NodeName + "=" + oldHash}
		sort.Strings(want)
		return slices.Equal(hashes, want), fmt.Sprintf("%v", hashes)
	})
}

func TestDaemonPodTolerations(t *testing.T) {
	ds := newDaemonSet("agent", nil)
	secs := int64(300)
	ds.Spec.Template.Spec.Tolerations = []api.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: &secs},
		{Key: "gpu", Operator: api.TolerationOpExists},
	}
	ds.Spec.Template.Spec.HostNetwork = true
	raw, err := templateJSON(&ds.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	p, err := daemonPod(raw, ds, "h", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "n1" || p.Labels[labelControllerRevisionHash] != "h" {
		t.Errorf("node %q labels %v", p.Spec.NodeName, p.Labels)
	}
	want := len(daemonTolerations) + 2 // gpu, network-unavailable for host network
	if len(p.Spec.Tolerations) != want {
		t.Errorf("%d tolerations, want %d: %+v", len(p.Spec.Tolerations), want, p.Spec.Tolerations)
	}
	for _, tol := range p.Spec.Tolerations {
		if tol.Key == "node.kubernetes.io/not-ready" && tol.TolerationSeconds != nil {
			t.Errorf("not-ready toleration keeps tolerationSeconds: ADM-4 says never evicted")
		}
	}
	if ds.Spec.Template.Spec.Tolerations[0].TolerationSeconds == nil {
		t.Errorf("the daemon set's template was changed")
	}
}

// A daemon pod deleted while its node runs it is not replaced on that
// node until the node has stopped it: two copies never run on one node
// (issue 10 item 1).
func TestDaemonSetWaitsForTerminatingPod(t *testing.T) {
	e := newEnv(t)
	e.holdTerminating.Store(true)
	e.create(newNode("n1", nil))
	e.start(nil)
	ds := e.create(newDaemonSet("agent", nil)).(*api.DaemonSet)
	e.waitDaemonNodes(ds.UID, "n1")
	e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool { return st.CurrentNumberScheduled == 1 })
	old := e.podsOf(ds.UID)[0]
	e.delete(podsRes, "default", old.Name)
	e.waitDaemonStatus("agent", func(st api.DaemonSetStatus) bool { return st.CurrentNumberScheduled == 0 })
	if got := e.podsOf(ds.UID); len(got) != 1 || got[0].UID != old.UID || got[0].DeletionTimestamp == nil {
		t.Fatalf("pods while the deleted one terminates: %v; want only it, Terminating", names(got))
	}
	e.releaseTerminating()
	e.waitFor("a new daemon pod on n1", func() (bool, string) {
		got := e.podsOf(ds.UID)
		return len(got) == 1 && got[0].UID != old.UID && got[0].Spec.NodeName == "n1", fmt.Sprintf("pods %v", names(got))
	})
}
