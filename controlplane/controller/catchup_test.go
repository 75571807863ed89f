package controller_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
)

// ResourceVersion reaches a write's resourceVersion only once the handler
// of that write has returned: a loop that waits for it reads its own
// write from the cache.
func TestInformerResourceVersionCoversHandledWrites(t *testing.T) {
	f := controllertest.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf := controller.NewInformer(f, podsR, nil)
	release := make(chan struct{})
	handled := make(chan string, 10)
	go inf.Run(ctx, func(ev controller.Event) {
		if ev.Object.GetObjectMeta().Name == "slow" {
			<-release
		}
		handled <- ev.Object.GetObjectMeta().Name
	})
	<-inf.Synced()
	out, err := f.Create(ctx, pod("slow"))
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := strconv.ParseUint(out.GetObjectMeta().ResourceVersion, 10, 64)
	waitFor(t, "the event in the cache", func() bool { _, ok := inf.Get("default", "slow"); return ok })
	if got := inf.ResourceVersion(); got >= rv {
		t.Fatalf("ResourceVersion %d covers %d while its handler still runs", got, rv)
	}
	close(release)
	<-handled
	waitFor(t, "ResourceVersion to reach the write", func() bool { return inf.ResourceVersion() >= rv })
}

// Of two delayed adds of a key, the sooner one wins.
func TestQueueAddAfterKeepsTheSoonerRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := controller.NewQueue(10*time.Millisecond, time.Second)
		defer q.Stop()
		start := time.Now()
		q.AddAfter("x", 50*time.Millisecond)
		q.AddAfter("x", time.Minute)
		if k, ok := q.Get(context.Background()); !ok || k != "x" {
			t.Fatalf("Get = %q %v", k, ok)
		}
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Fatalf("key came back after %v, want 50ms: a later AddAfter pushed it back", got)
		}
	})
}
