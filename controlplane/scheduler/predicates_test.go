package scheduler

import (
	"slices"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

type predicateCase struct {
	name     string
	pred     policy.Predicate
	node     *api.Node
	others   []*api.Node // more nodes, for topology and service cases
	existing []*api.Pod
	services []*api.Service
	pod      *api.Pod
	fits     bool
}

// runPredicateCases checks each case on its first node with Fits, and
// that a failure is reported under the predicate's name.
func runPredicateCases(t *testing.T, cases []predicateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScheduler(t, predicatesPolicy(tc.pred))
			c := newCluster(t, append([]*api.Node{tc.node}, tc.others...), tc.existing, tc.services...)
			failed, err := s.Fits(c, tc.pod, tc.node.Name)
			if err != nil {
				t.Fatal(err)
			}
			want := []string(nil)
			if !tc.fits {
				want = []string{tc.pred.Name}
			}
			if !slices.Equal(failed, want) {
				t.Errorf("failed predicates = %v, want %v", failed, want)
			}
		})
	}
}

func TestPodFitsResources(t *testing.T) {
	p := policy.Predicate{Name: policy.PodFitsResources}
	small := func() *api.Node {
		return mkNode("n", nodeAlloc("cpu", "1", "memory", "1Gi", "pods", "2", "example.com/gpu", "1"))
	}
	runPredicateCases(t, []predicateCase{
		{name: "fits", pred: p, node: small(), pod: mkPod("p", podRequest("cpu", "500m", "memory", "512Mi")), fits: true},
		{name: "exactly full fits", pred: p, node: small(), existing: []*api.Pod{mkPod("e", onNode("n"), podRequest("cpu", "500m"))}, pod: mkPod("p", podRequest("cpu", "500m")), fits: true},
		{name: "cpu over allocatable", pred: p, node: small(), existing: []*api.Pod{mkPod("e", onNode("n"), podRequest("cpu", "600m"))}, pod: mkPod("p", podRequest("cpu", "500m"))},
		{name: "memory over allocatable", pred: p, node: small(), pod: mkPod("p", podRequest("memory", "2Gi"))},
		{name: "requests count, not use: no requests fit a full node", pred: p, node: small(), existing: []*api.Pod{mkPod("e", onNode("n"), podRequest("cpu", "1", "memory", "1Gi"))}, pod: mkPod("p"), fits: true},
		{name: "pod count", pred: p, node: small(), existing: []*api.Pod{mkPod("e1", onNode("n")), mkPod("e2", onNode("n"))}, pod: mkPod("p")},
		{name: "finished pods free their share", pred: p, node: small(), existing: []*api.Pod{
			mkPod("e1", onNode("n"), podRequest("cpu", "1"), func(p *api.Pod) { p.Status.Phase = api.PodSucceeded }),
			mkPod("e2", onNode("n"), func(p *api.Pod) { p.Status.Phase = api.PodFailed }),
		}, pod: mkPod("p", podRequest("cpu", "1")), fits: true},
		{name: "extended resource fits", pred: p, node: small(), pod: mkPod("p", podRequest("example.com/gpu", "1")), fits: true},
		{name: "extended resource taken", pred: p, node: small(), existing: []*api.Pod{mkPod("e", onNode("n"), podRequest("example.com/gpu", "1"))}, pod: mkPod("p", podRequest("example.com/gpu", "1"))},
		{name: "extended resource the node lacks", pred: p, node: small(), pod: mkPod("p", podRequest("example.com/fpga", "1"))},
		{name: "ephemeral storage the node lacks", pred: p, node: small(), pod: mkPod("p", podRequest("ephemeral-storage", "1Gi"))},
		{name: "init container larger than the rest", pred: p, node: small(), pod: mkPod("p", podRequest("cpu", "100m"), func(p *api.Pod) {
			p.Spec.InitContainers = []api.Container{{Name: "init", Resources: api.ResourceRequirements{Requests: api.ResourceList{"cpu": api.MustParseQuantity("2")}}}}
		})},
		{name: "node without a pods allocatable takes none", pred: p, node: mkNode("n", nodeAlloc("cpu", "4")), pod: mkPod("p")},
		{name: "capacity stands in for missing allocatable", pred: p, node: mkNode("n", func(n *api.Node) {
			n.Status.Capacity, n.Status.Allocatable = n.Status.Allocatable, nil
		}), pod: mkPod("p", podRequest("cpu", "1")), fits: true},
	})
}

