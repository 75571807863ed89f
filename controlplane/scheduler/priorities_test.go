package scheduler

import (
	"context"
	"maps"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

type priorityCase struct {
	name     string
	prio     policy.Priority
	nodes    []*api.Node
	existing []*api.Pod
	services []*api.Service
	pod      *api.Pod
	want     map[string]int64 // node → 0–10 score
}

func runPriorityCases(t *testing.T, cases []priorityCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prio.Weight == 0 {
				tc.prio.Weight = 1
			}
			s := newScheduler(t, &policy.Policy{Kind: policy.Kind, Priorities: []policy.Priority{tc.prio}})
			c := newCluster(t, tc.nodes, tc.existing, tc.services...)
			names := make([]string, len(tc.nodes))
			for i, n := range tc.nodes {
				names[i] = n.Name
			}
			got, err := s.Scores(c, tc.pod, names)
			if err != nil {
				t.Fatal(err)
			}
			scores := map[string]int64{}
			for _, ns := range got {
				scores[ns.Node] = ns.Scores[tc.prio.Name]
				if ns.Total != ns.Scores[tc.prio.Name]*tc.prio.Weight {
					t.Errorf("%s: total %d is not score × weight", ns.Node, ns.Total)
				}
			}
			if !maps.Equal(scores, tc.want) {
				t.Errorf("scores = %v, want %v", scores, tc.want)
			}
		})
	}
}

func prio(name string) policy.Priority { return policy.Priority{Name: name, Weight: 1} }

func TestResourcePriorities(t *testing.T) {
	busy := mkPod("e", onNode("busy"), podRequest("cpu", "1", "memory", "8Gi"))
	nodes := func() []*api.Node { return []*api.Node{mkNode("busy"), mkNode("empty")} }
	pod := mkPod("p", podRequest("cpu", "1", "memory", "8Gi"))
	memHeavy := mkPod("e", onNode("busy"), podRequest("cpu", "0", "memory", "8Gi"))
	runPriorityCases(t, []priorityCase{
		// busy: cpu (4000-2000)*10/4000 = 5, memory (32-16)*10/32 = 5.
		// empty: cpu 3000*10/4000 = 7, memory 24*10/32 = 7.
		{name: "least requested", prio: prio(policy.LeastRequestedPriority), nodes: nodes(), existing: []*api.Pod{busy}, pod: pod, want: map[string]int64{"busy": 5, "empty": 7}},
		{name: "most requested", prio: prio(policy.MostRequestedPriority), nodes: nodes(), existing: []*api.Pod{busy}, pod: pod, want: map[string]int64{"busy": 5, "empty": 2}},
		// Without requests a pod counts as 100m and 200Mi:
		// cpu 3900*10/4000 = 9, memory (32768-200)*10/32768 = 9.
		{name: "least requested, no requests", prio: prio(policy.LeastRequestedPriority), nodes: []*api.Node{mkNode("empty")}, pod: mkPod("p"), want: map[string]int64{"empty": 9}},
		// busy: cpu 1/4, memory 16/32 → 10*(1-0.25) = 7; empty: 1/4 and
		// 8/32 → 10.
		{name: "balanced", prio: prio(policy.BalancedResourceAllocation), nodes: nodes(), existing: []*api.Pod{memHeavy}, pod: pod, want: map[string]int64{"busy": 7, "empty": 10}},
		{name: "balanced, full node", prio: prio(policy.BalancedResourceAllocation), nodes: []*api.Node{mkNode("busy")}, existing: []*api.Pod{memHeavy}, pod: mkPod("p", podRequest("cpu", "1", "memory", "24Gi")), want: map[string]int64{"busy": 0}},
		{name: "least requested, over capacity", prio: prio(policy.LeastRequestedPriority), nodes: []*api.Node{mkNode("n", nodeAlloc("cpu", "1", "memory", "1Gi", "pods", "10"))}, pod: mkPod("p", podRequest("cpu", "2", "memory", "512Mi")), want: map[string]int64{"n": 2}},
	})
}

