package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// podKey names a pod within the cluster, for messages.
type podKey struct{ namespace, name string }

func (p *PodInfo) key() podKey { return podKey{p.pod.Namespace, p.pod.Name} }

// placedPods returns every pod the cluster holds, by its by-name maps.
func placedPods(c *Cluster) []*PodInfo {
	var out []*PodInfo
	for _, ns := range c.namespaces {
		for _, pi := range ns.byName {
			out = append(out, pi)
		}
	}
	return out
}

// checkConsistent recomputes every sum and index of the cluster from its
// pods and nodes and compares.
func checkConsistent(t *testing.T, c *Cluster) {
	t.Helper()
	type sums struct {
		req                Resources
		nonZeroCPU, nonMem int64
		pods               int
		ports              map[hostPort]int32
	}
	if !reflect.DeepEqual(noExtra, podExtra{}) {
		t.Fatalf("the shared empty podExtra was written: %+v", noExtra)
	}
	if n := len(placedPods(c)); n != c.numPods {
		t.Fatalf("%d pods by name, counted %d", n, c.numPods)
	}
	want := map[string]*sums{}
	for _, pi := range placedPods(c) {
		if cap(pi.slots) != len(pi.slots) {
			t.Fatalf("pod %v: %d slots in room for %d", pi.key(), len(pi.slots), cap(pi.slots))
		}
		s := want[pi.node.name]
		if s == nil {
			s = &sums{ports: map[hostPort]int32{}}
			want[pi.node.name] = s
		}
		req := pi.requests()
		s.req.add(&req, 1)
		s.nonZeroCPU += pi.nonZeroCPU
		s.nonMem += pi.nonZeroMem
		s.pods++
		for _, hp := range pi.ports {
			s.ports[hp]++
		}
		if c.nodes[pi.node.name] != pi.node {
			t.Fatalf("pod %v points at a node info the cluster does not hold", pi.key())
		}
		if l := pi.node.pods.items; int(pi.nodeIdx) >= len(l) || l[pi.nodeIdx] != pi {
			t.Fatalf("pod %v: stale position %d in its node's list", pi.key(), pi.nodeIdx)
		}
		if l := c.namespaces[pi.pod.Namespace].all.items; int(pi.nsIdx) >= len(l) || l[pi.nsIdx] != pi {
			t.Fatalf("pod %v: stale position %d in its namespace's list", pi.key(), pi.nsIdx)
		}
		for _, sl := range pi.slots {
			if sl.idx >= len(sl.list.items) || sl.list.items[sl.idx] != pi {
				t.Fatalf("pod %v has a stale slot", pi.key())
			}
		}
	}
	for name, n := range c.nodes {
		s := want[name]
		if s == nil {
			s = &sums{ports: map[hostPort]int32{}}
		}
		if n.node == nil && s.pods == 0 {
			t.Fatalf("ghost node %s kept without pods", name)
		}
		if n.requested.MilliCPU != s.req.MilliCPU || n.requested.Memory != s.req.Memory || len(n.requested.Scalar) != len(s.req.Scalar) ||
			n.nonZeroCPU != s.nonZeroCPU || n.nonZeroMem != s.nonMem || len(n.pods.items) != s.pods {
			t.Fatalf("node %s: sums %+v %d %d %d, recomputed %+v", name, n.requested, n.nonZeroCPU, n.nonZeroMem, len(n.pods.items), s)
		}
		if !maps.Equal(n.ports, s.ports) && !(len(n.ports) == 0 && len(s.ports) == 0) {
			t.Fatalf("node %s: ports %v, recomputed %v", name, n.ports, s.ports)
		}
	}
	for i, n := range c.nodeList {
		if n.pos != i || n.node == nil || c.nodes[n.name] != n {
			t.Fatalf("node list entry %d (%s) is stale", i, n.name)
		}
	}
	perNS := map[string]int{}
	terms := 0
	for _, pi := range placedPods(c) {
		perNS[pi.pod.Namespace]++
		terms += len(pi.reqAffinity) + len(pi.reqAnti) + len(pi.prefAffinity) + len(pi.prefAnti)
		for k, v := range pi.pod.Labels {
			l := c.namespaces[pi.pod.Namespace].byLabel[k][v]
			if l == nil {
				t.Fatalf("pod %v missing from label index %s=%s", pi.key(), k, v)
			}
		}
	}
	for ns, idx := range c.namespaces {
		if len(idx.all.items) != perNS[ns] {
			t.Fatalf("namespace %s indexes %d pods, holds %d", ns, len(idx.all.items), perNS[ns])
		}
		for k, vals := range idx.byLabel {
			for v, l := range vals {
				if len(l.items) == 0 {
					t.Fatalf("empty posting list %s=%s kept", k, v)
				}
			}
		}
	}
	inGroups := 0
	for kind, l := range c.termGroups {
		for i, g := range l {
			if g.pos != i || int(g.kind) != kind || c.termIndex[g.sig] != g || len(g.pods.items) == 0 {
				t.Fatalf("term group %q is stale", g.sig)
			}
			inGroups += len(g.pods.items)
			if g.gen != c.labelsGen {
				continue
			}
			want := map[string]int32{}
			for _, p := range g.pods.items {
				if v, ok := labelValue(p.node, g.term.key); ok && counts(p) {
					want[v]++
				}
			}
			if !maps.Equal(want, g.perValue) {
				t.Fatalf("term group %q counts %v, recomputed %v", g.sig, g.perValue, want)
			}
		}
	}
	if inGroups != terms || len(c.termIndex) != len(c.termGroups[0])+len(c.termGroups[1])+len(c.termGroups[2])+len(c.termGroups[3]) {
		t.Fatalf("term groups hold %d pod terms, pods have %d", inGroups, terms)
	}
	for _, g := range c.groups {
		if g.gen != c.labelsGen {
			continue
		}
		var total int32
		perNode := map[*NodeInfo]int32{}
		var oldest *PodInfo
		for _, p := range placedPods(c) {
			if !counts(p) || !g.matches(p) {
				continue
			}
			total++
			if p.node.node != nil {
				perNode[p.node]++
			}
			if oldest == nil || olderFirst(p, oldest) < 0 {
				oldest = p
			}
		}
		if total != g.total || !maps.Equal(perNode, g.perNode) {
			t.Fatalf("pod group %q: %d %v, recomputed %d %v", g.sig, g.total, g.perNode, total, perNode)
		}
		if g.oldestOK && g.oldest != oldest {
			t.Fatalf("pod group %q: oldest %v, recomputed %v", g.sig, g.oldest, oldest)
		}
		for key, m := range g.perValue {
			want := map[string]int32{}
			for n, cnt := range perNode {
				if v, ok := labelValue(n, key); ok {
					want[v] += cnt
				}
			}
			if !maps.Equal(want, m) {
				t.Fatalf("pod group %q by %q: %v, recomputed %v", g.sig, key, m, want)
			}
		}
	}
	images := map[string]int{}
	for _, n := range c.nodeList {
		for img := range n.images {
			images[img]++
		}
	}
	if !maps.Equal(images, c.imageNodes) {
		t.Fatalf("image counts %v, recomputed %v", c.imageNodes, images)
	}
}

