package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// decodePod reads a pod manifest as the seed writes it.
func decodePod(t *testing.T, manifest string) *api.Pod {
	t.Helper()
	objs, _, err := api.DecodeYAMLOrJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("decoding the seed's manifest: %v", err)
	}
	p, ok := objs[0].(*api.Pod)
	if !ok {
		t.Fatalf("manifest is a %T, not a Pod", objs[0])
	}
	api.SetDefaults(p)
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	return p
}

// place schedules a pod with s and assumes the binding, as the scheduler
// loop will.
func place(t *testing.T, s *Scheduler, c *Cluster, p *api.Pod) (string, error) {
	t.Helper()
	node, err := schedule(t, s, c, p)
	if err == nil {
		if err := c.Assume(p, node); err != nil {
			t.Fatal(err)
		}
	}
	return node, err
}

const seedPodS1NodeAffinity = `
apiVersion: v1
kind: Pod
metadata:
  name: pod-s1
spec:
  containers:
    - image: "docker.io/ocpqe/hello-pod"
      name: hello-pod
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
            - key: "zone"
              operator: In
              values:
              - us
`

// Seed 000 14.6.3.1 and 14.6.3.2, with the default policy.
func TestSeedNodeAffinityExamples(t *testing.T) {
	s := newScheduler(t, nil)
	pod := decodePod(t, seedPodS1NodeAffinity)

	// 14.6.3.1: node1 has zone=us; pod-s1 can be scheduled on node1.
	c := newCluster(t, []*api.Node{mkNode("node1", nodeLabels("zone", "us"))}, nil)
	if node, err := schedule(t, s, c, pod); err != nil || node != "node1" {
		t.Errorf("14.6.3.1: got %q, %v; want node1", node, err)
	}

	// 14.6.3.2: node1 has zone=emea; pod-s1 cannot be scheduled, and the
	// seed's event names MatchNodeSelector (1).
	c = newCluster(t, []*api.Node{mkNode("node1", nodeLabels("zone", "emea"))}, nil)
	_, err := schedule(t, s, c, pod)
	if err == nil || err.Error() != "0/1 nodes are available: MatchNodeSelector (1)." {
		t.Errorf("14.6.3.2: err = %v", err)
	}
	if !errors.Is(err, ErrUnschedulable) {
		t.Errorf("14.6.3.2: %v does not wrap ErrUnschedulable", err)
	}
}

const seedTeam4 = `
apiVersion: v1
kind: Pod
metadata:
  name: team4
  labels:
    team: "4"
spec:
  containers:
    - name: ocp
      image: docker.io/ocpqe/hello-pod
`

const seedTeam4a = `
apiVersion: v1
kind: Pod
metadata:
  name: team4a
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - key: team
            operator: In
            values:
            - "4"
        topologyKey: kubernetes.io/hostname
  containers:
  - name: pod-affinity
    image: docker.io/ocpqe/hello-pod
`

const seedSecurityS1 = `
apiVersion: v1
kind: Pod
metadata:
  name: pod-s1
  labels:
    security: s1
spec:
  containers:
  - name: ocp
    image: docker.io/ocpqe/hello-pod
`

const seedPodS2AntiAffinity = `
apiVersion: v1
kind: Pod
metadata:
  name: pod-s2
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - key: security
            operator: In
            values:
            - s1
        topologyKey: kubernetes.io/hostname
  containers:
  - name: pod-antiaffinity
    image: docker.io/ocpqe/hello-pod
`

const seedPodS2AffinityNoMatch = `
apiVersion: v1
kind: Pod
metadata:
  name: pod-s2
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - key: security
            operator: In
            values:
            - s2
        topologyKey: kubernetes.io/hostname
  containers:
  - name: pod-affinity
    image: docker.io/ocpqe/hello-pod
`

func threeNodes() []*api.Node {
	return []*api.Node{mkNode("node1"), mkNode("node2"), mkNode("node3")}
}

// Seed 000 14.7.3.1: team4a goes to the node of team4.
func TestSeedPodAffinity(t *testing.T) {
	for seed := range uint64(5) {
		s, err := New(Config{Rand: rand.New(rand.NewPCG(seed, 7))})
		if err != nil {
			t.Fatal(err)
		}
		c := newCluster(t, threeNodes(), nil)
		n4, err := place(t, s, c, decodePod(t, seedTeam4))
		if err != nil {
			t.Fatal(err)
		}
		n4a, err := place(t, s, c, decodePod(t, seedTeam4a))
		if err != nil || n4a != n4 {
			t.Errorf("team4a on %q (%v), team4 on %q: want the same node", n4a, err, n4)
		}
	}
}