func TestSpreadPriorities(t *testing.T) {
	web := func(name, node string, opts ...podOpt) *api.Pod {
		return mkPod(name, append(opts, podLabels("app", "web"), onNode(node))...)
	}
	svc := mkService("web", "app", "web")
	flat := func() []*api.Node { return []*api.Node{mkNode("a"), mkNode("b"), mkNode("c")} }
	zoned := func() []*api.Node {
		return []*api.Node{mkNode("a", nodeLabels(LabelZone, "z1")), mkNode("b", nodeLabels(LabelZone, "z1")), mkNode("c", nodeLabels(LabelZone, "z2"))}
	}
	existing := []*api.Pod{web("w1", "a"), web("w2", "a"), web("w3", "b")}
	pod := mkPod("p", podLabels("app", "web"))
	runPriorityCases(t, []priorityCase{
		// most = 2: a 0, b 10*(2-1)/2 = 5, c 10.
		{name: "selector spread over nodes", prio: prio(policy.SelectorSpreadPriority), nodes: flat(), existing: existing, services: []*api.Service{svc}, pod: pod, want: map[string]int64{"a": 0, "b": 5, "c": 10}},
		// zones z1 = 3, z2 = 0: b = 5/3 + 0 = 1, c = 10/3 + 20/3 = 10.
		{name: "selector spread over zones", prio: prio(policy.SelectorSpreadPriority), nodes: zoned(), existing: existing, services: []*api.Service{svc}, pod: pod, want: map[string]int64{"a": 0, "b": 1, "c": 10}},
		{name: "no service, no controller: all equal", prio: prio(policy.SelectorSpreadPriority), nodes: flat(), existing: existing, pod: mkPod("p"), want: map[string]int64{"a": 10, "b": 10, "c": 10}},
		{name: "selector spread counts the controller's pods", prio: prio(policy.SelectorSpreadPriority), nodes: flat(),
			existing: []*api.Pod{mkPod("r1", onNode("a"), ownedBy("ReplicaSet", "rs1")), mkPod("r2", onNode("b"), ownedBy("ReplicaSet", "rs2"))},
			pod:      mkPod("p", ownedBy("ReplicaSet", "rs1")), want: map[string]int64{"a": 0, "b": 10, "c": 10}},
		{name: "service spreading ignores controllers", prio: prio(policy.ServiceSpreadingPriority), nodes: flat(),
			existing: []*api.Pod{mkPod("r1", onNode("a"), ownedBy("ReplicaSet", "rs1"))},
			pod:      mkPod("p", ownedBy("ReplicaSet", "rs1")), want: map[string]int64{"a": 10, "b": 10, "c": 10}},
		{name: "service spreading", prio: prio(policy.ServiceSpreadingPriority), nodes: flat(), existing: existing, services: []*api.Service{svc}, pod: pod, want: map[string]int64{"a": 0, "b": 5, "c": 10}},
		{name: "a pod in both a service and a controller counts once", prio: prio(policy.SelectorSpreadPriority), nodes: flat(),
			existing: []*api.Pod{web("w1", "a", ownedBy("ReplicaSet", "rs1")), web("w2", "b")}, services: []*api.Service{svc},
			pod: mkPod("p", podLabels("app", "web"), ownedBy("ReplicaSet", "rs1")), want: map[string]int64{"a": 0, "b": 0, "c": 10}},
	})
}

func TestServiceAntiAffinityPriority(t *testing.T) {
	zone := policy.Priority{Name: "Zone", Weight: 2, Argument: &policy.PriorityArgument{ServiceAntiAffinity: &policy.ServiceAntiAffinity{Label: "zone"}}}
	nodes := []*api.Node{
		mkNode("a", nodeLabels("zone", "z1")), mkNode("a2", nodeLabels("zone", "z1")),
		mkNode("b", nodeLabels("zone", "z2")), mkNode("c", nodeLabels("zone", "z3")), mkNode("d"),
	}
	web := func(name, node string) *api.Pod { return mkPod(name, podLabels("app", "web"), onNode(node)) }
	svc := mkService("web", "app", "web")
	runPriorityCases(t, []priorityCase{
		// 3 pods: z1 has 2 → 10*(3-2)/3 = 3; z2 has 1 → 6; z3 none → 10;
		// a node without the label → 0.
		{name: "spread over zones", prio: zone, nodes: nodes, existing: []*api.Pod{web("w1", "a"), web("w2", "a2"), web("w3", "b")}, services: []*api.Service{svc},
			pod: mkPod("p", podLabels("app", "web")), want: map[string]int64{"a": 3, "a2": 3, "b": 6, "c": 10, "d": 0}},
		{name: "first pod", prio: zone, nodes: nodes, services: []*api.Service{svc},
			pod: mkPod("p", podLabels("app", "web")), want: map[string]int64{"a": 10, "a2": 10, "b": 10, "c": 10, "d": 0}},
	})
}

