package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// world is a random small cluster kept as plain API objects, for an
// oracle that checks predicates the naive way, independently of the
// Cluster's incremental sums and indexes and of the framework's scan.
type world struct {
	nodes    []*api.Node
	pods     []*api.Pod
	services []*api.Service
}

func randomWorld(r *rand.Rand) *world {
	w := &world{}
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for i := range 1 + r.IntN(8) {
		n := mkNode(fmt.Sprintf("node-%d", i), nodeAlloc(
			"cpu", fmt.Sprintf("%d", 1+r.IntN(4)),
			"memory", fmt.Sprintf("%dGi", 1+r.IntN(8)),
			"pods", fmt.Sprintf("%d", 2+r.IntN(4))))
		n.Labels = map[string]string{"zone": pick("z1", "z2", "z3")}
		if r.IntN(4) > 0 {
			n.Labels["region"] = pick("r1", "r2")
		}
		if r.IntN(3) == 0 {
			n.Labels["disktype"] = pick("ssd", "hdd")
		}
		if r.IntN(4) == 0 {
			n.Spec.Taints = append(n.Spec.Taints, api.Taint{Key: pick("dedicated", "gpu"), Value: pick("", "a"), Effect: pick("NoSchedule", "PreferNoSchedule", "NoExecute")})
		}
		if r.IntN(8) == 0 {
			nodeCondition(pick(api.NodeMemoryPressure, api.NodeDiskPressure, api.NodeReady), pick("True", "False"))(n)
		}
		if r.IntN(10) == 0 {
			n.Spec.Unschedulable = true
		}
		w.nodes = append(w.nodes, n)
	}
	if r.IntN(2) == 0 {
		w.services = append(w.services, mkService("svc-a", "app", "a"))
	}
	for i := range r.IntN(10) {
		p := randomPod(r, fmt.Sprintf("existing-%d", i))
		p.Spec.NodeName = w.nodes[r.IntN(len(w.nodes))].Name
		p.CreationTimestamp = api.NewTime(api.Time{}.AddDate(2000, 0, i))
		w.pods = append(w.pods, p)
	}
	return w
}

func randomPod(r *rand.Rand, name string) *api.Pod {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	p := mkPod(name, podLabels("app", pick("a", "b", "c")))
	if r.IntN(4) > 0 {
		podRequest("cpu", fmt.Sprintf("%dm", 100*(1+r.IntN(15))), "memory", fmt.Sprintf("%dMi", 256*(1+r.IntN(12))))(p)
	}
	if r.IntN(5) == 0 {
		nodeSelector(pick("zone", "region", "disktype"), pick("z1", "r1", "ssd"))(p)
	}
	if r.IntN(4) == 0 {
		tolerations(api.Toleration{Key: pick("dedicated", "gpu", ""), Operator: "Exists", Effect: pick("", "NoSchedule", "NoExecute")})(p)
	}
	if r.IntN(5) == 0 {
		hostPorts(api.ContainerPort{ContainerPort: 80, HostPort: int32(8080 + r.IntN(2)), Protocol: "TCP"})(p)
	}
	a := &api.Affinity{}
	if r.IntN(5) == 0 {
		a.NodeAffinity = &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{NodeSelectorTerms: []api.NodeSelectorTerm{
			{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", pick("In", "NotIn"), pick("z1", "z2"))}},
		}}}
	}
	key := pick(LabelHostname, "zone", "region")
	switch r.IntN(6) {
	case 0:
		a.PodAffinity = &api.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term(key, "app", pick("a", "b"))}}
	case 1:
		a.PodAntiAffinity = &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term(key, "app", pick("a", "b", "c"))}}
	case 2:
		a.PodAntiAffinity = &api.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []api.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term(key, "app", "a")}}}
	}
	if a.NodeAffinity != nil || a.PodAffinity != nil || a.PodAntiAffinity != nil {
		p.Spec.Affinity = a
	}
	return p
}