// Seed 000 14.7.3.2: pod-s2 may not share a node with pod-s1; with no
// other node it stays Pending.
func TestSeedPodAntiAffinity(t *testing.T) {
	s := newScheduler(t, nil)
	c := newCluster(t, []*api.Node{mkNode("node1")}, nil)
	if _, err := place(t, s, c, decodePod(t, seedSecurityS1)); err != nil {
		t.Fatal(err)
	}
	_, err := schedule(t, s, c, decodePod(t, seedPodS2AntiAffinity))
	if err == nil || err.Error() != "0/1 nodes are available: MatchInterPodAffinity (1)." {
		t.Errorf("one node: err = %v", err)
	}
	c.SetNode(mkNode("node2"))
	if node, err := schedule(t, s, c, decodePod(t, seedPodS2AntiAffinity)); err != nil || node != "node2" {
		t.Errorf("two nodes: got %q, %v; want node2", node, err)
	}
}

// Seed 000 14.7.3.3: pod-s2 wants a pod labelled security=s2; only
// security=s1 exists, so pod-s2 fits no node.
func TestSeedPodAffinityNoMatch(t *testing.T) {
	s := newScheduler(t, nil)
	c := newCluster(t, threeNodes(), nil)
	if _, err := place(t, s, c, decodePod(t, seedSecurityS1)); err != nil {
		t.Fatal(err)
	}
	_, err := schedule(t, s, c, decodePod(t, seedPodS2AffinityNoMatch))
	if err == nil || err.Error() != "0/3 nodes are available: MatchInterPodAffinity (3)." {
		t.Errorf("err = %v", err)
	}
}

// Seed 000 14.7.2: the sample affinity to security=S1 at the zone level
// (topologyKey failure-domain.beta.kubernetes.io/zone).
func TestSeedZoneLevelPodAffinity(t *testing.T) {
	const withPodAffinity = `
apiVersion: v1
kind: Pod
metadata:
  name: with-pod-affinity
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - key: security
            operator: In
            values:
            - S1
        topologyKey: failure-domain.beta.kubernetes.io/zone
  containers:
  - name: with-pod-affinity
    image: docker.io/ocpqe/hello-pod
`
	nodes := []*api.Node{
		mkNode("a1", nodeLabels(LabelZoneBeta, "a")), mkNode("a2", nodeLabels(LabelZoneBeta, "a")),
		mkNode("b1", nodeLabels(LabelZoneBeta, "b")), mkNode("b2", nodeLabels(LabelZoneBeta, "b")),
	}
	c := newCluster(t, nodes, []*api.Pod{mkPod("security-s1", podLabels("security", "S1"), onNode("b2"))})
	for seed := range uint64(10) {
		s, _ := New(Config{Rand: rand.New(rand.NewPCG(seed, 1))})
		node, err := schedule(t, s, c, decodePod(t, withPodAffinity))
		if err != nil || !strings.HasPrefix(node, "b") {
			t.Errorf("got %q, %v; want a node of zone b", node, err)
		}
	}
}

// SPEC SCH-13: the counts per predicate, in the seed's words.
func TestWhyNotMessage(t *testing.T) {
	ssd := nodeLabels("disktype", "ssd")
	taint := nodeTaints(api.Taint{Key: "dedicated", Value: "groupName", Effect: api.TaintEffectNoSchedule})
	nodes := []*api.Node{mkNode("n1"), mkNode("n2"), mkNode("n3"), mkNode("n4", ssd, taint), mkNode("n5", ssd, taint)}
	c := newCluster(t, nodes, nil)
	s := newScheduler(t, nil)
	_, err := schedule(t, s, c, mkPod("p", nodeSelector("disktype", "ssd")))
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a *FitError", err)
	}
	if got, want := err.Error(), "0/5 nodes are available: MatchNodeSelector (3), PodToleratesNodeTaints (2)."; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if fe.NumAllNodes != 5 || fe.Reasons[policy.MatchNodeSelector] != 3 || fe.Reasons[policy.PodToleratesNodeTaints] != 2 {
		t.Errorf("FitError = %+v", fe)
	}
}

