package store

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// BenchmarkMemory150kPods measures the heap a store holds with 150,000
// running pods on 5,000 nodes (issue 16 item 3; runningPodsStore), and
// with the Scheduled event the scheduler records for each of them
// (WithEvents), what every server holds at that scale.
// heap-MiB is the live heap after a collection; gc-cycles and gc-cpu-% are
// the collections while building it and their share of the CPU. OUTPOST_HEAP_PROFILE names
// a file for the heap profile (go tool pprof -top -inuse_space FILE).
func BenchmarkMemory150kPods(b *testing.B) {
	b.Run("PodsOnly", func(b *testing.B) { benchMemory(b, false) })
	b.Run("WithEvents", func(b *testing.B) { benchMemory(b, true) })
}

func benchMemory(b *testing.B, events bool) {
	for range b.N {
		s := runningPodsStore(b, 150_000, 5000, events)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
		// What building it cost the collector: a smaller live heap means
		// more frequent collections at the same allocation rate.
		b.ReportMetric(float64(ms.NumGC), "gc-cycles")
		b.ReportMetric(100*ms.GCCPUFraction, "gc-cpu-%")
		if f := os.Getenv("OUTPOST_HEAP_PROFILE"); f != "" {
			if events {
				f += ".events"
			}
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

// runningPodsStore returns a store holding pods running pods on nodes
// nodes, in 30 namespaces: each pod created, bound and given a Running
// status by its node, as in `outpost sim agents`. Pod i is
// team-(i%30)/web-5d8f7c9b4-i on sim-node-(i%nodes). With events, each
// bind is followed by the Scheduled event the scheduler records for it
// (scheduledEvent).
func runningPodsStore(b *testing.B, pods, nodes int, events bool) *Store {
	s := New(Options{})
	idx := uint64(1)
	apply := func(c []byte, err error) *Result {
		if err != nil {
			b.Fatal(err)
		}
		r, ok := s.Apply(idx, c).(*Result)
		if ok && r.Err != nil {
			b.Fatal(r.Err)
		}
		idx++
		return r
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
		bound := apply(BindCmd(ns, name, Binding{NodeName: node, Now: start}), nil)
		if events {
			apply(CreateCmd(scheduledEvent(bound.Object.(*api.Pod), i, start)))
		}
		p.Spec.NodeName = node
		apply(UpdateCmd(runningStatus(p, i, start), SubresourceStatus))
	}
	return s
}

// scheduledEvent is the event the scheduler records for bound pod i, as
// core's scheduledEvent builds it and CreateBatch completes it (a random
// UID, the creation time).
func scheduledEvent(pod *api.Pod, i int, start time.Time) *api.Event {
	now := start.Add(time.Duration(i) * time.Millisecond)
	ts := api.NewTime(now)
	return &api.Event{
		ObjectMeta: api.ObjectMeta{
			Namespace: pod.Namespace, Name: fmt.Sprintf("%s.%x", pod.Name, uint64(now.UnixNano())),
			UID: fmt.Sprintf("%08x-1f2e-4d3c-8b4a-%012x", i, 0x5a5a_0000_0000+i), CreationTimestamp: ts,
		},
		InvolvedObject: api.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Reason:         "Scheduled",
		Message:        fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, pod.Spec.NodeName),
		Source:         api.EventSource{Component: api.DefaultSchedulerName},
		FirstTimestamp: ts,
		LastTimestamp:  ts,
		Count:          1,
		Type:           api.EventTypeNormal,
	}
}

// BenchmarkRead150kPods measures reads of a store holding 150,000 running
// pods on 5,000 nodes (issue 16 item 3), built once (about half a
// minute): Get of one pod and List of one node's 30 pods, what agents do;
// List of every pod; and writing a snapshot. The pods read were written
// long before (older than the watch window), as most are at that scale.
func BenchmarkRead150kPods(b *testing.B) {
	const pods, nodes = 150_000, 5000
	s := runningPodsStore(b, pods, nodes, false)
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			name := "web-5d8f7c9b4-" + strconv.Itoa(i)
			if _, raw, err := s.Get(rPods, "team-"+strconv.Itoa(i%30), name); err != nil || len(raw) == 0 {
				b.Fatal(name, err)
			}
			i = (i + 7) % 100_000
		}
	})
	b.Run("ListByNode", func(b *testing.B) {
		b.ReportAllocs()
		sels := make([]ListOptions, 100)
		for n := range sels {
			sels[n] = ListOptions{Field: fieldSel(b, "spec.nodeName=sim-node-"+strconv.Itoa(n*37))}
		}
		n := 0
		for b.Loop() {
			items, _, err := s.List(rPods, "", sels[n%len(sels)])
			if err != nil || len(items) != pods/nodes {
				b.Fatal(len(items), err)
			}
			n++
		}
	})
	b.Run("ListAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			items, _, err := s.List(rPods, "", ListOptions{})
			if err != nil || len(items) != pods {
				b.Fatal(len(items), err)
			}
		}
	})
	b.Run("Snapshot", func(b *testing.B) {
		// What raft's FSM goroutine does between two applies: no write
		// is applied meanwhile.
		b.ReportAllocs()
		for b.Loop() {
			snap, err := s.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			snap.Release()
		}
	})
	b.Run("Persist", func(b *testing.B) {
		// As in production: the detector would encode every object.
		defer func(on func() bool) { detectMutations = on }(detectMutations)
		detectMutations = func() bool { return false }
		b.ReportAllocs()
		var n int64
		for b.Loop() {
			snap, err := s.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			w := &countingWriter{}
			if err := snap.Persist(w); err != nil {
				b.Fatal(err)
			}
			snap.Release()
			n = w.n
		}
		b.ReportMetric(float64(n)/(1<<20), "snapshot-MiB")
	})
}

// countingWriter counts what is written to it and keeps none of it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
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
