package loop

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
	"github.com/outpost-edge/outpost/controlplane/scheduler"
)

// benchFake returns a fake holding nodes shaped like kube-scheduler's
// scheduler_perf template (4 CPU, 32Gi, 110 pods) in 10 zones.
func benchFake(b *testing.B, numNodes int) *controllertest.Fake {
	b.Helper()
	f := controllertest.New()
	for i := range numNodes {
		z := fmt.Sprintf("zone-%d", i%10)
		n := mkNode(fmt.Sprintf("node-%05d", i), nodeLabels("zone", z, scheduler.LabelZone, z))
		if _, err := f.Create(context.Background(), n); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// runLoopBench measures pods/s end to end through the fake: a client
// creates the pods (scheduler_perf's template, 100m / 500Mi) while the
// loop lists, schedules and binds them; the clock stops when the last
// binding is acknowledged.
func runLoopBench(b *testing.B, numNodes, numPods int, preload bool) {
	var total time.Duration
	for range b.N {
		b.StopTimer()
		f := benchFake(b, numNodes)
		pods := make([]*api.Pod, numPods)
		for i := range pods {
			pods[i] = mkPod(fmt.Sprintf("pod-%06d", i))
		}
		createAll := func() {
			for _, p := range pods {
				if _, err := f.Create(context.Background(), p); err != nil {
					b.Error(err)
					return
				}
			}
		}
		if preload {
			createAll()
		}
		l, err := New(Config{
			Client:     f,
			Schedulers: map[string]*scheduler.Scheduler{api.DefaultSchedulerName: newScheduler(b, nil)},
			Logger:     slog.New(slog.DiscardHandler),
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		start := time.Now()
		go func() { done <- l.Run(ctx) }()
		if !preload {
			go createAll()
		}
		deadline := start.Add(5 * time.Minute)
		for l.Stats().Scheduled < uint64(numPods) {
			if time.Now().After(deadline) {
				b.Fatalf("timed out: %+v", l.Stats())
			}
			time.Sleep(time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if st := l.Stats(); st.Failed != 0 || st.Unschedulable != 0 {
			b.Fatalf("stats %+v", st)
		}
	}
	b.ReportMetric(float64(numPods*b.N)/total.Seconds(), "pods/s")
}

// SchedulingBasic, 5,000 nodes, 10,000 pods created while the loop runs.
func BenchmarkLoopSchedulingBasic5000Nodes10000Pods(b *testing.B) {
	runLoopBench(b, 5000, 10000, false)
}

// The same with the pods in the store before the loop starts: what a new
// leader finds.
func BenchmarkLoopSchedulingBasic5000Nodes10000PodsPreloaded(b *testing.B) {
	runLoopBench(b, 5000, 10000, true)
}
