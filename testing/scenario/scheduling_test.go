package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
)

// SCH-4, SCH-7, SCH-8: with the seed's region affinity and zone spread,
// the first pod of a service lands anywhere, every later one in the same
// region, spread evenly over that region's zones.
func TestServiceAffinityPinsRegionAndSpreadsZones(t *testing.T) {
	pol := policyFile(t, `{"kind":"Policy","apiVersion":"v1",
 "predicates":[{"name":"GeneralPredicates"},{"name":"PodToleratesNodeTaints"},
   {"name":"Region","argument":{"serviceAffinity":{"labels":["region"]}}}],
 "priorities":[{"name":"LeastRequestedPriority","weight":1},
   {"name":"Zone","weight":2,"argument":{"serviceAntiAffinity":{"label":"zone"}}}]}`)
	e := newEnv(t, 1, func(c *server.Config) { c.Schedulers = map[string]string{api.DefaultSchedulerName: pol} })
	for _, r := range []string{"r1", "r2"} {
		for _, z := range []string{"a", "b"} {
			for i := range 2 {
				e.node(fmt.Sprintf("%s-%s-%d", r, z, i), map[string]string{"region": r, "zone": r + z})
			}
		}
	}
	e.create(&api.Service{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []api.ServicePort{{Port: 80}}}})
	region := ""
	zones := map[string]int{}
	for i := range 6 {
		name := fmt.Sprintf("web-%d", i)
		e.create(newPod(name, map[string]string{"app": "web"}))
		n := e.nodeOf(name)
		if region == "" {
			region = n.Labels["region"]
		}
		if n.Labels["region"] != region {
			t.Fatalf("pod %s went to region %s; the service's first pod is in %s", name, n.Labels["region"], region)
		}
		zones[n.Labels["zone"]]++
	}
	if len(zones) != 2 || zones[region+"a"] != 3 || zones[region+"b"] != 3 {
		t.Fatalf("pods per zone: %s; want 3 in each zone of %s", joinCounts(zones), region)
	}
}

// SCH-13: a pod that fits nowhere stays Pending with PodScheduled=False,
// reason Unschedulable, and a FailedScheduling event counting each
// predicate's rejections; it is placed once a node changes so it fits.
func TestUnschedulablePodSaysWhyAndIsRetried(t *testing.T) {
	e := newEnv(t, 1, nil)
	for i := range 3 {
		e.node(fmt.Sprintf("plain-%d", i), nil)
	}
	taint := api.Taint{Key: "dedicated", Value: "db", Effect: api.TaintEffectNoSchedule}
	for i := range 2 {
		e.node(fmt.Sprintf("ssd-%d", i), map[string]string{"disk": "ssd"}, taint)
	}
	p := newPod("picky", nil)
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	e.create(p)
	const want = "0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2)."
	got := e.waitPod("picky", "unschedulable", func(p *api.Pod) bool {
		c := scheduledCondition(p)
		return c != nil && c.Status == "False"
	})
	c := scheduledCondition(got)
	if c.Reason != "Unschedulable" || c.Message != want || got.Spec.NodeName != "" {
		t.Fatalf("PodScheduled = %+v, node %q; want Unschedulable %q", c, got.Spec.NodeName, want)
	}
	var evs []*api.Event
	e.waitFor("FailedScheduling event", func() bool {
		evs = e.podEvents("picky")
		return len(evs) > 0
	}, nil)
	if evs[0].Reason != "FailedScheduling" || evs[0].Message != want || evs[0].Type != "Warning" {
		t.Fatalf("event %+v; want Warning FailedScheduling %q", evs[0], want)
	}
	// Untaint one ssd node: the pod is retried and lands there.
	obj, err := e.cl.Get(e.ctx, nodesR, "", "ssd-1", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*api.Node)
	n.Spec.Taints = nil
	if _, _, err := e.cl.Update(e.ctx, n); err != nil {
		t.Fatal(err)
	}
	if got := e.waitPod("picky", "bound", bound); got.Spec.NodeName != "ssd-1" {
		t.Fatalf("bound to %s, want ssd-1 (the only ssd node without the taint)", got.Spec.NodeName)
	}
}