// Random adds, updates and removals of nodes and pods keep the
// incremental sums and indexes equal to a recomputation.
func TestClusterIncrementalConsistency(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	c := NewCluster()
	var live []*api.Pod
	for step := range 3000 {
		switch op := r.IntN(10); {
		case op == 0:
			n := mkNode(fmt.Sprintf("n%d", r.IntN(6)), nodeLabels(LabelZone, fmt.Sprintf("z%d", r.IntN(3))))
			if r.IntN(2) == 0 {
				nodeImages(int64(r.IntN(1000)), fmt.Sprintf("img%d", r.IntN(4)))(n)
			}
			c.SetNode(n)
		case op == 1:
			c.RemoveNode(fmt.Sprintf("n%d", r.IntN(6)))
		case op < 6:
			p := randomPod(r, fmt.Sprintf("p%d", r.IntN(30)))
			p.Namespace = fmt.Sprintf("ns%d", r.IntN(2))
			p.Spec.NodeName = fmt.Sprintf("n%d", r.IntN(6))
			if r.IntN(3) == 0 {
				ownedBy("ReplicaSet", fmt.Sprintf("rs%d", r.IntN(2)))(p)
			}
			if r.IntN(10) == 0 {
				p.Status.Phase = api.PodSucceeded
			}
			if r.IntN(2) == 0 {
				if err := c.Assume(p, p.Spec.NodeName); err != nil {
					t.Fatal(err)
				}
			} else if err := c.SetPod(p); err != nil {
				t.Fatal(err)
			}
			live = append(live, p)
		default:
			if len(live) > 0 {
				p := live[r.IntN(len(live))]
				c.RemovePod(p.Namespace, p.Name)
			}
		}
		if step%10 == 0 {
			// Read some views, as cycles do, so that they are kept.
			for _, app := range []string{"a", "b"} {
				sel := api.SelectorFromSet(map[string]string{"app": app})
				ns := []string{fmt.Sprintf("ns%d", r.IntN(2))}
				g := c.group(groupSig(ns, []string{selectorKey(sel)}, "rs0"), ns, []api.Selector{sel}, "rs0")
				g.byValue(LabelZone)
				g.byValue(zoneLabel)
			}
			for _, l := range c.termGroups {
				for _, g := range l {
					c.values(g)
				}
			}
		}
		if step%50 == 0 {
			checkConsistent(t, c)
		}
	}
	checkConsistent(t, c)
	for _, p := range live {
		c.RemovePod(p.Namespace, p.Name)
	}
	for i := range 6 {
		c.RemoveNode(fmt.Sprintf("n%d", i))
	}
	checkConsistent(t, c)
	if len(c.nodes)+c.numPods+len(c.namespaces)+len(c.byCtrl)+len(c.imageNodes)+len(c.termIndex) != 0 {
		t.Errorf("empty cluster still holds %d nodes, %d pods, %d namespaces, %d controllers, %d images",
			len(c.nodes), c.numPods, len(c.namespaces), len(c.byCtrl), len(c.imageNodes))
	}
}