// oracleFails returns the predicates of checks that reject pod on node,
// computed from the API objects alone.
func (w *world) oracleFails(checks []policy.Check, pod *api.Pod, node *api.Node) []string {
	var failed []string
	labels := map[string]string{LabelHostname: node.Name}
	for k, v := range node.Labels {
		labels[k] = v
	}
	cond := func(typ string) string {
		for _, c := range node.Status.Conditions {
			if c.Type == typ {
				return c.Status
			}
		}
		return ""
	}
	tolerated := func(t api.Taint) bool {
		for _, tol := range pod.Spec.Tolerations {
			keyOK := tol.Key == t.Key || (tol.Key == "" && tol.Operator == "Exists")
			valOK := tol.Operator == "Exists" || tol.Value == t.Value
			effOK := tol.Effect == "" || tol.Effect == t.Effect
			if keyOK && valOK && effOK {
				return true
			}
		}
		return false
	}
	onNode := func(name string) []*api.Pod {
		var out []*api.Pod
		for _, p := range w.pods {
			if p.Spec.NodeName == name {
				out = append(out, p)
			}
		}
		return out
	}
	nodeLabels := func(name string) (map[string]string, bool) {
		for _, n := range w.nodes {
			if n.Name == name {
				l := map[string]string{LabelHostname: n.Name}
				for k, v := range n.Labels {
					l[k] = v
				}
				return l, true
			}
		}
		return nil, false
	}
	termSelects := func(t api.PodAffinityTerm, owner, p *api.Pod) bool {
		ns := t.Namespaces
		if len(ns) == 0 {
			ns = []string{owner.Namespace}
		}
		sel, _ := api.SelectorFromLabelSelector(t.LabelSelector)
		return slices.Contains(ns, p.Namespace) && sel.Matches(p.Labels)
	}
	for _, c := range checks {
		ok := true
		switch c.Type {
		case policy.CheckNodeUnschedulable:
			ok = !node.Spec.Unschedulable || tolerated(api.Taint{Key: TaintUnschedulable, Effect: "NoSchedule"})
		case policy.CheckNodeCondition:
			ok = !node.Spec.Unschedulable && cond(api.NodeReady) != "False" && cond(api.NodeReady) != "Unknown" && cond(api.NodeNetworkUnavailable) != "True"
		case policy.HostName:
			ok = pod.Spec.NodeName == "" || pod.Spec.NodeName == node.Name
		case policy.PodFitsHostPorts:
			for _, e := range onNode(node.Name) {
				for _, ep := range e.Spec.Containers[0].Ports {
					for _, pp := range pod.Spec.Containers[0].Ports {
						if ep.HostPort != 0 && ep.HostPort == pp.HostPort {
							ok = false
						}
					}
				}
			}
		case policy.MatchNodeSelector:
			for k, v := range pod.Spec.NodeSelector {
				if labels[k] != v {
					ok = false
				}
			}
			if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				m, _ := api.NodeSelectorMatches(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, labels, node.Name)
				ok = ok && m
			}
		case policy.PodFitsResources:
			var cpu, mem int64
			n := 0
			for _, e := range append(onNode(node.Name), pod) {
				n++
				rq := e.Spec.Containers[0].Resources.Requests
				cpu += cpuOf(rq)
				mem += memoryOf(rq)
			}
			alloc := node.Status.Allocatable
			podsQ := node.Status.Allocatable[api.ResourcePods]
			ok = int64(n) <= podsQ.Value() &&
				(cpuOf(pod.Spec.Containers[0].Resources.Requests) == 0 || cpu <= cpuOf(alloc)) &&
				(memoryOf(pod.Spec.Containers[0].Resources.Requests) == 0 || mem <= memoryOf(alloc))
		case policy.PodToleratesNodeTaints, policy.PodToleratesNodeNoExecuteTaints:
			for _, t := range node.Spec.Taints {
				if (t.Effect == "NoExecute" || t.Effect == "NoSchedule" && c.Type == policy.PodToleratesNodeTaints) && !tolerated(t) {
					ok = false
				}
			}
		case policy.CheckNodeMemoryPressure:
			ok = cond(api.NodeMemoryPressure) != "True" || len(pod.Spec.Containers[0].Resources.Requests) > 0
		case policy.CheckNodeDiskPressure:
			ok = cond(api.NodeDiskPressure) != "True"
		case policy.TypeServiceAffinity:
			want := map[string]string{}
			for _, l := range c.Argument.ServiceAffinity.Labels {
				if v, set := pod.Spec.NodeSelector[l]; set {
					want[l] = v
				}
			}
			var svcs []*api.Service
			for _, s := range w.services {
				if api.SelectorFromSet(s.Spec.Selector).Matches(pod.Labels) {
					svcs = append(svcs, s)
				}
			}
			sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
			if len(svcs) > 0 {
				var first *api.Pod
				for _, e := range w.pods {
					if e.Namespace == pod.Namespace && api.SelectorFromSet(svcs[0].Spec.Selector).Matches(e.Labels) {
						if first == nil || e.CreationTimestamp.Before(first.CreationTimestamp.Time) ||
							e.CreationTimestamp.Equal(first.CreationTimestamp.Time) && e.Name < first.Name {
							first = e
						}
					}
				}
				if first != nil {
					fl, _ := nodeLabels(first.Spec.NodeName)
					for _, l := range c.Argument.ServiceAffinity.Labels {
						if _, set := want[l]; !set {
							if v, has := fl[l]; has {
								want[l] = v
							}
						}
					}
				}
			}
			for k, v := range want {
				if got, has := labels[k]; !has || got != v {
					ok = false
				}
			}
		case policy.MatchInterPodAffinity:
			a := pod.Spec.Affinity
			// The placed pods' required anti-affinity.
			for _, e := range w.pods {
				if e.Spec.Affinity == nil || e.Spec.Affinity.PodAntiAffinity == nil {
					continue
				}
				el, _ := nodeLabels(e.Spec.NodeName)
				for _, t := range e.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					v, has := el[t.TopologyKey]
					if has && termSelects(t, e, pod) && labels[t.TopologyKey] == v {
						if _, nodeHas := labels[t.TopologyKey]; nodeHas {
							ok = false
						}
					}
				}
			}
			if a != nil && a.PodAntiAffinity != nil {
				for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					for _, e := range w.pods {
						el, _ := nodeLabels(e.Spec.NodeName)
						v, has := el[t.TopologyKey]
						nv, nodeHas := labels[t.TopologyKey]
						if has && nodeHas && nv == v && termSelects(t, pod, e) {
							ok = false
						}
					}
				}
			}
			if a != nil && a.PodAffinity != nil {
				anyMatch, self, allSat := false, true, true
				for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					sat := false
					for _, e := range w.pods {
						el, _ := nodeLabels(e.Spec.NodeName)
						v, has := el[t.TopologyKey]
						if has && termSelects(t, pod, e) {
							anyMatch = true
							if nv, nodeHas := labels[t.TopologyKey]; nodeHas && nv == v {
								sat = true
							}
						}
					}
					allSat = allSat && sat
					self = self && termSelects(t, pod, pod)
					if _, nodeHas := labels[t.TopologyKey]; !nodeHas {
						ok = false
					}
				}
				ok = ok && (allSat || (!anyMatch && self))
			}
		case policy.NoDiskConflict, policy.NoVolumeZoneConflict, policy.CheckVolumeBinding:
			// The generator makes no devices or claims.
		default:
			panic("oracle lacks " + c.Type)
		}
		if !ok {
			failed = append(failed, c.Name)
		}
	}
	return failed
}