func TestLabelPreferenceAndEqual(t *testing.T) {
	lp := func(presence bool) policy.Priority {
		return policy.Priority{Name: "ZonePreferred", Weight: 1, Argument: &policy.PriorityArgument{LabelPreference: &policy.LabelPreference{Label: "zone", Presence: presence}}}
	}
	nodes := []*api.Node{mkNode("a", nodeLabels("zone", "z1")), mkNode("b")}
	runPriorityCases(t, []priorityCase{
		{name: "prefer present", prio: lp(true), nodes: nodes, pod: mkPod("p"), want: map[string]int64{"a": 10, "b": 0}},
		{name: "prefer absent", prio: lp(false), nodes: nodes, pod: mkPod("p"), want: map[string]int64{"a": 0, "b": 10}},
		{name: "equal", prio: prio(policy.EqualPriority), nodes: nodes, pod: mkPod("p"), want: map[string]int64{"a": 1, "b": 1}},
	})
}

func TestAffinityPriorities(t *testing.T) {
	pref := func(key, op string, w int32, values ...string) api.PreferredSchedulingTerm {
		return api.PreferredSchedulingTerm{Weight: w, Preference: api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr(key, op, values...)}}}
	}
	nodePref := func(terms ...api.PreferredSchedulingTerm) podOpt {
		return withAffinity(&api.Affinity{NodeAffinity: &api.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: terms}})
	}
	ew := []*api.Node{mkNode("east", nodeLabels("e2e-az-EastWest", "e2e-az-East")), mkNode("west", nodeLabels("e2e-az-EastWest", "e2e-az-West")), mkNode("none")}
	hosts := []*api.Node{mkNode("a"), mkNode("b")}
	s2 := mkPod("security-s2", podLabels("security", "S2"), onNode("a"))
	s1 := mkPod("security-s1", podLabels("security", "S1"), onNode("a"))
	weighted := func(w int32, t api.PodAffinityTerm) api.WeightedPodAffinityTerm {
		return api.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: t}
	}
	runPriorityCases(t, []priorityCase{
		// Seed 000 14.6.2: prefer e2e-az-East or e2e-az-West, weight 1.
		{name: "node affinity: seed preferred rule", prio: prio(policy.NodeAffinityPriority), nodes: ew,
			pod: mkPod("with-node-affinity", nodePref(pref("e2e-az-EastWest", "In", 1, "e2e-az-East", "e2e-az-West"))), want: map[string]int64{"east": 10, "west": 10, "none": 0}},
		{name: "node affinity: weights add up", prio: prio(policy.NodeAffinityPriority), nodes: ew,
			pod:  mkPod("p", nodePref(pref("e2e-az-EastWest", "In", 1, "e2e-az-East", "e2e-az-West"), pref("e2e-az-EastWest", "In", 3, "e2e-az-East"))),
			want: map[string]int64{"east": 10, "west": 2, "none": 0}},
		// Seed 000 14.7.2: anti-affinity, weight 100, to security=S2 on the
		// host.
		{name: "pod anti-affinity: seed preferred rule", prio: prio(policy.InterPodAffinityPriority), nodes: hosts, existing: []*api.Pod{s2},
			pod:  mkPod("with-pod-antiaffinity", withAffinity(&api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.WeightedPodAffinityTerm{weighted(100, term(LabelHostname, "security", "S2"))}}})),
			want: map[string]int64{"a": 0, "b": 10}},
		{name: "pod affinity: preferred", prio: prio(policy.InterPodAffinityPriority), nodes: hosts, existing: []*api.Pod{s1},
			pod:  mkPod("p", withAffinity(&api.Affinity{PodAffinity: &api.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.WeightedPodAffinityTerm{weighted(50, term(LabelHostname, "security", "S1"))}}})),
			want: map[string]int64{"a": 10, "b": 0}},
		{name: "pod affinity: the placed pod's preferred term", prio: prio(policy.InterPodAffinityPriority), nodes: hosts,
			existing: []*api.Pod{mkPod("e", onNode("b"), withAffinity(&api.Affinity{PodAffinity: &api.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.WeightedPodAffinityTerm{weighted(5, term(LabelHostname, "app", "web"))}}}))},
			pod:      mkPod("p", podLabels("app", "web")), want: map[string]int64{"a": 0, "b": 10}},
		{name: "pod affinity: the placed pod's required term, symmetric weight", prio: prio(policy.InterPodAffinityPriority), nodes: hosts,
			existing: []*api.Pod{mkPod("e", onNode("b"), withAffinity(&api.Affinity{PodAffinity: &api.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term(LabelHostname, "app", "web")}}}))},
			pod:      mkPod("p", podLabels("app", "web")), want: map[string]int64{"a": 0, "b": 10}},
		{name: "pod affinity: nothing to prefer", prio: prio(policy.InterPodAffinityPriority), nodes: hosts, existing: []*api.Pod{s1}, pod: mkPod("p"), want: map[string]int64{"a": 0, "b": 0}},
	})
}

