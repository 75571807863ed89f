package controller_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
	"github.com/outpost-edge/outpost/controlplane/store"
)

var podsR = api.ResourceForKind("Pod")

func pod(name string) *api.Pod {
	return &api.Pod{ObjectMeta: api.ObjectMeta{Name: name, Namespace: "default"},
		Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "img"}}}}
}

type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) on(ev controller.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev.Type+" "+controller.KeyOf(ev.Object))
}

func (r *recorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e == s {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not standing in for one
	}
}

// The informer lists, then follows the watch: the cache and the handler
// see creates, updates and deletes in order.
func TestInformerFollowsChanges(t *testing.T) {
	f := controllertest.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := f.Create(ctx, pod("before")); err != nil {
		t.Fatal(err)
	}
	inf := controller.NewInformer(f, podsR, nil)
	rec := &recorder{}
	go inf.Run(ctx, rec.on)
	<-inf.Synced()
	if !rec.has("ADDED default/before") {
		t.Fatalf("initial list not delivered: %v", rec.evs)
	}
	p, err := f.Create(ctx, pod("after"))
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := controller.Copy(p)
	cp.GetObjectMeta().Labels = map[string]string{"x": "y"}
	if _, err := f.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, podsR, "default", "before", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "delete seen", func() bool { return rec.has("DELETED default/before") })
	if !rec.has("ADDED default/after") || !rec.has("MODIFIED default/after") {
		t.Fatalf("events: %v", rec.evs)
	}
	if _, ok := inf.Get("default", "before"); ok {
		t.Fatal("deleted pod still cached")
	}
	got, ok := inf.Get("default", "after")
	if !ok || got.GetObjectMeta().Labels["x"] != "y" {
		t.Fatalf("cache has %v", got)
	}
}

// A watcher the store drops (410) relists, and the handler learns of a
// delete it missed meanwhile.
func TestInformerRelistReportsMissedDelete(t *testing.T) {
	f := controllertest.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range []string{"a", "b"} {
		if _, err := f.Create(ctx, pod(n)); err != nil {
			t.Fatal(err)
		}
	}
	inf := controller.NewInformer(f, podsR, nil)
	rec := &recorder{}
	block := make(chan struct{})
	var once sync.Once
	go inf.Run(ctx, func(ev controller.Event) {
		rec.on(ev)
		if ev.Type == api.Modified {
			once.Do(func() { <-block }) // a slow handler: the store drops the watch
		}
	})
	<-inf.Synced()
	a, _ := inf.Get("default", "a")
	cp, _ := controller.Copy(a)
	cp.GetObjectMeta().Labels = map[string]string{"v": "1"}
	if _, err := f.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "handler blocked", func() bool { return rec.has("MODIFIED default/a") })
	// While the handler blocks, flood the watch until the store drops
	// it, then delete b: no watch event will tell of it.
	for i := range store.DefaultWatcherBuffer + 200 {
		cur, _ := f.Get(podsR, "default", "a")
		cp, _ := controller.Copy(cur)
		cp.GetObjectMeta().Labels = map[string]string{"v": string(rune('a' + i%26))}
		if _, err := f.Update(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Delete(ctx, podsR, "default", "b", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	close(block)
	waitFor(t, "missed delete reported", func() bool { return rec.has("DELETED default/b") })
	if _, ok := inf.Get("default", "b"); ok {
		t.Fatal("b still cached after relist")
	}
}

// The cache answers by namespace, and forgets a namespace's last object.
func TestInformerInNamespace(t *testing.T) {
	f := controllertest.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, p := range []*api.Pod{pod("a"), pod("b"), pod("c")} {
		if p.Name == "c" {
			p.Namespace = "outpost-system"
		}
		if _, err := f.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	inf := controller.NewInformer(f, podsR, nil)
	rec := &recorder{}
	go inf.Run(ctx, rec.on)
	<-inf.Synced()
	names := func(objs []api.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetObjectMeta().Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(inf.InNamespace("default")); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("default holds %v, want [a b]", got)
	}
	if got := names(inf.List()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("List = %v, want [a b c]", got)
	}
	if err := f.Delete(ctx, podsR, "outpost-system", "c", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "delete seen", func() bool { return rec.has("DELETED outpost-system/c") })
	if got := inf.InNamespace("outpost-system"); len(got) != 0 {
		t.Fatalf("outpost-system still holds %v", names(got))
	}
	if got := names(inf.List()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("List = %v after the delete, want [a b]", got)
	}
	if _, ok := inf.Get("outpost-system", "c"); ok {
		t.Fatal("deleted pod still cached")
	}
}