// SCH-11 with the Deployment controller: required anti-affinity on the
// host name spreads a deployment one pod per node; the replica that fits
// nowhere says so.
func TestDeploymentAntiAffinitySpreadsOnePerNode(t *testing.T) {
	e := newEnv(t, 1, nil)
	for i := range 3 {
		e.node(fmt.Sprintf("n%d", i), nil)
	}
	labels := map[string]string{"app": "cache"}
	tmpl := newPod("", labels)
	tmpl.Spec.Affinity = &api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{{
			LabelSelector: &api.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}}
	replicas := int32(4)
	e.create(&api.Deployment{
		ObjectMeta: api.ObjectMeta{Name: "cache", Namespace: "default"},
		Spec: api.DeploymentSpec{Replicas: &replicas, Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}},
	})
	var pods []*api.Pod
	e.waitFor("3 bound and 1 unschedulable pod", func() bool {
		objs, _, err := e.cl.List(e.ctx, podsR, "default", client.ListOptions{})
		if err != nil {
			return false
		}
		pods = pods[:0]
		nBound, nUnsched := 0, 0
		for _, o := range objs {
			p := o.(*api.Pod)
			pods = append(pods, p)
			if bound(p) {
				nBound++
			} else if c := scheduledCondition(p); c != nil && c.Reason == "Unschedulable" {
				nUnsched++
			}
		}
		return nBound == 3 && nUnsched == 1
	}, func() string { return fmt.Sprintf("%d pods", len(pods)) })
	nodes := map[string]bool{}
	for _, p := range pods {
		if bound(p) {
			if nodes[p.Spec.NodeName] {
				t.Fatalf("two pods of the deployment on %s", p.Spec.NodeName)
			}
			nodes[p.Spec.NodeName] = true
			continue
		}
		if c := scheduledCondition(p); !strings.HasPrefix(c.Message, "0/3 nodes are available: MatchInterPodAffinity (3)") {
			t.Fatalf("pending replica says %q", c.Message)
		}
	}
}

// SCH-12: a second scheduler with its own policy places only the pods
// that name it; a pod naming no running scheduler stays Pending until an
// outside program binds it through the binding API.
func TestSecondSchedulerAndOutsideScheduler(t *testing.T) {
	pol := policyFile(t, `{"kind":"Policy","apiVersion":"v1",
 "predicates":[{"name":"GeneralPredicates"},
   {"name":"GpuOnly","argument":{"labelsPresence":{"labels":["gpu"],"presence":true}}}],
 "priorities":[{"name":"LeastRequestedPriority","weight":1}]}`)
	e := newEnv(t, 1, func(c *server.Config) {
		c.Schedulers = map[string]string{api.DefaultSchedulerName: "", "gpu-scheduler": pol}
	})
	e.node("cpu-0", nil)
	e.node("gpu-0", map[string]string{"gpu": "true"})
	for i := range 4 {
		p := newPod(fmt.Sprintf("gpu-%d", i), nil)
		p.Spec.SchedulerName = "gpu-scheduler"
		e.create(p)
	}
	for i := range 4 {
		if n := e.waitPod(fmt.Sprintf("gpu-%d", i), "bound", bound).Spec.NodeName; n != "gpu-0" {
			t.Fatalf("gpu-scheduler put gpu-%d on %s", i, n)
		}
	}
	outside := newPod("outside", nil)
	outside.Spec.SchedulerName = "my-own-scheduler"
	e.create(outside)
	// The default scheduler has had the chance to take it: a pod created
	// after it is bound first.
	e.create(newPod("after", nil))
	e.waitPod("after", "bound", bound)
	if p := e.waitPod("outside", "read", func(*api.Pod) bool { return true }); bound(p) {
		t.Fatalf("a pod naming my-own-scheduler was bound to %s by a scheduler that is not it", p.Spec.NodeName)
	}
	if err := e.cl.Bind(e.ctx, "default", "outside", "cpu-0"); err != nil {
		t.Fatalf("outside scheduler's binding: %v", err)
	}
	if n := e.waitPod("outside", "bound", bound).Spec.NodeName; n != "cpu-0" {
		t.Fatalf("outside pod on %s", n)
	}
}

