package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
)

// BenchmarkControllersMemory5000Nodes150000Pods is the live heap the
// controllers take on the leader for the cluster of testing/bench's scale
// section: 5,000 Ready nodes and 150,000 Running pods without owners in
// 30 namespaces (issue 16 item 3). It counts what Run adds once its
// informers have listed and its queues are empty: the informers' caches,
// the indexes and what each controller keeps per object.
func BenchmarkControllersMemory5000Nodes150000Pods(b *testing.B) {
	const numNodes, numPods, numNS = 5000, 150000, 30
	f := controllertest.New()
	ctx := context.Background()
	for i := range numNS {
		if _, err := f.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("scale-%02d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	now := api.NewTime(time.Now())
	for i := range numNodes {
		n := newNode(fmt.Sprintf("node-%05d", i), map[string]string{"kubernetes.io/hostname": fmt.Sprintf("node-%05d", i)})
		n.Status.Conditions[0].LastHeartbeatTime = now
		if _, err := f.Create(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	for i := range numPods {
		ns := fmt.Sprintf("scale-%02d", (i/numNodes)%numNS)
		p := &api.Pod{
			ObjectMeta: api.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%06d", i), Labels: map[string]string{"app": ns, "tier": "scale"}},
			Spec: api.PodSpec{NodeName: fmt.Sprintf("node-%05d", i%numNodes), Containers: []api.Container{{Name: "app", Image: "registry.local/app:1",
				Resources: api.ResourceRequirements{Requests: api.ResourceList{"cpu": api.MustParseQuantity("10m"), "memory": api.MustParseQuantity("16Mi")}}}}},
			Status: api.PodStatus{Phase: api.PodRunning, Conditions: []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}},
		}
		if _, err := f.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		before := controllertest.LiveHeapMiB()
		ctx, cancel := context.WithCancel(ctx)
		started := make(chan []*loop, 1)
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, Config{Client: f, Logger: slogDiscard()}, hooks{running: func(loops []*loop) { started <- loops }})
		}()
		loops := <-started
		deadline := time.Now().Add(5 * time.Minute)
		for idle := 0; idle < 3; {
			if time.Now().After(deadline) {
				b.Fatal("the controllers' queues did not empty in 5 minutes")
			}
			idle++
			for _, l := range loops {
				if l.q.Len() > 0 {
					idle = 0
				}
			}
			time.Sleep(20 * time.Millisecond) // polls the queues; nothing to wait on
		}
		b.ReportMetric(controllertest.LiveHeapMiB()-before, "controllers-MiB")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