// A pod bound to a node the cluster has not seen yet is counted once the
// node arrives; a removed node's pods keep counting until they go.
func TestGhostNodes(t *testing.T) {
	c := NewCluster()
	if err := c.SetPod(mkPod("early", onNode("late"), podRequest("cpu", "3"))); err != nil {
		t.Fatal(err)
	}
	if c.NumNodes() != 0 || c.Node("late") != nil {
		t.Fatal("a ghost node is visible")
	}
	c.SetNode(mkNode("late"))
	s := newScheduler(t, nil)
	if _, err := schedule(t, s, c, mkPod("p", podRequest("cpu", "2"))); err == nil {
		t.Error("the early pod's 3 CPU were not counted on the 4-CPU node")
	}
	c.RemoveNode("late")
	c.SetNode(mkNode("late"))
	if _, err := schedule(t, s, c, mkPod("p", podRequest("cpu", "2"))); err == nil {
		t.Error("the early pod's request was lost when its node went and came back")
	}
	checkConsistent(t, c)
}

// Assume counts a binding at once; Forget undoes it.
func TestAssumeForget(t *testing.T) {
	c := newCluster(t, []*api.Node{mkNode("n", nodeAlloc("cpu", "1", "memory", "1Gi", "pods", "10"))}, nil)
	s := newScheduler(t, nil)
	p := mkPod("p", podRequest("cpu", "600m"))
	node, err := schedule(t, s, c, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assume(p, node); err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Error("Assume changed the caller's pod")
	}
	q := mkPod("q", podRequest("cpu", "600m"))
	if _, err := schedule(t, s, c, q); err == nil {
		t.Error("the assumed pod's CPU was not counted")
	}
	c.Forget(p)
	if _, err := schedule(t, s, c, q); err != nil {
		t.Errorf("after Forget: %v", err)
	}
}

