package controller

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Event is one change an Informer saw. Old is the cached object before a
// Modified or Deleted (nil for Added).
type Event struct {
	Type   string // api.Added, api.Modified or api.Deleted
	Object api.Object
	Old    api.Object
}

// Informer keeps a cache of every object of one resource, current from a
// list and a watch, and tells its handlers of each change. A watch that
// ends with a 410 (it fell behind) is replaced by a fresh list, and the
// handlers are told only the differences, so they never miss a deletion.
// Informers shares one Informer between loops (the leader's scheduler and
// controllers), so that they keep one cache of each resource.
type Informer struct {
	c   Client
	r   *api.Resource
	log *slog.Logger

	// deliver is held while the cache takes a change and the handlers
	// hear of it, and while a handler joins: a handler that joins late
	// hears the cache as Added, then every change after it, none twice.
	deliver  sync.Mutex
	handlers []*handler

	mu sync.RWMutex
	// items holds the objects by namespace ("" for cluster objects), then
	// name. Keyed by the object's own strings, the cache adds no key of
	// its own per object (at 150,000 pods a "namespace/name" string each
	// was 4 MiB per informer on the leader; issue 16 item 3).
	items  map[string]map[string]api.Object
	synced chan struct{}
	// rv is the resourceVersion whose changes are all in items and were
	// all handled; set after the handler returns, never before.
	rv atomic.Uint64
}

// NewInformer returns an informer of r; Run starts it.
func NewInformer(c Client, r *api.Resource, log *slog.Logger) *Informer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Informer{c: c, r: r, log: log.With("resource", r.Plural), items: map[string]map[string]api.Object{}, synced: make(chan struct{})}
}

// Key is the cache key of namespace/name ("name" for cluster objects).
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// KeyOf is the cache key of obj.
func KeyOf(obj api.Object) string {
	m := obj.GetObjectMeta()
	return Key(m.Namespace, m.Name)
}

// Get returns the cached object namespace/name.
func (i *Informer) Get(namespace, name string) (api.Object, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	obj, ok := i.items[namespace][name]
	return obj, ok
}

// List returns every cached object, in no order.
func (i *Informer) List() []api.Object {
	i.mu.RLock()
	defer i.mu.RUnlock()
	n := 0
	for _, ns := range i.items {
		n += len(ns)
	}
	out := make([]api.Object, 0, n)
	for _, ns := range i.items {
		out = slices.AppendSeq(out, maps.Values(ns))
	}
	return out
}

// InNamespace returns the cached objects of one namespace, in no order.
func (i *Informer) InNamespace(namespace string) []api.Object {
	i.mu.RLock()
	defer i.mu.RUnlock()
	ns := i.items[namespace]
	return slices.AppendSeq(make([]api.Object, 0, len(ns)), maps.Values(ns))
}

// putIn puts obj in items and returns the object it replaces, or nil.
func putIn(items map[string]map[string]api.Object, obj api.Object) api.Object {
	m := obj.GetObjectMeta()
	ns := items[m.Namespace]
	if ns == nil {
		ns = map[string]api.Object{}
		items[m.Namespace] = ns
	}
	prev := ns[m.Name]
	ns[m.Name] = obj
	return prev
}

// remove drops namespace/name from the cache and returns what it held,
// or nil.
func (i *Informer) remove(namespace, name string) api.Object {
	ns := i.items[namespace]
	prev := ns[name]
	if prev == nil {
		return nil
	}
	delete(ns, name)
	if len(ns) == 0 {
		delete(i.items, namespace)
	}
	return prev
}

// ResourceVersion is how far the cache has caught up: every change of
// the resource up to this resourceVersion is in the cache and its handlers
// have returned. A loop that wrote an object at resourceVersion N and
// reads the cache only once ResourceVersion() >= N sees its own write
// (or a later change of that object). Changes that one raft entry made
// together share a resourceVersion; after the first of them is handled
// the others may still be on their way.
func (i *Informer) ResourceVersion() uint64 { return i.rv.Load() }

// advance moves ResourceVersion forward to rv.
func (i *Informer) advance(rv uint64) {
	for {
		cur := i.rv.Load()
		if rv <= cur || i.rv.CompareAndSwap(cur, rv) {
			return
		}
	}
}

// Synced is closed once the first list is in the cache and its Added
// events were handled.
func (i *Informer) Synced() <-chan struct{} { return i.synced }

// handler is one loop's callback. A pointer, so that the one added is
// the one removed even if two loops pass the same func.
type handler struct{ on func(Event) }

// Run lists and watches until ctx ends, calling on for every change, in
// order, from this goroutine; the cache already holds the change when on
// runs. A slow on delays the watch; one far too slow makes the store drop
// it, and Run lists again. Run is for an informer of one's own; one from
// Informers is served by the set, and takes handlers through Handle.
func (i *Informer) Run(ctx context.Context, on func(Event)) {
	i.Handle(ctx, on)
	i.serve(ctx)
}

