package stats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// stubRuntime holds containers and their cumulative counters; the test
// moves the counters and the clock between samples.
type stubRuntime struct {
	mu      sync.Mutex
	now     time.Time
	list    []runtime.ContainerStatus
	usage   map[string]runtime.Usage
	listErr error
}

func (r *stubRuntime) ListContainers(context.Context) ([]runtime.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list), r.listErr
}

func (r *stubRuntime) ContainerUsage(_ context.Context, id string) (runtime.Usage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.usage[id]
	if !ok {
		return runtime.Usage{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	u.Time = r.now
	return u, nil
}

func (r *stubRuntime) add(ns, pod, name string, attempt int, state runtime.State, started time.Time) string {
	id := fmt.Sprintf("%s-%s-%s-%d", ns, pod, name, attempt)
	r.list = append(r.list, runtime.ContainerStatus{ID: id, State: state, StartedAt: started, Labels: map[string]string{
		runtime.LabelPodUID: "uid-" + pod, runtime.LabelPodNamespace: ns, runtime.LabelPodName: pod,
		runtime.LabelContainer: name, runtime.LabelAttempt: fmt.Sprint(attempt),
	}})
	return id
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSamplerRates(t *testing.T) {
	rt := &stubRuntime{now: t0, usage: map[string]runtime.Usage{}}
	rt.add("default", "web", "app", 0, runtime.StateExited, t0.Add(-time.Hour))
	app := rt.add("default", "web", "app", 1, runtime.StateRunning, t0.Add(-time.Minute))
	side := rt.add("default", "web", "sidecar", 0, runtime.StateRunning, t0.Add(-time.Minute))
	rt.usage[app] = runtime.Usage{CPUNanos: 1e9, MemoryWorkingSetBytes: 100 << 20}
	rt.usage[side] = runtime.Usage{CPUNanos: 5e8, MemoryWorkingSetBytes: 10 << 20}
	node := cgroups.Reading{CPUNanos: 100e9, WorkingSetBytes: 1 << 30}
	var errs []error
	s := New(Config{
		Runtime: rt, NodeName: "edge-1",
		Node:    func() (cgroups.Reading, error) { return node, nil },
		Now:     func() time.Time { return rt.now },
		OnError: func(err error) { errs = append(errs, err) },
	})
	ctx := context.Background()

	// One reading: cumulative figures and memory, no rate yet.
	s.Sample(ctx)
	sum := s.Summary()
	if sum.Kind != wire.KindSummary || sum.Node.NodeName != "edge-1" || sum.Node.CPU == nil || sum.Node.CPU.UsageNanoCores != nil ||
		sum.Node.CPU.UsageCoreNanoSeconds != 100e9 || sum.Node.Memory.WorkingSetBytes != 1<<30 {
		t.Fatalf("after one reading: node %+v %+v", sum.Node.CPU, sum.Node.Memory)
	}
	if len(sum.Pods) != 1 || len(sum.Pods[0].Containers) != 2 || sum.Pods[0].Containers[0].CPU.UsageNanoCores != nil {
		t.Fatalf("after one reading: pods %+v", sum.Pods)
	}

	// Ten seconds on: the node used 5 core-seconds (500m), app 2.5
	// (250m); sidecar restarted, so its new container has no rate.
	rt.now = t0.Add(10 * time.Second)
	node.CPUNanos += 5e9
	rt.usage[app] = runtime.Usage{CPUNanos: 3.5e9, MemoryWorkingSetBytes: 120 << 20}
	rt.list = slices.DeleteFunc(rt.list, func(c runtime.ContainerStatus) bool { return c.ID == side })
	side1 := rt.add("default", "web", "sidecar", 1, runtime.StateRunning, rt.now)
	rt.usage[side1] = runtime.Usage{CPUNanos: 1e6, MemoryWorkingSetBytes: 5 << 20}
	s.Sample(ctx)
	sum = s.Summary()
	if c := sum.Node.CPU; c.UsageNanoCores == nil || *c.UsageNanoCores != 500_000_000 || c.WindowNanos != int64(10*time.Second) || !c.Time.Equal(rt.now) {
		t.Errorf("node CPU after two readings: %+v, want 500000000 nanocores over 10s at %v", c, rt.now)
	}
	got := map[string]wire.ContainerStats{}
	for _, c := range sum.Pods[0].Containers {
		got[c.Name] = c
	}
	if c := got["app"]; c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 250_000_000 || c.Memory.WorkingSetBytes != 120<<20 || c.CPU.UsageCoreNanoSeconds != 3.5e9 {
		t.Errorf("app: cpu %+v memory %+v, want 250000000 nanocores and 120 MiB", c.CPU, c.Memory)
	}
	if c := got["sidecar"]; c.CPU.UsageNanoCores != nil || !c.StartTime.Equal(rt.now) {
		t.Errorf("restarted sidecar: %+v, want no rate on its first reading", c.CPU)
	}

	// The runtime not answering keeps the last readings; the error is
	// counted.
	rt.listErr = runtime.ErrUnavailable
	s.Sample(ctx)
	if len(errs) != 1 || !errors.Is(errs[0], runtime.ErrUnavailable) {
		t.Errorf("errors reported: %v, want the list's", errs)
	}
	if sum := s.Summary(); len(sum.Pods) != 1 || len(sum.Pods[0].Containers) != 2 {
		t.Errorf("after a failed list: %+v, want the last readings", sum.Pods)
	}
	rt.listErr = nil

	// A counter that went back (a cgroup made again under the same ID)
	// gives no rate rather than a huge one.
	rt.now = rt.now.Add(10 * time.Second)
	rt.usage[app] = runtime.Usage{CPUNanos: 1e9, MemoryWorkingSetBytes: 120 << 20}
	s.Sample(ctx)
	for _, c := range s.Summary().Pods[0].Containers {
		if c.Name == "app" && c.CPU.UsageNanoCores != nil {
			t.Errorf("app after its counter went back: %d nanocores, want none", *c.CPU.UsageNanoCores)
		}
	}
}

func TestCollector(t *testing.T) {
	rt := &stubRuntime{now: t0, usage: map[string]runtime.Usage{}}
	rt.add("default", "web", "app", 0, runtime.StateExited, t0.Add(-time.Hour))
	rt.add("default", "web", "app", 1, runtime.StateExited, t0.Add(-time.Hour))
	app := rt.add("default", "web", "app", 2, runtime.StateRunning, t0.Add(-time.Minute))
	db := rt.add("data", "db", "pg", 0, runtime.StateRunning, t0.Add(-time.Minute))
	rt.usage[app] = runtime.Usage{CPUNanos: 1.5e9, MemoryWorkingSetBytes: 100 << 20}
	rt.usage[db] = runtime.Usage{CPUNanos: 2e9, MemoryWorkingSetBytes: 50 << 20}
	s := New(Config{Runtime: rt, Now: func() time.Time { return t0 },
		Node: func() (cgroups.Reading, error) { return cgroups.Reading{CPUNanos: 42e9, WorkingSetBytes: 1 << 30}, nil }})
	s.Sample(context.Background())
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
			if mf.GetName() != "kube_pod_container_status_restarts_total" && m.GetTimestampMs() != t0.UnixMilli() {
				t.Errorf("%s: timestamp %d, want the reading's %d", mf.GetName(), m.GetTimestampMs(), t0.UnixMilli())
			}
		}
	}
	for k, want := range map[string]float64{
		"node_cpu_usage_seconds_total{}":                                                    42,
		"node_memory_working_set_bytes{}":                                                   1 << 30,
		"container_cpu_usage_seconds_total{container=app,namespace=default,pod=web}":        1.5,
		"container_memory_working_set_bytes{container=pg,namespace=data,pod=db}":            50 << 20,
		"pod_cpu_usage_seconds_total{namespace=data,pod=db}":                                2,
		"pod_memory_working_set_bytes{namespace=default,pod=web}":                           100 << 20,
		"kube_pod_container_status_restarts_total{container=app,namespace=default,pod=web}": 2,
		"kube_pod_container_status_restarts_total{container=pg,namespace=data,pod=db}":      0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}
