package scheduler

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

type nodeOpt func(*api.Node)

// mkNode makes a Ready node shaped like scheduler_perf's: 4 CPU, 32Gi,
// 110 pods.
func mkNode(name string, opts ...nodeOpt) *api.Node {
	n := &api.Node{ObjectMeta: api.ObjectMeta{Name: name}}
	n.Status.Allocatable = api.ResourceList{
		api.ResourceCPU:    api.MustParseQuantity("4"),
		api.ResourceMemory: api.MustParseQuantity("32Gi"),
		api.ResourcePods:   api.MustParseQuantity("110"),
	}
	n.Status.Conditions = []api.NodeCondition{{Type: api.NodeReady, Status: api.ConditionTrue}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nodeLabels(kv ...string) nodeOpt {
	return func(n *api.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nodeTaints(ts ...api.Taint) nodeOpt {
	return func(n *api.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func nodeCondition(typ, status string) nodeOpt {
	return func(n *api.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == typ {
				n.Status.Conditions[i].Status = status
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, api.NodeCondition{Type: typ, Status: status})
	}
}

func nodeAlloc(kv ...string) nodeOpt {
	return func(n *api.Node) {
		n.Status.Allocatable = api.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Status.Allocatable[kv[i]] = api.MustParseQuantity(kv[i+1])
		}
	}
}

func cordoned(n *api.Node) { n.Spec.Unschedulable = true }

func nodeImages(size int64, names ...string) nodeOpt {
	return func(n *api.Node) {
		n.Status.Images = append(n.Status.Images, api.ContainerImage{Names: names, SizeBytes: size})
	}
}

func nodeAnnotation(k, v string) nodeOpt {
	return func(n *api.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

type podOpt func(*api.Pod)

// mkPod makes a pod in namespace "default" with one container.
func mkPod(name string, opts ...podOpt) *api.Pod {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	p.Spec.Containers = []api.Container{{Name: "c", Image: "docker.io/ocpqe/hello-pod"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func podLabels(kv ...string) podOpt {
	return func(p *api.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func podRequest(kv ...string) podOpt {
	return func(p *api.Pod) {
		rl := api.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			rl[kv[i]] = api.MustParseQuantity(kv[i+1])
		}
		p.Spec.Containers[0].Resources.Requests = rl
	}
}

func onNode(name string) podOpt { return func(p *api.Pod) { p.Spec.NodeName = name } }

func inNamespace(ns string) podOpt { return func(p *api.Pod) { p.Namespace = ns } }

func nodeSelector(kv ...string) podOpt {
	return func(p *api.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func tolerations(ts ...api.Toleration) podOpt {
	return func(p *api.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

func hostPorts(ports ...api.ContainerPort) podOpt {
	return func(p *api.Pod) { p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, ports...) }
}

func withAffinity(a *api.Affinity) podOpt { return func(p *api.Pod) { p.Spec.Affinity = a } }

func ownedBy(kind, uid string) podOpt {
	yes := true
	return func(p *api.Pod) {
		p.OwnerReferences = []api.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "owner-" + uid, UID: uid, Controller: &yes}}
	}
}

func images(imgs ...string) podOpt {
	return func(p *api.Pod) {
		p.Spec.Containers = nil
		for i, img := range imgs {
			p.Spec.Containers = append(p.Spec.Containers, api.Container{Name: string(rune('a' + i)), Image: img})
		}
	}
}

func mkService(name string, kv ...string) *api.Service {
	s := &api.Service{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"}}
	s.Spec.Selector = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Spec.Selector[kv[i]] = kv[i+1]
	}
	return s
}

// term is a pod affinity term: labelSelector key In values, on topology.
func term(topology, key string, values ...string) api.PodAffinityTerm {
	return api.PodAffinityTerm{
		LabelSelector: &api.LabelSelector{MatchExpressions: []api.LabelSelectorRequirement{{Key: key, Operator: api.OpIn, Values: values}}},
		TopologyKey:   topology,
	}
}

// newCluster builds a cluster of nodes, placed pods and services.
func newCluster(t testing.TB, nodes []*api.Node, pods []*api.Pod, svcs ...*api.Service) *Cluster {
	t.Helper()
	c := NewCluster()
	for _, n := range nodes {
		c.SetNode(n)
	}
	for _, p := range pods {
		if err := c.SetPod(p); err != nil {
			t.Fatalf("SetPod(%s): %v", p.Name, err)
		}
	}
	for _, s := range svcs {
		c.SetService(s)
	}
	return c
}

// predicatesPolicy enables the named predicates and one neutral priority.
func predicatesPolicy(preds ...policy.Predicate) *policy.Policy {
	return &policy.Policy{Kind: policy.Kind, Predicates: preds, Priorities: []policy.Priority{{Name: policy.EqualPriority, Weight: 1}}}
}

func named(names ...string) []policy.Predicate {
	out := make([]policy.Predicate, len(names))
	for i, n := range names {
		out[i] = policy.Predicate{Name: n}
	}
	return out
}

func newScheduler(t testing.TB, p *policy.Policy) *Scheduler {
	t.Helper()
	s, err := New(Config{Policy: p, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// schedule runs one cycle and returns the node or the error.
func schedule(t testing.TB, s *Scheduler, c *Cluster, pod *api.Pod) (string, error) {
	t.Helper()
	res, err := s.Schedule(context.Background(), c, pod)
	return res.Node, err
}

func ptr[T any](v T) *T { return &v }
