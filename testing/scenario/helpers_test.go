package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/testing/cluster"
)

var (
	podsR        = api.ResourceForKind("Pod")
	nodesR       = api.ResourceForKind("Node")
	eventsR      = api.ResourceForKind("Event")
	deploymentsR = api.ResourceForKind("Deployment")
)

// env is one in-process cluster and an admin client of its leader.
type env struct {
	t   *testing.T
	c   *cluster.Cluster
	cl  *client.Client
	ctx context.Context
}

func newEnv(t *testing.T, servers int, configure func(*server.Config)) *env {
	t.Helper()
	c := cluster.New(t, cluster.Options{Servers: servers, ControlLoops: true, Configure: configure})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	leader := c.WaitForLeader(ctx)
	return &env{t: t, c: c, cl: c.Client(leader), ctx: ctx}
}

// policyFile writes a scheduler policy and returns its path.
func policyFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) node(name string, labels map[string]string, taints ...api.Taint) {
	e.t.Helper()
	rl := api.ResourceList{"cpu": api.MustParseQuantity("4"), "memory": api.MustParseQuantity("32Gi"), "pods": api.MustParseQuantity("110")}
	l := map[string]string{"kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	n := &api.Node{
		ObjectMeta: api.ObjectMeta{Name: name, Labels: l},
		Spec:       api.NodeSpec{Taints: taints},
		Status: api.NodeStatus{Capacity: rl, Allocatable: rl,
			Conditions: []api.NodeCondition{{Type: "Ready", Status: "True", Reason: "KubeletReady"}}},
	}
	if _, _, err := e.cl.Create(e.ctx, n); err != nil {
		e.t.Fatalf("create node %s: %v", name, err)
	}
}

func newPod(name string, labels map[string]string) *api.Pod {
	return &api.Pod{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "app", Image: "registry.local/app:1",
			Resources: api.ResourceRequirements{Requests: api.ResourceList{"cpu": api.MustParseQuantity("100m"), "memory": api.MustParseQuantity("128Mi")}}}}},
	}
}

func (e *env) create(obj api.Object) {
	e.t.Helper()
	if _, _, err := e.cl.Create(e.ctx, obj); err != nil {
		e.t.Fatalf("create %s: %v", obj.GetObjectMeta().Name, err)
	}
}

// waitPod waits until pod default/name satisfies cond and returns it.
func (e *env) waitPod(name, what string, cond func(*api.Pod) bool) *api.Pod {
	e.t.Helper()
	var last *api.Pod
	e.waitFor(fmt.Sprintf("pod %s %s", name, what), func() bool {
		obj, err := e.cl.Get(e.ctx, podsR, "default", name, client.GetOptions{})
		if err != nil {
			return false
		}
		last = obj.(*api.Pod)
		return cond(last)
	}, func() string { return fmt.Sprintf("last seen: %+v", last) })
	return last
}

func bound(p *api.Pod) bool { return p.Spec.NodeName != "" }

// waitFor polls cond until it holds or 30 s pass.
func (e *env) waitFor(what string, cond func() bool, explain func() string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			if explain != nil {
				msg = explain()
			}
			e.t.Fatalf("timed out waiting for %s; %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not standing in for one
	}
}

func (e *env) nodeOf(name string) *api.Node {
	e.t.Helper()
	p := e.waitPod(name, "bound", bound)
	obj, err := e.cl.Get(e.ctx, nodesR, "", p.Spec.NodeName, client.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*api.Node)
}

// podEvents returns the events about pod default/name.
func (e *env) podEvents(name string) []*api.Event {
	e.t.Helper()
	objs, _, err := e.cl.List(e.ctx, eventsR, "default", client.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*api.Event
	for _, o := range objs {
		if ev := o.(*api.Event); ev.InvolvedObject.Name == name && ev.InvolvedObject.Kind == "Pod" {
			out = append(out, ev)
		}
	}
	return out
}

func scheduledCondition(p *api.Pod) *api.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == "PodScheduled" {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func joinCounts(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, " ")
}