// The schedulers run on the leader only: when it stops, the new leader's
// scheduler places the pods created after.
func TestSchedulerMovesWithLeadership(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.node("n0", nil)
	e.create(newPod("before", nil))
	e.waitPod("before", "bound", bound)
	old := e.c.Leader()
	e.c.Stop(old)
	leader := e.c.WaitForLeader(e.ctx)
	e.cl = e.c.Client(leader)
	e.create(newPod("after", nil))
	if n := e.waitPod("after", "bound", bound).Spec.NodeName; n != "n0" {
		t.Fatalf("bound to %q", n)
	}
}

// The policy in force lives in the replicated store (issue 9 item 9): a
// failover to a server whose own policy file differs does not change how
// pods are placed. s1 puts a gpu-only policy in force with a reload; s2
// and s3 run with the default policy file; after s1 stops, the next
// leader still places pods on the gpu node only.
func TestSchedulerPolicySurvivesFailover(t *testing.T) {
	pol := policyFile(t, `{"kind":"Policy","apiVersion":"v1",
 "predicates":[{"name":"GeneralPredicates"},
   {"name":"GpuOnly","argument":{"labelsPresence":{"labels":["gpu"],"presence":true}}}],
 "priorities":[{"name":"LeastRequestedPriority","weight":1}]}`)
	e := newEnv(t, 3, func(c *server.Config) {
		if c.ID == "s1" {
			c.Schedulers = map[string]string{api.DefaultSchedulerName: pol}
		}
	})
	s1 := e.c.Members[0]
	if err := s1.Server.ReloadSchedulers(); err != nil {
		t.Fatal(err)
	}
	obj, err := e.cl.Get(e.ctx, api.ResourceForKind("SchedulerPolicy"), "", api.DefaultSchedulerName, client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sp := obj.(*api.SchedulerPolicy); !strings.Contains(sp.Spec.Policy, "GpuOnly") || sp.Spec.Source != "s1:"+pol {
		t.Fatalf("policy in force after s1's reload: %+v", sp.Spec)
	}
	e.node("cpu-0", nil)
	e.node("gpu-0", map[string]string{"gpu": "true"})
	e.create(newPod("before", nil))
	if n := e.waitPod("before", "bound", bound).Spec.NodeName; n != "gpu-0" {
		t.Fatalf("before the failover: bound to %s", n)
	}
	e.c.Stop(s1)
	e.cl = e.c.Client(e.c.WaitForLeader(e.ctx))
	for i := range 4 {
		e.create(newPod(fmt.Sprintf("after-%d", i), nil))
	}
	for i := range 4 {
		if n := e.waitPod(fmt.Sprintf("after-%d", i), "bound", bound).Spec.NodeName; n != "gpu-0" {
			t.Fatalf("after the failover: after-%d bound to %s: the new leader used its own policy", i, n)
		}
	}
}

// A policy written through the API that does not parse is refused with
// every problem under spec.policy, so it can never be in force.
func TestSchedulerPolicyRefusedByPath(t *testing.T) {
	e := newEnv(t, 1, nil)
	bad := &api.SchedulerPolicy{ObjectMeta: api.ObjectMeta{Name: "broken"},
		Spec: api.SchedulerPolicySpec{Policy: `{"kind":"Policy","predicates":[{"name":"NoSuchPredicate"}],"priorities":[{"name":"LeastRequestedPriority","weight":0}]}`}}
	_, _, err := e.cl.Create(e.ctx, bad)
	se, ok := errors.AsType[*api.StatusError](err)
	if !ok || se.Status.Code != 422 {
		t.Fatalf("create a bad policy: %v", err)
	}
	var fields []string
	for _, c := range se.Status.Details.Causes {
		fields = append(fields, c.Field)
	}
	if !slices.Contains(fields, "spec.policy.predicates[0].name") || !slices.Contains(fields, "spec.policy.priorities[0].weight") {
		t.Fatalf("causes %v, want spec.policy.predicates[0].name and spec.policy.priorities[0].weight; %v", fields, err)
	}
}