// Reasons are sorted by name, as Kubernetes sorts them, not by count.
func TestWhyNotSortedByName(t *testing.T) {
	nodes := []*api.Node{
		mkNode("n1"), mkNode("n2"), mkNode("n3"), mkNode("n4"),
		mkNode("n5", nodeLabels("disktype", "ssd"), nodeCondition(api.NodeDiskPressure, "True")),
	}
	c := newCluster(t, nodes, nil)
	_, err := schedule(t, newScheduler(t, nil), c, mkPod("p", nodeSelector("disktype", "ssd")))
	if want := "0/5 nodes are available: CheckNodeDiskPressure (1), MatchNodeSelector (4)."; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// With alwaysCheckAllPredicates a node counts under every predicate that
// rejects it.
func TestAlwaysCheckAllPredicates(t *testing.T) {
	p := policy.Default()
	p.AlwaysCheckAllPredicates = true
	nodes := []*api.Node{mkNode("n1", nodeTaints(api.Taint{Key: "k", Effect: "NoSchedule"})), mkNode("n2")}
	c := newCluster(t, nodes, nil)
	_, err := schedule(t, newScheduler(t, p), c, mkPod("p", nodeSelector("disktype", "ssd")))
	if want := "0/2 nodes are available: MatchNodeSelector (2), PodToleratesNodeTaints (1)."; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestNoNodes(t *testing.T) {
	_, err := schedule(t, newScheduler(t, nil), NewCluster(), mkPod("p"))
	if !errors.Is(err, ErrUnschedulable) || err.Error() != "no nodes available to schedule pods" {
		t.Errorf("err = %v", err)
	}
}

// The default policy's serviceAffinity on region (SPEC SCH-4): later
// pods of a service follow the first one's region; its serviceAntiAffinity
// on zone spreads them over the zones of that region (SPEC SCH-7).
func TestDefaultPolicyRegionAffinityZoneSpread(t *testing.T) {
	var nodes []*api.Node
	for _, r := range []string{"r1", "r2"} {
		for _, z := range []string{"z1", "z2", "z3"} {
			for i := range 2 {
				nodes = append(nodes, mkNode(fmt.Sprintf("%s-%s-%d", r, z, i), nodeLabels("region", r, "zone", r+z)))
			}
		}
	}
	for seed := range uint64(4) {
		s, _ := New(Config{Rand: rand.New(rand.NewPCG(seed, seed))})
		c := newCluster(t, nodes, nil, mkService("web", "app", "web"))
		region := ""
		perZone := map[string]int{}
		for i := range 9 {
			node, err := place(t, s, c, mkPod(fmt.Sprintf("web-%d", i), podLabels("app", "web"), podRequest("cpu", "100m", "memory", "100Mi")))
			if err != nil {
				t.Fatal(err)
			}
			labels := c.Node(node).labels
			if region == "" {
				region = labels["region"]
			}
			if labels["region"] != region {
				t.Fatalf("pod %d went to region %s, the first pod's is %s", i, labels["region"], region)
			}
			perZone[labels["zone"]]++
		}
		for z, n := range perZone {
			if n != 3 {
				t.Errorf("seed %d: zone %s got %d pods, want 3 each: %v", seed, z, n, perZone)
			}
		}
	}
}

// Required anti-affinity on the hostname spreads a deployment one pod per
// node, and the pod that finds no free node reports it.
func TestAntiAffinitySpreadsDeployment(t *testing.T) {
	anti := withAffinity(&api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{term(LabelHostname, "app", "db")}}})
	c := newCluster(t, threeNodes(), nil)
	s := newScheduler(t, nil)
	used := map[string]bool{}
	for i := range 3 {
		node, err := place(t, s, c, mkPod(fmt.Sprintf("db-%d", i), podLabels("app", "db"), anti))
		if err != nil {
			t.Fatal(err)
		}
		if used[node] {
			t.Fatalf("db-%d joined another db pod on %s", i, node)
		}
		used[node] = true
	}
	_, err := schedule(t, s, c, mkPod("db-3", podLabels("app", "db"), anti))
	if want := "0/3 nodes are available: MatchInterPodAffinity (3)."; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// Ties are broken with the injected random source: the same seed picks
// the same nodes, and different seeds spread the picks.
func TestRandomTieBreak(t *testing.T) {
	var nodes []*api.Node
	for i := range 10 {
		nodes = append(nodes, mkNode(fmt.Sprintf("n%d", i)))
	}
	c := newCluster(t, nodes, nil)
	equal := &policy.Policy{Kind: policy.Kind, Priorities: []policy.Priority{{Name: policy.EqualPriority, Weight: 1}}}
	picks := func(seed uint64) []string {
		s, _ := New(Config{Policy: equal, Rand: rand.New(rand.NewPCG(seed, 0))})
		var out []string
		for range 20 {
			n, err := schedule(t, s, c, mkPod("p"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	a, b := picks(1), picks(1)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("same seed, different picks: %v vs %v", a, b)
	}
	distinct := map[string]bool{}
	for seed := range uint64(20) {
		distinct[picks(seed)[0]] = true
	}
	if len(distinct) < 4 {
		t.Errorf("first picks over 20 seeds hit only %d of 10 tied nodes", len(distinct))
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct{ pct, nodes, want int }{
		{0, 50, 50}, {0, 99, 99}, {0, 100, 100}, {0, 1000, 420}, {0, 5000, 500}, {0, 10000, 500},
		{30, 1000, 300}, {30, 200, 100}, {100, 5000, 5000}, {1, 5000, 100},
	}
	for _, tt := range tests {
		s, err := New(Config{PercentageOfNodesToScore: tt.pct})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.numFeasibleNodesToFind(tt.nodes); got != tt.want {
			t.Errorf("pct %d, %d nodes: %d, want %d", tt.pct, tt.nodes, got, tt.want)
		}
	}
	if _, err := New(Config{PercentageOfNodesToScore: 101}); !errors.Is(err, ErrInvalidConfig) {
		t.Error("percentage 101 accepted")
	}
}

// A large cluster is scanned only until enough nodes fit; the next cycle
// continues where the last stopped; a pod that fits one node still finds
// it at the end of the scan.
func TestBoundedScan(t *testing.T) {
	var nodes []*api.Node
	for i := range 1000 {
		nodes = append(nodes, mkNode(fmt.Sprintf("n%04d", i)))
	}
	c := newCluster(t, nodes, nil)
	s := newScheduler(t, nil)
	r1, err := s.Schedule(context.Background(), c, mkPod("p"))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Evaluated != 420 || r1.Feasible != 420 {
		t.Errorf("evaluated %d, feasible %d; want 420 of 1000", r1.Evaluated, r1.Feasible)
	}
	if s.next != 420 {
		t.Errorf("next scan starts at %d, want 420", s.next)
	}
	last := c.scanOrder()[419].name
	r2, err := s.Schedule(context.Background(), c, mkPod("q", nodeSelector(LabelHostname, last)))
	if err != nil || r2.Node != last || r2.Evaluated != 1000 {
		t.Errorf("pinned pod: %+v, %v; want %s after scanning all 1000", r2, err, last)
	}
}

func TestScanOrderInterleavesZones(t *testing.T) {
	var nodes []*api.Node
	for _, z := range []string{"a", "b", "c"} {
		for i := range 3 {
			nodes = append(nodes, mkNode(fmt.Sprintf("%s%d", z, i), nodeLabels(LabelZone, z)))
		}
	}
	c := newCluster(t, nodes, nil)
	var got []string
	for _, n := range c.scanOrder() {
		got = append(got, n.name)
	}
	if want := "a0 b0 c0 a1 b1 c1 a2 b2 c2"; strings.Join(got, " ") != want {
		t.Errorf("scan order %v, want %s", got, want)
	}
}

func TestErrors(t *testing.T) {
	s := newScheduler(t, nil)
	c := newCluster(t, threeNodes(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Schedule(ctx, c, mkPod("p")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	if _, err := s.Fits(c, mkPod("p"), "nope"); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("Fits on a missing node: err = %v", err)
	}
	bad := mkPod("p", withAffinity(&api.Affinity{PodAffinity: &api.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{{
		LabelSelector: &api.LabelSelector{MatchExpressions: []api.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}, TopologyKey: LabelHostname,
	}}}}))
	if _, err := s.Schedule(context.Background(), c, bad); !errors.Is(err, ErrInvalidPod) {
		t.Errorf("bad selector: err = %v", err)
	}
	placed := *bad
	placed.Spec.NodeName = "node1"
	podRequest("cpu", "4")(&placed)
	if err := c.SetPod(&placed); !errors.Is(err, ErrInvalidPod) || !strings.Contains(err.Error(), "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector") {
		t.Errorf("SetPod of a pod whose selector does not parse: err = %v", err)
	}
	if failed, _ := s.Fits(c, mkPod("q", podRequest("cpu", "1")), "node1"); len(failed) == 0 {
		t.Error("the pod with a bad selector is not counted on its node")
	}
	if _, err := New(Config{Policy: &policy.Policy{Kind: policy.Kind, Priorities: []policy.Priority{{Name: "Nope", Weight: 1}}}}); !errors.Is(err, policy.ErrInvalid) {
		t.Errorf("New with a bad policy: err = %v", err)
	}
}