func TestPodFitsHostPorts(t *testing.T) {
	p := policy.Predicate{Name: policy.PodFitsHostPorts}
	port := func(hp int32, proto, ip string) api.ContainerPort {
		return api.ContainerPort{ContainerPort: 80, HostPort: hp, Protocol: proto, HostIP: ip}
	}
	with := func(ports ...api.ContainerPort) []*api.Pod {
		return []*api.Pod{mkPod("e", onNode("n"), hostPorts(ports...))}
	}
	runPredicateCases(t, []predicateCase{
		{name: "free", pred: p, node: mkNode("n"), existing: with(port(8080, "TCP", "")), pod: mkPod("p", hostPorts(port(8081, "TCP", ""))), fits: true},
		{name: "same port", pred: p, node: mkNode("n"), existing: with(port(8080, "TCP", "")), pod: mkPod("p", hostPorts(port(8080, "", "")))},
		{name: "other protocol", pred: p, node: mkNode("n"), existing: with(port(53, "UDP", "")), pod: mkPod("p", hostPorts(port(53, "TCP", ""))), fits: true},
		{name: "different addresses", pred: p, node: mkNode("n"), existing: with(port(80, "TCP", "10.0.0.1")), pod: mkPod("p", hostPorts(port(80, "TCP", "10.0.0.2"))), fits: true},
		{name: "all addresses against one", pred: p, node: mkNode("n"), existing: with(port(80, "TCP", "10.0.0.1")), pod: mkPod("p", hostPorts(port(80, "TCP", "0.0.0.0")))},
		{name: "one address against all", pred: p, node: mkNode("n"), existing: with(port(80, "TCP", "")), pod: mkPod("p", hostPorts(port(80, "TCP", "10.0.0.2")))},
		{name: "container ports without host ports", pred: p, node: mkNode("n"), existing: with(port(0, "TCP", "")), pod: mkPod("p", hostPorts(port(0, "TCP", ""))), fits: true},
	})
}

func TestHostName(t *testing.T) {
	p := policy.Predicate{Name: policy.HostName}
	runPredicateCases(t, []predicateCase{
		{name: "no nodeName", pred: p, node: mkNode("n"), pod: mkPod("p"), fits: true},
		{name: "this node", pred: p, node: mkNode("n"), pod: mkPod("p", onNode("n")), fits: true},
		{name: "another node", pred: p, node: mkNode("n"), pod: mkPod("p", onNode("m"))},
	})
}

func nodeAffinityRequired(terms ...api.NodeSelectorTerm) *api.Affinity {
	return &api.Affinity{NodeAffinity: &api.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &api.NodeSelector{NodeSelectorTerms: terms}}}
}

func expr(key, op string, values ...string) api.NodeSelectorRequirement {
	return api.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestMatchNodeSelector(t *testing.T) {
	p := policy.Predicate{Name: policy.MatchNodeSelector}
	n := func() *api.Node { return mkNode("n", nodeLabels("region", "r1", "zone", "z1", "cpus", "8")) }
	runPredicateCases(t, []predicateCase{
		{name: "no selector", pred: p, node: n(), pod: mkPod("p"), fits: true},
		{name: "all pairs match", pred: p, node: n(), pod: mkPod("p", nodeSelector("region", "r1", "zone", "z1")), fits: true},
		{name: "one pair differs", pred: p, node: n(), pod: mkPod("p", nodeSelector("region", "r1", "zone", "z2"))},
		{name: "label missing", pred: p, node: n(), pod: mkPod("p", nodeSelector("rack", "a"))},
		{name: "hostname label is implied", pred: p, node: n(), pod: mkPod("p", nodeSelector("kubernetes.io/hostname", "n")), fits: true},
		{name: "affinity terms are ORed", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(
			api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "In", "z9")}},
			api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "In", "z1")}}))), fits: true},
		{name: "expressions are ANDed", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(
			api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "In", "z1"), expr("region", "NotIn", "r1")}})))},
		{name: "Exists", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "Exists")}}))), fits: true},
		{name: "DoesNotExist", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "DoesNotExist")}})))},
		{name: "Gt", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("cpus", "Gt", "4")}}))), fits: true},
		{name: "Lt", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("cpus", "Lt", "4")}})))},
		{name: "nodeSelector and affinity must both hold", pred: p, node: n(), pod: mkPod("p", nodeSelector("region", "r2"),
			withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "In", "z1")}})))},
		{name: "no terms match no node", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired()))},
		{name: "matchFields on the name", pred: p, node: n(), pod: mkPod("p", withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchFields: []api.NodeSelectorRequirement{expr("metadata.name", "In", "n")}}))), fits: true},
		{name: "preferred terms do not filter", pred: p, node: n(), pod: mkPod("p", withAffinity(&api.Affinity{NodeAffinity: &api.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []api.PreferredSchedulingTerm{{Weight: 1, Preference: api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr("zone", "In", "z9")}}}}}})), fits: true},
	})
}

