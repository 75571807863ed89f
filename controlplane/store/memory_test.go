package store

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// BenchmarkMemory150kPods measures the heap a store holds with 150,000
// running pods on 5,000 nodes (issue 16 item 3): each pod created, bound
// and given a Running status by its node, as in `outpost sim agents`.
// heap-MiB is the live heap after a collection. OUTPOST_HEAP_PROFILE names
// a file for the heap profile (go tool pprof -top -inuse_space FILE).
func BenchmarkMemory150kPods(b *testing.B) {
	const pods, nodes = 150000, 5000
	for range b.N {
		s := New(Options{})
		idx := uint64(1)
		apply := func(c []byte, err error) {
			if err != nil {
				b.Fatal(err)
			}
			if r, ok := s.Apply(idx, c).(*Result); ok && r.Err != nil {
				b.Fatal(r.Err)
			}
			idx++
		}
		for n := range 30 {
			apply(CreateCmd(newNamespace("team-" + strconv.Itoa(n))))
		}
		start := time.Unix(1_780_000_000, 0).UTC()
		for i := range pods {
			ns := "team-" + strconv.Itoa(i%30)
			name := "web-5d8f7c9b4-" + strconv.Itoa(i)
			node := "sim-node-" + strconv.Itoa(i%nodes)
			p := bigPod(ns, name, "")
			apply(CreateCmd(p))
			apply(BindCmd(ns, name, Binding{NodeName: node, Now: start}), nil)
			p.Spec.NodeName = node
			apply(UpdateCmd(runningStatus(p, i, start), SubresourceStatus))
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
		if f := os.Getenv("OUTPOST_HEAP_PROFILE"); f != "" {
			w, err := os.Create(f)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.WriteHeapProfile(w); err != nil {
				b.Fatal(err)
			}
			w.Close()
		}
		runtime.KeepAlive(s)
	}
}

// runningStatus is the status a node posts for a started pod.
func runningStatus(p *api.Pod, i int, start time.Time) *api.Pod {
	ip := "10.42." + strconv.Itoa(i/250%256) + "." + strconv.Itoa(i%250+2)
	t := api.NewTime(start.Add(time.Duration(i) * time.Millisecond))
	ready := true
	p.Status = api.PodStatus{
		Phase:  api.PodRunning,
		HostIP: "192.168.0." + strconv.Itoa(i%250+1),
		PodIP:  ip, PodIPs: []api.PodIPEntry{{IP: ip}},
		StartTime: t,
		QOSClass:  "Burstable",
		Conditions: []api.PodCondition{
			{Type: "PodScheduled", Status: "True", LastTransitionTime: t},
			{Type: "Initialized", Status: "True", LastTransitionTime: t},
			{Type: "ContainersReady", Status: "True", LastTransitionTime: t},
			{Type: "Ready", Status: "True", LastTransitionTime: t},
		},
		ContainerStatuses: []api.ContainerStatus{{
			Name: "web", Ready: true, Started: &ready,
			Image:       "registry.example/team/web-frontend:v1.24.3",
			ImageID:     "sha256:4c1e8a7d9f0b3e2a6c5d8f7e9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b",
			ContainerID: "containerd://" + strconv.Itoa(1_000_000+i),
			State:       api.ContainerState{Running: &api.ContainerStateRunning{StartedAt: t}},
		}},
	}
	return p
}