func TestTaintAndAvoidPriorities(t *testing.T) {
	pns := func(k string) api.Taint { return api.Taint{Key: k, Effect: api.TaintEffectPreferNoSchedule} }
	nodes := func() []*api.Node {
		return []*api.Node{mkNode("clean"), mkNode("one", nodeTaints(pns("disktype"))), mkNode("two", nodeTaints(pns("disktype"), pns("gpu"), api.Taint{Key: "x", Effect: "NoSchedule"}))}
	}
	avoid := `{"preferAvoidPods":[{"podSignature":{"podController":{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"foo","uid":"rs1","controller":true}},"reason":"maintenance"}]}`
	avoidNodes := []*api.Node{mkNode("avoid", nodeAnnotation(AnnotationPreferAvoid, avoid)), mkNode("ok"), mkNode("garbled", nodeAnnotation(AnnotationPreferAvoid, "{not json"))}
	runPriorityCases(t, []priorityCase{
		{name: "taint toleration", prio: prio(policy.TaintTolerationPriority), nodes: nodes(), pod: mkPod("p"), want: map[string]int64{"clean": 10, "one": 5, "two": 0}},
		{name: "taint toleration, one tolerated", prio: prio(policy.TaintTolerationPriority), nodes: nodes(),
			pod: mkPod("p", tolerations(api.Toleration{Key: "gpu", Operator: "Exists", Effect: "PreferNoSchedule"})), want: map[string]int64{"clean": 10, "one": 0, "two": 0}},
		{name: "taint toleration, NoSchedule tolerations do not count", prio: prio(policy.TaintTolerationPriority), nodes: nodes(),
			pod: mkPod("p", tolerations(api.Toleration{Key: "disktype", Operator: "Exists", Effect: "NoSchedule"})), want: map[string]int64{"clean": 10, "one": 5, "two": 0}},
		{name: "prefer avoid: the named ReplicaSet", prio: prio(policy.NodePreferAvoidPodsPriority), nodes: avoidNodes, pod: mkPod("p", ownedBy("ReplicaSet", "rs1")), want: map[string]int64{"avoid": 0, "ok": 10, "garbled": 10}},
		{name: "prefer avoid: another ReplicaSet", prio: prio(policy.NodePreferAvoidPodsPriority), nodes: avoidNodes, pod: mkPod("p", ownedBy("ReplicaSet", "rs2")), want: map[string]int64{"avoid": 10, "ok": 10, "garbled": 10}},
		{name: "prefer avoid: other controllers are ignored", prio: prio(policy.NodePreferAvoidPodsPriority), nodes: avoidNodes, pod: mkPod("p", ownedBy("StatefulSet", "rs1")), want: map[string]int64{"avoid": 10, "ok": 10, "garbled": 10}},
	})
}