func TestGeneralPredicatesReportsItsParts(t *testing.T) {
	s := newScheduler(t, predicatesPolicy(named(policy.GeneralPredicates)...))
	c := newCluster(t, []*api.Node{mkNode("n", nodeLabels("zone", "z1"))}, nil)
	tests := []struct {
		pod  *api.Pod
		want string
	}{
		{mkPod("p", podRequest("cpu", "5")), policy.PodFitsResources},
		{mkPod("p", onNode("m")), policy.HostName},
		{mkPod("p", nodeSelector("zone", "z2")), policy.MatchNodeSelector},
	}
	for _, tt := range tests {
		failed, err := s.Fits(c, tt.pod, "n")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(failed, []string{tt.want}) {
			t.Errorf("failed = %v, want [%s]", failed, tt.want)
		}
	}
	c2 := newCluster(t, []*api.Node{mkNode("n")}, []*api.Pod{mkPod("e", onNode("n"), hostPorts(api.ContainerPort{HostPort: 80, ContainerPort: 80}))})
	if failed, _ := s.Fits(c2, mkPod("p", hostPorts(api.ContainerPort{HostPort: 80, ContainerPort: 80})), "n"); !slices.Equal(failed, []string{policy.PodFitsHostPorts}) {
		t.Errorf("failed = %v, want [PodFitsHostPorts]", failed)
	}
}

func TestPodToleratesNodeTaints(t *testing.T) {
	ts := policy.Predicate{Name: policy.PodToleratesNodeTaints}
	ne := policy.Predicate{Name: policy.PodToleratesNodeNoExecuteTaints}
	taint := func(k, v, e string) nodeOpt { return nodeTaints(api.Taint{Key: k, Value: v, Effect: e}) }
	tol := func(k, op, v, e string) podOpt {
		return tolerations(api.Toleration{Key: k, Operator: op, Value: v, Effect: e})
	}
	runPredicateCases(t, []predicateCase{
		{name: "no taints", pred: ts, node: mkNode("n"), pod: mkPod("p"), fits: true},
		{name: "NoSchedule refuses", pred: ts, node: mkNode("n", taint("dedicated", "groupName", "NoSchedule")), pod: mkPod("p")},
		{name: "NoExecute refuses", pred: ts, node: mkNode("n", taint("dedicated", "groupName", "NoExecute")), pod: mkPod("p")},
		{name: "PreferNoSchedule does not refuse", pred: ts, node: mkNode("n", taint("disktype", "ssd", "PreferNoSchedule")), pod: mkPod("p"), fits: true},
		{name: "Equal toleration", pred: ts, node: mkNode("n", taint("dedicated", "groupName", "NoSchedule")), pod: mkPod("p", tol("dedicated", "Equal", "groupName", "NoSchedule")), fits: true},
		{name: "Equal toleration, other value", pred: ts, node: mkNode("n", taint("dedicated", "groupName", "NoSchedule")), pod: mkPod("p", tol("dedicated", "Equal", "other", "NoSchedule"))},
		{name: "Exists toleration, any effect", pred: ts, node: mkNode("n", taint("dedicated", "groupName", "NoSchedule")), pod: mkPod("p", tol("dedicated", "Exists", "", "")), fits: true},
		{name: "toleration of the other effect", pred: ts, node: mkNode("n", taint("dedicated", "groupName", "NoSchedule")), pod: mkPod("p", tol("dedicated", "Exists", "", "NoExecute"))},
		{name: "tolerate everything", pred: ts, node: mkNode("n", taint("a", "", "NoSchedule"), taint("b", "x", "NoExecute")), pod: mkPod("p", tol("", "Exists", "", "")), fits: true},
		{name: "NoExecute-only ignores NoSchedule", pred: ne, node: mkNode("n", taint("dedicated", "groupName", "NoSchedule")), pod: mkPod("p"), fits: true},
		{name: "NoExecute-only refuses NoExecute", pred: ne, node: mkNode("n", taint("dedicated", "groupName", "NoExecute")), pod: mkPod("p")},
		{name: "NoExecute-only with toleration", pred: ne, node: mkNode("n", taint("dedicated", "groupName", "NoExecute")), pod: mkPod("p", tol("dedicated", "Equal", "groupName", "NoExecute")), fits: true},
	})
}

