package controller_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
)

// BenchmarkInformerMemory150000Pods is the live heap one informer's cache
// adds for 150,000 pods in 30 namespaces (the scale bench's shape; the
// leader runs two pod informers: the controllers' and the scheduler's).
func BenchmarkInformerMemory150000Pods(b *testing.B) {
	const numPods, numNS = 150000, 30
	f := controllertest.New()
	ctx := context.Background()
	for i := range numNS {
		if _, err := f.Create(ctx, &api.Namespace{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("scale-%02d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range numPods {
		p := pod(fmt.Sprintf("pod-%06d", i))
		p.Namespace = fmt.Sprintf("scale-%02d", i%numNS)
		if _, err := f.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		before := controllertest.LiveHeapMiB()
		ctx, cancel := context.WithCancel(ctx)
		inf := controller.NewInformer(f, podsR, nil)
		done := make(chan struct{})
		go func() {
			inf.Run(ctx, func(controller.Event) {})
			close(done)
		}()
		<-inf.Synced()
		b.ReportMetric(controllertest.LiveHeapMiB()-before, "cache-MiB")
		cancel()
		<-done
		runtime.KeepAlive(inf)
	}
}
