package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/controller/controllertest"
)

// countingClient counts the lists and watches that reach the store.
type countingClient struct {
	*controllertest.Fake
	lists, watches atomic.Int32
}

func (c *countingClient) List(r *api.Resource) ([]api.Object, uint64, error) {
	c.lists.Add(1)
	return c.Fake.List(r)
}

func (c *countingClient) Watch(ctx context.Context, r *api.Resource, fromRV uint64) (<-chan api.WatchEvent, error) {
	c.watches.Add(1)
	return c.Fake.Watch(ctx, r, fromRV)
}

// informers returns a set over c that stops when the test ends.
func informers(t *testing.T, c controller.Client) (context.Context, *controller.Informers) {
	ctx, cancel := context.WithCancel(context.Background())
	infs := controller.NewInformers(ctx, c, nil)
	t.Cleanup(func() {
		cancel()
		infs.Wait()
	})
	return ctx, infs
}

// Two loops that ask one set for pods get one informer: one list, one
// watch, one cache, and each loop hears every change (issue 16 item 3:
// the leader's scheduler and controllers kept a pod cache each).
func TestInformersShareOneInformerPerResource(t *testing.T) {
	c := &countingClient{Fake: controllertest.New()}
	ctx, infs := informers(t, c)
	if _, err := c.Create(ctx, pod("before")); err != nil {
		t.Fatal(err)
	}
	a, b := infs.For(podsR), infs.For(api.ResourceForKind("Pod"))
	if a != b {
		t.Fatal("two informers of pods from one set")
	}
	if infs.For(api.ResourceForKind("Node")) == a {
		t.Fatal("nodes share the pods' informer")
	}
	recA, recB := &recorder{}, &recorder{}
	a.Handle(ctx, recA.on)
	b.Handle(ctx, recB.on)
	<-a.Synced()
	if _, err := c.Create(ctx, pod("after")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, podsR, "default", "before", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*recorder{recA, recB} {
		waitFor(t, "delete seen", func() bool { return rec.has("DELETED default/before") })
		if !rec.has("ADDED default/before") || !rec.has("ADDED default/after") {
			t.Fatalf("events: %v", rec.evs)
		}
	}
	// Pods and nodes: one list and one watch each.
	if l, w := c.lists.Load(), c.watches.Load(); l != 2 || w != 2 {
		t.Fatalf("%d lists and %d watches for two resources, want 2 and 2", l, w)
	}
}

// A handler that joins an informer already following a stream of
// changes hears the cache as Added and then every later change, each
// once and in order: per object, from the version it first hears, every
// version the store wrote, none twice, none missed.
func TestInformerLateHandlerHearsEachChangeOnce(t *testing.T) {
	f := controllertest.New()
	ctx, infs := informers(t, f)
	inf := infs.For(podsR)
	inf.Handle(ctx, func(controller.Event) {})
	<-inf.Synced()

	const pods, rounds = 20, 30
	var mu sync.Mutex
	wrote := map[string][]string{} // pod → the versions the store wrote
	heard := map[string][]string{} // pod → the versions the late handler heard
	var problems []string
	record := func(obj api.Object) {
		mu.Lock()
		defer mu.Unlock()
		m := obj.GetObjectMeta()
		wrote[m.Name] = append(wrote[m.Name], m.ResourceVersion)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range rounds {
			for i := range pods {
				name := fmt.Sprintf("p%d", i)
				if r == 0 {
					obj, err := f.Create(ctx, pod(name))
					if err != nil {
						t.Error(err)
						return
					}
					record(obj)
					continue
				}
				cur, err := f.Get(podsR, "default", name)
				if err != nil {
					t.Error(err)
					return
				}
				cp, _ := controller.Copy(cur)
				cp.GetObjectMeta().Labels = map[string]string{"round": strconv.Itoa(r)}
				obj, err := f.Update(ctx, cp)
				if err != nil {
					t.Error(err)
					return
				}
				record(obj)
			}
		}
	})
	late := func(ev controller.Event) {
		mu.Lock()
		defer mu.Unlock()
		m := ev.Object.GetObjectMeta()
		had := len(heard[m.Name]) > 0
		if (ev.Type == api.Added) == had {
			problems = append(problems, fmt.Sprintf("%s %s at %s after %v", ev.Type, m.Name, m.ResourceVersion, heard[m.Name]))
		}
		heard[m.Name] = append(heard[m.Name], m.ResourceVersion)
	}
	// Join while the writes go on.
	waitFor(t, "writes under way", func() bool { return len(inf.List()) > pods/2 })
	inf.Handle(ctx, late)
	wg.Wait()
	last, rv, err := f.List(podsR)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "informer caught up", func() bool { return inf.ResourceVersion() >= rv })
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the late handler heard Added twice or Modified first: %v", problems)
	}
	if len(last) != pods || len(heard) != pods {
		t.Fatalf("%d pods stored, the late handler heard of %d; want %d", len(last), len(heard), pods)
	}
	for name, h := range heard {
		w := wrote[name]
		i := slices.Index(w, h[0])
		if i < 0 || !slices.Equal(w[i:], h) {
			t.Fatalf("%s: the store wrote versions %v, the late handler heard %v", name, w, h)
		}
	}
}

// A handler whose context ended hears nothing more; the others do.
func TestInformerHandlerLeavesWithItsContext(t *testing.T) {
	f := controllertest.New()
	ctx, infs := informers(t, f)
	inf := infs.For(podsR)
	hctx, leave := context.WithCancel(ctx)
	var left atomic.Int32
	inf.Handle(hctx, func(controller.Event) { left.Add(1) })
	stay := &recorder{}
	inf.Handle(ctx, stay.on)
	<-inf.Synced()
	leave()
	// The removal runs soon after hctx ends, not at once: probe with
	// creates until one does not reach the handler that left.
	waitFor(t, "handler removed", func() bool {
		n := left.Load()
		if _, err := f.Create(ctx, pod(fmt.Sprintf("probe-%d", n))); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("default/probe-%d", n)
		waitFor(t, "probe seen", func() bool { return stay.has("ADDED " + name) })
		return left.Load() == n
	})
	if _, err := f.Create(ctx, pod("after")); err != nil {
		t.Fatal(err)
	}
	n := left.Load()
	waitFor(t, "later create seen", func() bool { return stay.has("ADDED default/after") })
	if left.Load() != n {
		t.Fatal("a handler whose context ended still hears changes")
	}
}

// Once remove has returned, its handler hears nothing more: a loop that
// stops removes its handlers before it returns, so a shared informer
// never feeds a loop that is gone.
func TestInformerHandlerRemovedAtOnce(t *testing.T) {
	f := controllertest.New()
	ctx, infs := informers(t, f)
	inf := infs.For(podsR)
	var heard atomic.Int32
	remove := inf.Handle(ctx, func(controller.Event) { heard.Add(1) })
	stay := &recorder{}
	inf.Handle(ctx, stay.on)
	<-inf.Synced()
	if _, err := f.Create(ctx, pod("before")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first create heard", func() bool { return heard.Load() == 1 })
	remove()
	if _, err := f.Create(ctx, pod("after")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "later create seen", func() bool { return stay.has("ADDED default/after") })
	if n := heard.Load(); n != 1 {
		t.Fatalf("the removed handler heard %d changes, want 1", n)
	}
	remove() // a second call changes nothing
}
