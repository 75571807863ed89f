package scenario

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/sim"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// `outpost drain` (issue 10 item 7, "How it is checked"): a node with a
// deployment, a daemon set and a budget that allows one disruption. The
// node is cordoned; the deployment's pods leave one at a time, as the
// budget allows (a 429 is retried); the daemon set's pod stays; uncordon
// lets pods back. A pod without a controller stops drain without --force;
// an unknown node is a clear error.
func TestDrain(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.simNodes(map[string]map[string]string{"n1": nil, "n2": nil})

	// Everything on n1 first: n2 cordoned until the workloads run.
	if _, _, code := e.outpost("cordon", "n2"); code != 0 {
		t.Fatal("cordon n2")
	}
	three := int32(3)
	labels := map[string]string{"app": "web"}
	e.create(&api.Deployment{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.DeploymentSpec{Replicas: &three, Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: labels}, Spec: newPod("x", nil).Spec}}})
	dsLabels := map[string]string{"app": "agent"}
	e.create(&api.DaemonSet{ObjectMeta: api.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: api.DaemonSetSpec{Selector: &api.LabelSelector{MatchLabels: dsLabels},
			Template: api.PodTemplateSpec{ObjectMeta: api.ObjectMeta{Labels: dsLabels}, Spec: newPod("x", nil).Spec}}})
	maxOne := api.FromInt(1)
	e.create(&api.PodDisruptionBudget{ObjectMeta: api.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: api.PodDisruptionBudgetSpec{MaxUnavailable: &maxOne, Selector: &api.LabelSelector{MatchLabels: labels}}})
	lone := newPod("lone", nil)
	lone.Spec.NodeName = "n1"
	e.create(lone)
	e.waitFor("3 web pods, the daemon pod and lone running on n1", func() bool {
		return len(e.running("n1", "app=web")) == 3 && len(e.running("n1", "app=agent")) == 1
	}, func() string { return fmt.Sprint(e.running("n1", "")) })
	if _, _, code := e.outpost("uncordon", "n2"); code != 0 {
		t.Fatal("uncordon n2")
	}
	e.waitFor("get pdb shows 1 allowed disruption", func() bool {
		out, _, _ := e.outpost("get", "pdb")
		return strings.Contains(out, "MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS") && strings.Contains(out, "web    N/A             1                 1")
	}, func() string { out, _, _ := e.outpost("get", "pdb"); return out })

	// Unknown node; a pod without a controller; the daemon set's pod.
	if _, stderr, code := e.outpost("drain", "nosuch"); code == 0 || !strings.Contains(stderr, `nodes "nosuch" not found`) {
		t.Fatalf("drain of an unknown node: exit %d, stderr %q", code, stderr)
	}
	out, stderr, code := e.outpost("drain", "n1")
	if code == 0 || !strings.Contains(stderr, "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/agent-") ||
		!strings.Contains(stderr, "cannot delete Pods that declare no controller (use --force to override): default/lone") ||
		!strings.Contains(out, "node/n1 cordoned") {
		t.Fatalf("drain without flags: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	if got := e.running("n1", "app=web"); len(got) != 3 {
		t.Fatalf("a refused drain evicted pods: web on n1 %v", got)
	}

	// --pod-selector: only matching pods count, so neither the lone pod
	// nor the daemon set's stops a drain that selects none of them.
	if out, stderr, code := e.outpost("drain", "n1", "--pod-selector", "app=nothing-here"); code != 0 || !strings.Contains(out, "node/n1 drained") {
		t.Fatalf("drain --pod-selector matching nothing: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	if got := e.running("n1", "app=web"); len(got) != 3 {
		t.Fatalf("drain --pod-selector app=nothing-here evicted pods: web on n1 %v", got)
	}

	// The drain: one web pod at a time (maxUnavailable 1).
	done := make(chan struct{})
	most := 0
	sctx, stopSampling := context.WithCancel(e.ctx)
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			ps, _, err := e.cl.List(sctx, podsR, "default", client.ListOptions{LabelSelector: "app=web"})
			if err == nil {
				down := 0
				for _, o := range ps {
					if !api.PodHealthy(o.(*api.Pod)) {
						down++
					}
				}
				// Pods not counted as gone yet stand for themselves; the
				// replicas the budget knows are 3.
				if missing := 3 - (len(ps) - down); missing > most {
					most = missing
				}
			}
			select {
			case <-sctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	out, stderr, code = e.outpost("drain", "n1", "--ignore-daemonsets", "--force", "--timeout", "60s", "--eviction-retry-interval", "200ms")
	stopSampling()
	<-done
	if code != 0 {
		t.Fatalf("drain: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	for _, want := range []string{"evicting pod default/web-", "evicted", "node/n1 drained"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "Warning: ignoring DaemonSet-managed Pods") || !strings.Contains(stderr, "would violate the pod's disruption budget") {
		t.Errorf("drain's stderr lacks the daemon set warning or a budget's refusal:\n%s", stderr)
	}
	if most > 1 {
		t.Errorf("%d web pods were unavailable at once; the budget allows 1", most)
	}
	if got := e.running("n1", "app=web"); len(got) != 0 {
		t.Errorf("after drain: web on n1 %v", got)
	}
	e.waitFor("3 web pods running on n2", func() bool { return len(e.running("n2", "app=web")) == 3 },
		func() string {
			ps, _, _ := e.cl.List(e.ctx, podsR, "default", client.ListOptions{LabelSelector: "app=web"})
			var s []string
			for _, o := range ps {
				p := o.(*api.Pod)
				s = append(s, fmt.Sprintf("%s@%s %s del=%v %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp, p.Status.Conditions))
			}
			rs, _, _ := e.cl.List(e.ctx, api.ResourceForKind("ReplicaSet"), "default", client.ListOptions{})
			for _, o := range rs {
				s = append(s, fmt.Sprintf("rs %s %+v", o.GetObjectMeta().Name, o.(*api.ReplicaSet).Status))
			}
			return strings.Join(s, "\n")
		})
	if len(e.running("n1", "app=agent")) != 1 {
		t.Error("the daemon set's pod left the drained node")
	}
	if !e.unschedulable("n1") {
		t.Error("the drained node is not cordoned")
	}
	if _, _, code := e.outpost("uncordon", "n1"); code != 0 || e.unschedulable("n1") {
		t.Fatal("uncordon n1")
	}
}

// simNodes runs simulated agents (heartbeat 200 ms) for nodes of 4 CPU,
// 8Gi and 50 pods, named as the keys, with the labels given (and
// kubernetes.io/hostname), until the test ends.
func (e *env) simNodes(nodes map[string]map[string]string) {
	e.t.Helper()
	rl := api.ResourceList{"cpu": api.MustParseQuantity("4"), "memory": api.MustParseQuantity("8Gi"), "pods": api.MustParseQuantity("50")}
	var tmpls []*api.Node
	for name, labels := range nodes {
		l := map[string]string{"kubernetes.io/hostname": name}
		maps.Copy(l, labels)
		tmpls = append(tmpls, &api.Node{ObjectMeta: api.ObjectMeta{Name: name, Labels: l}, Status: api.NodeStatus{Capacity: rl, Allocatable: rl}})
	}
	ctx, cancel := context.WithCancel(e.ctx)
	agents, err := sim.Start(ctx, sim.Config{Client: e.c.Leader().Server.AdminConfig(), Nodes: tmpls, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { agents.Stop(); cancel() })
}

// running lists the pods of node (matching selector) that run, by name.
func (e *env) running(node, selector string) []string {
	ps, _, err := e.cl.List(e.ctx, podsR, "", client.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range ps {
		if p := o.(*api.Pod); p.Status.Phase == api.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

func (e *env) unschedulable(node string) bool {
	obj, err := e.cl.Get(e.ctx, api.ResourceForKind("Node"), "", node, client.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*api.Node).Spec.Unschedulable
}