// Seed 000 14.9.2.1: three taints, two tolerations; the third taint keeps
// the pod off.
func TestSeedThreeTaintsTwoTolerationsPredicate(t *testing.T) {
	node := mkNode("node1", nodeTaints(
		api.Taint{Key: "key1", Value: "value1", Effect: "NoSchedule"},
		api.Taint{Key: "key1", Value: "value1", Effect: "NoExecute"},
		api.Taint{Key: "key2", Value: "value2", Effect: "NoSchedule"},
	))
	pod := mkPod("p", tolerations(
		api.Toleration{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoSchedule"},
		api.Toleration{Key: "key1", Operator: "Equal", Value: "value1", Effect: "NoExecute"},
	))
	s := newScheduler(t, predicatesPolicy(named(policy.PodToleratesNodeTaints, policy.PodToleratesNodeNoExecuteTaints)...))
	c := newCluster(t, []*api.Node{node}, nil)
	failed, err := s.Fits(c, pod, "node1")
	if err != nil {
		t.Fatal(err)
	}
	// Not scheduled (the NoSchedule taint key2), but every NoExecute taint
	// is tolerated: a running pod would keep running.
	if !slices.Equal(failed, []string{policy.PodToleratesNodeTaints}) {
		t.Errorf("failed = %v, want [PodToleratesNodeTaints] only", failed)
	}
	if _, err := schedule(t, s, c, pod); err == nil || err.Error() != "0/1 nodes are available: PodToleratesNodeTaints (1)." {
		t.Errorf("Schedule error = %v", err)
	}
}

func TestNodeConditionPredicates(t *testing.T) {
	be := mkPod("besteffort")
	burst := mkPod("burstable", podRequest("memory", "100Mi"))
	p := func(name string) policy.Predicate { return policy.Predicate{Name: name} }
	runPredicateCases(t, []predicateCase{
		{name: "memory pressure keeps BestEffort off", pred: p(policy.CheckNodeMemoryPressure), node: mkNode("n", nodeCondition(api.NodeMemoryPressure, "True")), pod: be},
		{name: "memory pressure lets others on", pred: p(policy.CheckNodeMemoryPressure), node: mkNode("n", nodeCondition(api.NodeMemoryPressure, "True")), pod: burst, fits: true},
		{name: "no memory pressure", pred: p(policy.CheckNodeMemoryPressure), node: mkNode("n", nodeCondition(api.NodeMemoryPressure, "False")), pod: be, fits: true},
		{name: "limits alone are not BestEffort", pred: p(policy.CheckNodeMemoryPressure), node: mkNode("n", nodeCondition(api.NodeMemoryPressure, "True")), pod: mkPod("l", func(p *api.Pod) {
			p.Spec.Containers[0].Resources.Limits = api.ResourceList{"cpu": api.MustParseQuantity("1")}
		}), fits: true},
		{name: "disk pressure keeps every pod off", pred: p(policy.CheckNodeDiskPressure), node: mkNode("n", nodeCondition(api.NodeDiskPressure, "True")), pod: burst},
		{name: "no disk pressure", pred: p(policy.CheckNodeDiskPressure), node: mkNode("n"), pod: burst, fits: true},
		{name: "PID pressure", pred: p(policy.CheckNodePIDPressure), node: mkNode("n", nodeCondition(api.NodePIDPressure, "True")), pod: burst},
		{name: "no PID pressure", pred: p(policy.CheckNodePIDPressure), node: mkNode("n", nodeCondition(api.NodePIDPressure, "False")), pod: burst, fits: true},
		{name: "ready", pred: p(policy.CheckNodeCondition), node: mkNode("n"), pod: be, fits: true},
		{name: "not ready", pred: p(policy.CheckNodeCondition), node: mkNode("n", nodeCondition(api.NodeReady, "False")), pod: be},
		{name: "readiness unknown", pred: p(policy.CheckNodeCondition), node: mkNode("n", nodeCondition(api.NodeReady, "Unknown")), pod: be},
		{name: "network unavailable", pred: p(policy.CheckNodeCondition), node: mkNode("n", nodeCondition(api.NodeNetworkUnavailable, "True")), pod: be},
		{name: "out of disk", pred: p(policy.CheckNodeCondition), node: mkNode("n", nodeCondition("OutOfDisk", "True")), pod: be},
		{name: "no conditions reported", pred: p(policy.CheckNodeCondition), node: mkNode("n", func(n *api.Node) { n.Status.Conditions = nil }), pod: be, fits: true},
	})
}

// CheckNodeCondition refuses cordoned nodes, and CheckNodeUnschedulable
// is on whatever the policy says, so cordoning works with every policy.
func TestCordonedNodes(t *testing.T) {
	c := newCluster(t, []*api.Node{mkNode("n", cordoned)}, nil)
	s := newScheduler(t, predicatesPolicy())
	failed, _ := s.Fits(c, mkPod("p"), "n")
	if !slices.Equal(failed, []string{policy.CheckNodeUnschedulable}) {
		t.Errorf("empty policy: failed = %v, want [CheckNodeUnschedulable]", failed)
	}
	tolerant := mkPod("ds", tolerations(api.Toleration{Key: TaintUnschedulable, Operator: "Exists", Effect: "NoSchedule"}))
	if failed, _ := s.Fits(c, tolerant, "n"); len(failed) != 0 {
		t.Errorf("a pod tolerating unschedulable: failed = %v", failed)
	}
	s2 := newScheduler(t, predicatesPolicy(named(policy.CheckNodeCondition)...))
	if failed, _ := s2.Fits(c, tolerant, "n"); !slices.Equal(failed, []string{policy.CheckNodeCondition}) {
		t.Errorf("CheckNodeCondition: failed = %v, want [CheckNodeCondition]", failed)
	}
}

func TestNoDiskConflict(t *testing.T) {
	p := policy.Predicate{Name: policy.NoDiskConflict}
	dev := func(path, typ string, readOnly bool) podOpt {
		return func(pd *api.Pod) {
			pd.Spec.Volumes = append(pd.Spec.Volumes, api.Volume{Name: "v", HostPath: &api.HostPathVolumeSource{Path: path, Type: typ}})
			pd.Spec.Containers[0].VolumeMounts = append(pd.Spec.Containers[0].VolumeMounts, api.VolumeMount{Name: "v", MountPath: "/mnt", ReadOnly: readOnly})
		}
	}
	on := func(opts ...podOpt) []*api.Pod { return []*api.Pod{mkPod("e", append(opts, onNode("n"))...)} }
	runPredicateCases(t, []predicateCase{
		{name: "device used read-write", pred: p, node: mkNode("n"), existing: on(dev("/dev/sdb", "BlockDevice", false)), pod: mkPod("p", dev("/dev/sdb", "BlockDevice", true))},
		{name: "device wanted read-write", pred: p, node: mkNode("n"), existing: on(dev("/dev/sdb", "BlockDevice", true)), pod: mkPod("p", dev("/dev/sdb", "BlockDevice", false))},
		{name: "device read-only by both", pred: p, node: mkNode("n"), existing: on(dev("/dev/sdb", "BlockDevice", true)), pod: mkPod("p", dev("/dev/sdb/", "BlockDevice", true)), fits: true},
		{name: "another device", pred: p, node: mkNode("n"), existing: on(dev("/dev/sdb", "BlockDevice", false)), pod: mkPod("p", dev("/dev/sdc", "BlockDevice", false)), fits: true},
		{name: "the same device spelt differently", pred: p, node: mkNode("n"), existing: on(dev("/dev/sdb", "BlockDevice", false)), pod: mkPod("p", dev("/dev//sdb", "BlockDevice", false))},
		{name: "host directories are shared", pred: p, node: mkNode("n"), existing: on(dev("/var/log", "", false)), pod: mkPod("p", dev("/var/log", "Directory", false)), fits: true},
	})
}

func TestVolumePredicates(t *testing.T) {
	claim := func(pd *api.Pod) {
		pd.Spec.Volumes = []api.Volume{{Name: "data", PersistentVolumeClaim: &api.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}
	}
	runPredicateCases(t, []predicateCase{
		{name: "binding: no claims", pred: policy.Predicate{Name: policy.CheckVolumeBinding}, node: mkNode("n"), pod: mkPod("p"), fits: true},
		{name: "binding: a claim cannot be bound yet", pred: policy.Predicate{Name: policy.CheckVolumeBinding}, node: mkNode("n"), pod: mkPod("p", claim)},
		{name: "zone: no claims", pred: policy.Predicate{Name: policy.NoVolumeZoneConflict}, node: mkNode("n", nodeLabels(LabelZone, "z1")), pod: mkPod("p"), fits: true},
		{name: "zone: nothing to compare", pred: policy.Predicate{Name: policy.NoVolumeZoneConflict}, node: mkNode("n", nodeLabels(LabelZone, "z1")), pod: mkPod("p", claim), fits: true},
	})
}

func TestCloudPredicatesFilterNothing(t *testing.T) {
	p := predicatesPolicy(named(policy.MaxEBSVolumeCount, policy.MaxGCEPDVolumeCount, policy.MaxAzureDiskVolumeCount)...)
	s := newScheduler(t, p)
	if len(s.filters) != 1 || s.filters[0].name != policy.CheckNodeUnschedulable {
		t.Errorf("filters = %v, want only the mandatory CheckNodeUnschedulable", s.filters)
	}
}

func TestLabelsPresence(t *testing.T) {
	lp := func(name string, presence bool, labels ...string) policy.Predicate {
		return policy.Predicate{Name: name, Argument: &policy.PredicateArgument{LabelsPresence: &policy.LabelsPresence{Labels: labels, Presence: presence}}}
	}
	n := func() *api.Node { return mkNode("n", nodeLabels("region", "r1", "zone", "z1")) }
	runPredicateCases(t, []predicateCase{
		{name: "RequireRegion: present", pred: lp("RequireRegion", true, "region"), node: n(), pod: mkPod("p"), fits: true},
		{name: "RequireRegion: absent", pred: lp("RequireRegion", true, "region"), node: mkNode("n"), pod: mkPod("p")},
		{name: "presence true needs all", pred: lp("RequireBoth", true, "region", "rack"), node: n(), pod: mkPod("p")},
		{name: "BuildingNodesAvoid: absent", pred: lp("BuildingNodesAvoid", false, "building"), node: n(), pod: mkPod("p"), fits: true},
		{name: "BuildingNodesAvoid: present", pred: lp("BuildingNodesAvoid", false, "building"), node: mkNode("n", nodeLabels("building", "b1")), pod: mkPod("p")},
		{name: "presence false refuses any", pred: lp("AvoidEither", false, "building", "zone"), node: n(), pod: mkPod("p")},
		{name: "by its seed name", pred: lp(policy.CheckNodeLabelPresence, true, "zone"), node: mkNode("n"), pod: mkPod("p")},
	})
}

func TestServiceAffinityPredicate(t *testing.T) {
	sa := func(labels ...string) policy.Predicate {
		return policy.Predicate{Name: "RegionZoneAffinity", Argument: &policy.PredicateArgument{ServiceAffinity: &policy.ServiceAffinity{Labels: labels}}}
	}
	r1z1 := mkNode("a", nodeLabels("region", "r1", "zone", "z1"))
	r1z2 := mkNode("b", nodeLabels("region", "r1", "zone", "z2"))
	r2z3 := mkNode("c", nodeLabels("region", "r2", "zone", "z3"))
	svc := mkService("web", "app", "web")
	first := mkPod("web-1", podLabels("app", "web"), onNode("a"))
	pod := mkPod("web-2", podLabels("app", "web"))
	runPredicateCases(t, []predicateCase{
		{name: "first pod lands anywhere", pred: sa("region"), node: r2z3, services: []*api.Service{svc}, pod: pod, fits: true},
		{name: "later pod: same region", pred: sa("region"), node: r1z2, others: []*api.Node{r1z1}, existing: []*api.Pod{first}, services: []*api.Service{svc}, pod: pod, fits: true},
		{name: "later pod: other region", pred: sa("region"), node: r2z3, others: []*api.Node{r1z1}, existing: []*api.Pod{first}, services: []*api.Service{svc}, pod: pod},
		{name: "two levels: same region, other zone", pred: sa("region", "zone"), node: r1z2, others: []*api.Node{r1z1}, existing: []*api.Pod{first}, services: []*api.Service{svc}, pod: pod},
		{name: "two levels: same zone", pred: sa("region", "zone"), node: mkNode("d", nodeLabels("region", "r1", "zone", "z1")), others: []*api.Node{r1z1}, existing: []*api.Pod{first}, services: []*api.Service{svc}, pod: pod, fits: true},
		{name: "nodeSelector sets the value", pred: sa("region"), node: r2z3, others: []*api.Node{r1z1}, existing: []*api.Pod{first}, services: []*api.Service{svc}, pod: mkPod("web-3", podLabels("app", "web"), nodeSelector("region", "r2")), fits: true},
		{name: "a pod of no service", pred: sa("region"), node: r2z3, others: []*api.Node{r1z1}, existing: []*api.Pod{first}, services: []*api.Service{svc}, pod: mkPod("other"), fits: true},
		{name: "another namespace's pods do not pin", pred: sa("region"), node: r2z3, others: []*api.Node{r1z1}, existing: []*api.Pod{mkPod("web-x", inNamespace("other"), podLabels("app", "web"), onNode("a"))}, services: []*api.Service{svc}, pod: pod, fits: true},
	})
}

func TestMatchInterPodAffinity(t *testing.T) {
	p := policy.Predicate{Name: policy.MatchInterPodAffinity}
	za := mkNode("a", nodeLabels(LabelZone, "z1"))
	zb := mkNode("b", nodeLabels(LabelZone, "z1"))
	zc := mkNode("c", nodeLabels(LabelZone, "z2"))
	s1 := mkPod("s1", podLabels("security", "S1"), onNode("a"))
	req := func(terms ...api.PodAffinityTerm) podOpt {
		return withAffinity(&api.Affinity{PodAffinity: &api.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}})
	}
	anti := func(terms ...api.PodAffinityTerm) podOpt {
		return withAffinity(&api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}})
	}
	runPredicateCases(t, []predicateCase{
		{name: "affinity: same zone as S1", pred: p, node: zb, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", req(term(LabelZone, "security", "S1"))), fits: true},
		{name: "affinity: other zone", pred: p, node: zc, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", req(term(LabelZone, "security", "S1")))},
		{name: "affinity: node without the key", pred: p, node: mkNode("x"), others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", req(term(LabelZone, "security", "S1")))},
		{name: "affinity: other namespace does not count", pred: p, node: zb, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", inNamespace("other"), req(term(LabelZone, "security", "S1")))},
		{name: "affinity: term namespaces", pred: p, node: zb, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", inNamespace("other"), req(func() api.PodAffinityTerm {
			t := term(LabelZone, "security", "S1")
			t.Namespaces = []string{"default"}
			return t
		}())), fits: true},
		{name: "affinity: first of a self-selecting group", pred: p, node: zc, pod: mkPod("p", podLabels("app", "db"), req(term(LabelZone, "app", "db"))), fits: true},
		{name: "affinity: nothing selected, not self", pred: p, node: zc, pod: mkPod("p", req(term(LabelZone, "app", "db")))},
		{name: "affinity: all terms must hold", pred: p, node: zb, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", req(term(LabelZone, "security", "S1"), term(LabelHostname, "security", "S1")))},
		{name: "anti-affinity: same zone", pred: p, node: zb, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", anti(term(LabelZone, "security", "S1")))},
		{name: "anti-affinity: other zone", pred: p, node: zc, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", anti(term(LabelZone, "security", "S1"))), fits: true},
		{name: "anti-affinity: hostname", pred: p, node: zb, others: []*api.Node{za}, existing: []*api.Pod{s1}, pod: mkPod("p", anti(term(LabelHostname, "security", "S1"))), fits: true},
		{name: "existing pod's anti-affinity keeps the new pod out", pred: p, node: zb, others: []*api.Node{za},
			existing: []*api.Pod{mkPod("e", onNode("a"), anti(term(LabelZone, "app", "web")))}, pod: mkPod("p", podLabels("app", "web"))},
		{name: "existing pod's anti-affinity: other zone", pred: p, node: zc, others: []*api.Node{za},
			existing: []*api.Pod{mkPod("e", onNode("a"), anti(term(LabelZone, "app", "web")))}, pod: mkPod("p", podLabels("app", "web")), fits: true},
		{name: "existing pod's anti-affinity: not selected", pred: p, node: zb, others: []*api.Node{za},
			existing: []*api.Pod{mkPod("e", onNode("a"), anti(term(LabelZone, "app", "web")))}, pod: mkPod("p", podLabels("app", "db")), fits: true},
	})
}