// Node updates take effect: labels, taints, conditions, allocatable.
func TestNodeUpdates(t *testing.T) {
	c := newCluster(t, []*api.Node{mkNode("n")}, nil)
	s := newScheduler(t, nil)
	p := mkPod("p", nodeSelector("zone", "z1"))
	if _, err := schedule(t, s, c, p); err == nil {
		t.Fatal("fits before the label")
	}
	c.SetNode(mkNode("n", nodeLabels("zone", "z1")))
	if _, err := schedule(t, s, c, p); err != nil {
		t.Fatalf("after the label: %v", err)
	}
	c.SetNode(mkNode("n", nodeLabels("zone", "z1"), nodeTaints(api.Taint{Key: "k", Effect: "NoExecute"})))
	if _, err := schedule(t, s, c, p); err == nil {
		t.Fatal("fits despite the NoExecute taint")
	}
}

func TestServicesOf(t *testing.T) {
	c := newCluster(t, nil, nil, mkService("b-svc", "app", "web"), mkService("a-svc", "tier", "front"), mkService("other", "app", "db"),
		&api.Service{ObjectMeta: api.ObjectMeta{Name: "headless", Namespace: "default"}})
	got := c.servicesOf(mkPod("p", podLabels("app", "web", "tier", "front")))
	if len(got) != 2 || got[0].svc.Name != "a-svc" || got[1].svc.Name != "b-svc" {
		t.Errorf("servicesOf = %v", got)
	}
	c.RemoveService("default", "a-svc")
	if got := c.servicesOf(mkPod("p", podLabels("app", "web", "tier", "front"))); len(got) != 1 {
		t.Errorf("after removal: %d services", len(got))
	}
}

// eachMatchingPod finds the same pods through the label index as a scan.
func TestEachMatchingPod(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	c := NewCluster()
	c.SetNode(mkNode("n"))
	var pods []*api.Pod
	for i := range 200 {
		p := mkPod(fmt.Sprintf("p%d", i), podLabels("app", fmt.Sprintf("a%d", r.IntN(5)), "tier", fmt.Sprintf("t%d", r.IntN(3))), onNode("n"))
		if r.IntN(4) == 0 {
			delete(p.Labels, "tier")
		}
		pods = append(pods, p)
		if err := c.SetPod(p); err != nil {
			t.Fatal(err)
		}
	}
	selectors := []*api.LabelSelector{
		{MatchLabels: map[string]string{"app": "a1"}},
		{MatchLabels: map[string]string{"app": "a1", "tier": "t2"}},
		{MatchExpressions: []api.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"a1", "a3"}}, {Key: "tier", Operator: "NotIn", Values: []string{"t0"}}}},
		{MatchExpressions: []api.LabelSelectorRequirement{{Key: "tier", Operator: "DoesNotExist"}}},
		{MatchExpressions: []api.LabelSelectorRequirement{{Key: "tier", Operator: "Exists"}}},
		{},
		nil,
	}
	for i, ls := range selectors {
		sel, err := api.SelectorFromLabelSelector(ls)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, p := range pods {
			if sel.Matches(p.Labels) {
				want++
			}
		}
		got := 0
		c.eachMatchingPod([]string{"default", "missing"}, sel, func(*PodInfo) { got++ })
		if got != want {
			t.Errorf("selector %d: %d pods, want %d", i, got, want)
		}
	}
}

// Views follow node label changes: a placed pod's anti-affinity and a
// service's zone counts move with its node's new zone.
func TestViewsFollowRelabelling(t *testing.T) {
	anti := withAffinity(&api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term("zone", "app", "db")}}})
	nodes := []*api.Node{mkNode("a", nodeLabels("zone", "z1")), mkNode("b", nodeLabels("zone", "z2"))}
	c := newCluster(t, nodes, []*api.Pod{mkPod("db-0", podLabels("app", "db"), onNode("a"), anti)})
	s := newScheduler(t, nil)
	if node, err := schedule(t, s, c, mkPod("db-1", podLabels("app", "db"), anti)); err != nil || node != "b" {
		t.Fatalf("before relabelling: %q, %v; want b", node, err)
	}
	// Node a moves to zone z2 and b to z1: db-0's domain is now z2.
	c.SetNode(mkNode("a", nodeLabels("zone", "z2")))
	c.SetNode(mkNode("b", nodeLabels("zone", "z1")))
	if node, err := schedule(t, s, c, mkPod("db-1", podLabels("app", "db"), anti)); err != nil || node != "b" {
		t.Fatalf("after relabelling: %q, %v; want b, now the only node outside z2", node, err)
	}
	c.SetNode(mkNode("b", nodeLabels("zone", "z2")))
	if _, err := schedule(t, s, c, mkPod("db-1", podLabels("app", "db"), anti)); err == nil {
		t.Fatal("both nodes share db-0's zone, yet the pod was placed")
	}
	checkConsistent(t, c)
}