func TestImageLocality(t *testing.T) {
	const mi = 1024 * 1024
	nodes := []*api.Node{
		mkNode("has", nodeImages(500*mi, "docker.io/ocpqe/hello-pod:latest", "docker.io/ocpqe/hello-pod@sha256:abc")),
		mkNode("small", nodeImages(10*mi, "docker.io/library/busybox:latest")),
		mkNode("none"),
	}
	runPriorityCases(t, []priorityCase{
		// One node of three has it: 500Mi/3 ≈ 167Mi → 10*(167-23)/(1000-23) = 1.
		{name: "image present on one node of three", prio: prio(policy.ImageLocalityPriority), nodes: nodes, pod: mkPod("p", images("ocpqe/hello-pod")), want: map[string]int64{"has": 1, "small": 0, "none": 0}},
		{name: "small images do not count", prio: prio(policy.ImageLocalityPriority), nodes: nodes, pod: mkPod("p", images("busybox")), want: map[string]int64{"has": 0, "small": 0, "none": 0}},
	})
	all := []*api.Node{mkNode("a", nodeImages(2000*mi, "registry.local:5000/app:v1")), mkNode("b", nodeImages(2000*mi, "registry.local:5000/app:v1"))}
	runPriorityCases(t, []priorityCase{
		{name: "large image everywhere", prio: prio(policy.ImageLocalityPriority), nodes: all, pod: mkPod("p", images("registry.local:5000/app:v1")), want: map[string]int64{"a": 10, "b": 10}},
	})
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                              "docker.io/library/nginx:latest",
		"nginx:1.25":                         "docker.io/library/nginx:1.25",
		"docker.io/nginx":                    "docker.io/library/nginx:latest",
		"ocpqe/hello-pod":                    "docker.io/ocpqe/hello-pod:latest",
		"quay.io/org/app@sha256:ab":          "quay.io/org/app@sha256:ab",
		"localhost/app":                      "localhost/app:latest",
		"registry.local:5000/app":            "registry.local:5000/app:latest",
		"registry.local:5000/app:v2":         "registry.local:5000/app:v2",
		"docker.io/library/busybox:latest":   "docker.io/library/busybox:latest",
		"docker.io/ocpqe/hello-pod:latest":   "docker.io/ocpqe/hello-pod:latest",
		"docker.io/ocpqe/hello-pod@sha256:x": "docker.io/ocpqe/hello-pod@sha256:x",
	} {
		if got := normalizeImage(in); got != want {
			t.Errorf("normalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}

// Weights multiply the 0–10 scores, and the highest total wins.
func TestWeightsDecide(t *testing.T) {
	nodes := []*api.Node{mkNode("zoned", nodeLabels("zone", "z1")), mkNode("plain")}
	p := &policy.Policy{Kind: policy.Kind, Priorities: []policy.Priority{
		{Name: "ZonePreferred", Weight: 3, Argument: &policy.PriorityArgument{LabelPreference: &policy.LabelPreference{Label: "zone", Presence: true}}},
		{Name: "NoZonePreferred", Weight: 1, Argument: &policy.PriorityArgument{LabelPreference: &policy.LabelPreference{Label: "zone", Presence: false}}},
	}}
	s := newScheduler(t, p)
	c := newCluster(t, nodes, nil)
	res, err := s.Schedule(context.Background(), c, mkPod("p"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Node != "zoned" || res.Score != 30 {
		t.Errorf("got %s with %d, want zoned with 30", res.Node, res.Score)
	}
	p.Priorities[1].Weight = 4
	s = newScheduler(t, p)
	if res, _ := s.Schedule(context.Background(), c, mkPod("p")); res.Node != "plain" || res.Score != 40 {
		t.Errorf("got %s with %d, want plain with 40", res.Node, res.Score)
	}
}