// Handle adds on to the handlers until ctx ends or remove is called,
// whichever is first; once remove has returned, on hears nothing more.
// on hears every change in order and never two at once. If the informer
// has listed already, on hears every cached object as Added before Handle
// returns; so once Handle has returned and Synced is closed, on has heard
// all that is in the cache. on must not wait for the informer (Handle,
// remove, ResourceVersion).
func (i *Informer) Handle(ctx context.Context, on func(Event)) (remove func()) {
	h := &handler{on: on}
	remove = func() {
		i.deliver.Lock()
		defer i.deliver.Unlock()
		i.handlers = slices.DeleteFunc(i.handlers, func(x *handler) bool { return x == h })
	}
	i.deliver.Lock()
	defer i.deliver.Unlock()
	if ctx.Err() != nil {
		return func() {}
	}
	select {
	case <-i.synced:
		// Only the goroutine that serves changes items, and it waits for
		// deliver: no lock is needed to read them.
		for _, ns := range i.items {
			for _, obj := range ns {
				on(Event{Type: api.Added, Object: obj})
			}
		}
	default:
		// The first list has not been handled: it will be, by on too.
	}
	i.handlers = append(i.handlers, h)
	context.AfterFunc(ctx, remove)
	return remove
}

// tell hands ev to every handler; the caller holds deliver.
func (i *Informer) tell(ev Event) {
	for _, h := range i.handlers {
		h.on(ev)
	}
}

// serve lists and watches until ctx ends, telling the handlers.
func (i *Informer) serve(ctx context.Context) {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		rv, err := i.relist()
		if err != nil {
			i.log.Warn("list failed; retrying", "err", err, "retry_in", backoff)
			if !Sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if i.watch(ctx, rv) {
			backoff = 10 * time.Millisecond
		}
	}
}

// relist replaces the cache with a fresh list and reports the differences.
func (i *Informer) relist() (uint64, error) {
	objs, rv, err := i.c.List(i.r)
	if err != nil {
		return 0, err
	}
	fresh := map[string]map[string]api.Object{}
	for _, obj := range objs {
		putIn(fresh, obj)
	}
	i.deliver.Lock()
	defer i.deliver.Unlock()
	i.mu.Lock()
	old := i.items
	i.items = fresh
	i.mu.Unlock()
	for nsName, ns := range fresh {
		oldNS := old[nsName]
		for name, obj := range ns {
			prev, ok := oldNS[name]
			switch {
			case !ok:
				i.tell(Event{Type: api.Added, Object: obj})
			case prev.GetObjectMeta().ResourceVersion != obj.GetObjectMeta().ResourceVersion:
				i.tell(Event{Type: api.Modified, Object: obj, Old: prev})
			}
		}
	}
	for nsName, ns := range old {
		freshNS := fresh[nsName]
		for name, prev := range ns {
			if _, ok := freshNS[name]; !ok {
				i.tell(Event{Type: api.Deleted, Object: prev, Old: prev})
			}
		}
	}
	i.advance(rv)
	// Closed while deliver is held, so that a handler joining now either
	// is told the list above or is replayed the cache, never both.
	select {
	case <-i.synced:
	default:
		close(i.synced)
	}
	return rv, nil
}

// watch follows changes after rv until the watch ends; it reports whether
// it got as far as receiving anything (else the caller backs off).
func (i *Informer) watch(ctx context.Context, rv uint64) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := i.c.Watch(ctx, i.r, rv)
	if err != nil {
		i.log.Warn("watch failed; listing again", "err", err)
		return false
	}
	got := false
	for ev := range ch {
		got = true
		if ev.Type == api.Error {
			i.log.Info("watch ended; listing again", "err", ev.Err)
			return true
		}
		if ev.Object == nil || ev.Type == api.Bookmark {
			i.advance(ev.RV)
			continue
		}
		i.apply(ev)
	}
	return got
}

// apply puts one watched change in the cache and tells the handlers.
func (i *Informer) apply(ev api.WatchEvent) {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	var prev api.Object
	i.mu.Lock()
	if ev.Type == api.Deleted {
		m := ev.Object.GetObjectMeta()
		prev = i.remove(m.Namespace, m.Name)
	} else {
		prev = putIn(i.items, ev.Object)
	}
	i.mu.Unlock()
	typ := ev.Type
	if typ == api.Added && prev != nil {
		typ = api.Modified
	}
	if typ != api.Deleted || prev != nil {
		i.tell(Event{Type: typ, Object: ev.Object, Old: prev})
	}
	i.advance(ev.RV)
}

// Sleep waits d or until ctx ends; it reports whether d passed. The
// leader's loops and the core back off with it.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
