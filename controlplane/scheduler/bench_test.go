package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/policy"
)

// benchNodes makes nodes shaped like kube-scheduler's scheduler_perf
// template (4 CPU, 32Gi, 110 pods), spread over 10 zones.
func benchNodes(n int) []*api.Node {
	nodes := make([]*api.Node, n)
	for i := range nodes {
		z := fmt.Sprintf("zone-%d", i%10)
		nodes[i] = mkNode(fmt.Sprintf("node-%05d", i), nodeLabels("zone", z, LabelZone, z, LabelHostname, fmt.Sprintf("node-%05d", i)))
	}
	return nodes
}

// benchPod is scheduler_perf's pod template: 100m CPU, 500Mi.
func benchPod(i int, opts ...podOpt) *api.Pod {
	return mkPod(fmt.Sprintf("pod-%06d", i), append([]podOpt{podRequest("cpu", "100m", "memory", "500Mi")}, opts...)...)
}

// runWorkload schedules pods one after another, assuming each binding,
// and reports pods/s and the p99 of one decision.
func runWorkload(b *testing.B, p *policy.Policy, numNodes, numPods int, setup func(*Cluster), mk func(i int) *api.Pod) {
	nodes := benchNodes(numNodes)
	pods := make([]*api.Pod, numPods)
	for i := range pods {
		pods[i] = mk(i)
	}
	lat := make([]time.Duration, 0, numPods)
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c := NewCluster()
		for _, n := range nodes {
			c.SetNode(n)
		}
		if setup != nil {
			setup(c)
		}
		s, err := New(Config{Policy: p, Rand: rand.New(rand.NewPCG(1, 2))})
		if err != nil {
			b.Fatal(err)
		}
		lat = lat[:0]
		b.StartTimer()
		start := time.Now()
		for _, pod := range pods {
			t0 := time.Now()
			res, err := s.Schedule(context.Background(), c, pod)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Assume(pod, res.Node); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		total += time.Since(start)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(numPods*b.N)/total.Seconds(), "pods/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// SchedulingBasic: 1,000 pods onto 5,000 nodes with the default policy.
func BenchmarkSchedulingBasic5000Nodes(b *testing.B) {
	runWorkload(b, nil, 5000, 1000, nil, func(i int) *api.Pod { return benchPod(i) })
}

// SchedulingBasic with 10,000 pods, the size of kube-scheduler's CI run.
func BenchmarkSchedulingBasic5000Nodes10000Pods(b *testing.B) {
	runWorkload(b, nil, 5000, 10000, nil, func(i int) *api.Pod { return benchPod(i) })
}

// PodAntiAffinity: 2,000 pods with required anti-affinity on the
// hostname against each other.
func BenchmarkPodAntiAffinity5000Nodes(b *testing.B) {
	anti := withAffinity(&api.Affinity{PodAntiAffinity: &api.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []api.PodAffinityTerm{
		{LabelSelector: &api.LabelSelector{MatchLabels: map[string]string{"color": "green"}}, TopologyKey: LabelHostname},
	}}})
	runWorkload(b, nil, 5000, 2000, nil, func(i int) *api.Pod { return benchPod(i, podLabels("color", "green"), anti) })
}

// Spreading by zone: 5,000 pods of one service, with the default policy's
// serviceAntiAffinity on zone and SelectorSpreadPriority.
func BenchmarkServiceSpreading5000Nodes(b *testing.B) {
	runWorkload(b, nil, 5000, 5000, func(c *Cluster) { c.SetService(mkService("web", "app", "web")) },
		func(i int) *api.Pod { return benchPod(i, podLabels("app", "web"), ownedBy("ReplicaSet", "rs-web")) })
}

// NodeAffinity: every pod requires one of two zones.
func BenchmarkNodeAffinity5000Nodes(b *testing.B) {
	na := withAffinity(nodeAffinityRequired(api.NodeSelectorTerm{MatchExpressions: []api.NodeSelectorRequirement{expr(LabelZone, "In", "zone-1", "zone-2")}}))
	runWorkload(b, nil, 5000, 1000, nil, func(i int) *api.Pod { return benchPod(i, na) })
}

// The memory the cluster cache takes at 5,000 nodes and 150,000 pods.
func BenchmarkClusterMemory5000Nodes150000Pods(b *testing.B) {
	nodes := benchNodes(5000)
	for range b.N {
		pods := make([]*api.Pod, 150000)
		for i := range pods {
			pods[i] = benchPod(i, onNode(nodes[i%len(nodes)].Name), podLabels("app", fmt.Sprintf("app-%d", i%500)), ownedBy("ReplicaSet", fmt.Sprintf("rs-%d", i%500)))
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := NewCluster()
		for _, n := range nodes {
			c.SetNode(n)
		}
		for _, p := range pods {
			if err := c.SetPod(p); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "cache-MiB")
		runtime.KeepAlive(c)
	}
}