func cpuOf(rl api.ResourceList) int64 { q := rl[api.ResourceCPU]; return q.MilliValue() }

func memoryOf(rl api.ResourceList) int64 { q := rl[api.ResourceMemory]; return q.Value() }

// Property (SPEC SCH-1 with SCH-3..11): every node the scheduler picks
// passes every enabled predicate checked independently, and has the best
// total score; when it picks none, every node fails some predicate, and
// the counts add up to the number of nodes.
func TestPropertyRandomClusters(t *testing.T) {
	policies := map[string]*policy.Policy{"default": policy.Default()}
	full := policy.Default()
	full.Predicates = append(full.Predicates, named(policy.CheckNodeCondition, policy.PodToleratesNodeNoExecuteTaints)...)
	full.Priorities = append(full.Priorities, policy.Priority{Name: policy.MostRequestedPriority, Weight: 3})
	policies["full"] = full
	for name, p := range policies {
		checks := policy.Checks(p)
		for seed := range uint64(300) {
			r := rand.New(rand.NewPCG(seed, 42))
			w := randomWorld(r)
			c := newCluster(t, w.nodes, w.pods, w.services...)
			s, err := New(Config{Policy: p, Rand: rand.New(rand.NewPCG(seed, 1))})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 4 {
				pod := randomPod(r, fmt.Sprintf("new-%d", k))
				pod.CreationTimestamp = api.NewTime(api.Time{}.AddDate(2100, 0, k))
				res, err := s.Schedule(context.Background(), c, pod)
				fits := map[string]bool{}
				for _, n := range w.nodes {
					fits[n.Name] = len(w.oracleFails(checks, pod, n)) == 0
				}
				var fe *FitError
				switch {
				case err == nil:
					if f := w.oracleFails(checks, pod, nodeNamed(w, res.Node)); len(f) > 0 {
						t.Fatalf("%s seed %d pod %d: picked %s, which fails %v", name, seed, k, res.Node, f)
					}
					if f, _ := s.Fits(c, pod, res.Node); len(f) > 0 {
						t.Fatalf("%s seed %d pod %d: picked %s, which Fits says fails %v", name, seed, k, res.Node, f)
					}
					var feasible []string
					for n, ok := range fits {
						if ok {
							feasible = append(feasible, n)
						}
					}
					scores, err := s.Scores(c, pod, feasible)
					if err != nil {
						t.Fatal(err)
					}
					for _, ns := range scores {
						if res.Feasible > 1 && ns.Total > res.Score {
							t.Fatalf("%s seed %d pod %d: picked %s with %d, but %s has %d", name, seed, k, res.Node, res.Score, ns.Node, ns.Total)
						}
					}
					pod.Spec.NodeName = res.Node
					w.pods = append(w.pods, pod)
					if err := c.SetPod(pod); err != nil {
						t.Fatal(err)
					}
				case errors.As(err, &fe):
					total := 0
					for _, n := range fe.Reasons {
						total += n
					}
					if total != len(w.nodes) || fe.NumAllNodes != len(w.nodes) {
						t.Fatalf("%s seed %d pod %d: %v counts %d rejections for %d nodes", name, seed, k, fe, total, len(w.nodes))
					}
					for n, ok := range fits {
						if ok {
							t.Fatalf("%s seed %d pod %d: unschedulable (%v), but %s fits every predicate", name, seed, k, err, n)
						}
					}
				default:
					t.Fatalf("%s seed %d: %v", name, seed, err)
				}
			}
		}
	}
}

func nodeNamed(w *world, name string) *api.Node {
	for _, n := range w.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