// The first pod of a service pins later ones (serviceAffinity); when it
// goes, the next oldest takes over.
func TestServiceAffinityFollowsOldestPod(t *testing.T) {
	nodes := []*api.Node{mkNode("r1", nodeLabels("region", "r1")), mkNode("r2", nodeLabels("region", "r2"))}
	old := mkPod("web-old", podLabels("app", "web"), onNode("r1"), func(p *api.Pod) { p.CreationTimestamp = api.NewTime(api.Time{}.AddDate(2020, 0, 0)) })
	young := mkPod("web-young", podLabels("app", "web"), onNode("r2"), func(p *api.Pod) { p.CreationTimestamp = api.NewTime(api.Time{}.AddDate(2021, 0, 0)) })
	c := newCluster(t, nodes, []*api.Pod{young, old}, mkService("web", "app", "web"))
	s := newScheduler(t, nil)
	for range 3 {
		if node, err := schedule(t, s, c, mkPod("web-new", podLabels("app", "web"))); err != nil || node != "r1" {
			t.Fatalf("got %q, %v; want r1, the oldest pod's region", node, err)
		}
	}
	c.RemovePod("default", "web-old")
	if node, err := schedule(t, s, c, mkPod("web-new", podLabels("app", "web"))); err != nil || node != "r2" {
		t.Fatalf("after the oldest pod went: %q, %v; want r2", node, err)
	}
	checkConsistent(t, c)
}

// Pods being deleted neither attract nor repel new ones.
func TestTerminatingPodsLeaveViews(t *testing.T) {
	anti := withAffinity(&api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term(LabelHostname, "app", "db")}}})
	c := newCluster(t, []*api.Node{mkNode("a")}, []*api.Pod{mkPod("db-0", podLabels("app", "db"), onNode("a"))})
	s := newScheduler(t, nil)
	if _, err := schedule(t, s, c, mkPod("db-1", podLabels("app", "db"), anti)); err == nil {
		t.Fatal("placed next to db-0")
	}
	if err := c.SetPod(mkPod("db-0", podLabels("app", "db"), onNode("a"), func(p *api.Pod) { p.DeletionTimestamp = api.NewTime(api.Time{}.AddDate(2020, 0, 0)) })); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule(t, s, c, mkPod("db-1", podLabels("app", "db"), anti)); err != nil {
		t.Fatalf("db-0 is being deleted, yet: %v", err)
	}
	checkConsistent(t, c)
}

// RefreshPod lets the cluster count a newer version of a pod (a status
// update) without deriving anything again, so the version it replaced can
// be collected; a pod of another UID is not touched.
func TestRefreshPod(t *testing.T) {
	c := NewCluster()
	c.SetNode(mkNode("n1", nodeAlloc("cpu", "4", "memory", "8Gi", "pods", "10")))
	bound := mkPod("p", onNode("n1"), podLabels("app", "web"), podRequest("cpu", "1"))
	bound.UID = "u1"
	if err := c.SetPod(bound); err != nil {
		t.Fatal(err)
	}
	running := *bound
	running.Status.Phase = api.PodRunning
	c.RefreshPod(&running)
	if got := c.podFor("default", "p").Pod(); got != &running {
		t.Errorf("the cluster counts %p after RefreshPod, want the newer version %p", got, &running)
	}
	other := running
	other.UID = "u2"
	c.RefreshPod(&other)
	if got := c.podFor("default", "p").Pod(); got != &running {
		t.Error("RefreshPod of another UID replaced the counted pod")
	}
	checkConsistent(t, c)
	if req := c.Node("n1").Requested(); req.MilliCPU != 1000 {
		t.Errorf("requested %+v after RefreshPod, want 1 CPU as before", req)
	}
}
