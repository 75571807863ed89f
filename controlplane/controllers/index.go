package controllers

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// index keeps the objects of one informer by the UID of each of their
// owners, and the names of those without a controller, so that a
// reconcile looks at one namespace or one owner's dependents instead of
// every object. It holds the informer's (shared, never changed) objects;
// by namespace, it reads the informer's own cache, which keeps them so,
// rather than a second map of its own (at 150,000 pods each map of them
// is megabytes on the leader; issue 16 item 3).
type index struct {
	inf     *controller.Informer
	mu      sync.RWMutex
	byOwner map[string]map[objKey]api.Object // owner UID → dependents
	// orphans holds, by namespace, the names of the objects without a
	// controller: the ones an owner may adopt.
	orphans map[string]map[string]struct{}
}

// objKey names a namespaced object with the object's own strings: a
// map keyed by it allocates no "namespace/name" per object.
type objKey struct{ namespace, name string }

func keyOf(m *api.ObjectMeta) objKey { return objKey{m.Namespace, m.Name} }

func newIndex(inf *controller.Informer) *index {
	return &index{inf: inf, byOwner: map[string]map[objKey]api.Object{}, orphans: map[string]map[string]struct{}{}}
}

// apply follows one informer event.
func (x *index) apply(ev controller.Event) {
	m := ev.Object.GetObjectMeta()
	key := keyOf(m)
	x.mu.Lock()
	defer x.mu.Unlock()
	if ev.Old != nil {
		x.unlinkOwners(key, ev.Old.GetObjectMeta())
	}
	if ev.Type == api.Deleted {
		x.unlinkOwners(key, m)
		x.unlinkOrphan(m)
		return
	}
	if api.ControllerRef(m) == nil {
		names := x.orphans[m.Namespace]
		if names == nil {
			names = map[string]struct{}{}
			x.orphans[m.Namespace] = names
		}
		names[m.Name] = struct{}{}
	} else {
		x.unlinkOrphan(m)
	}
	for i := range m.OwnerReferences {
		uid := m.OwnerReferences[i].UID
		deps := x.byOwner[uid]
		if deps == nil {
			deps = map[objKey]api.Object{}
			x.byOwner[uid] = deps
		}
		deps[key] = ev.Object
	}
}

func (x *index) unlinkOrphan(m *api.ObjectMeta) {
	if names := x.orphans[m.Namespace]; names != nil {
		delete(names, m.Name)
		if len(names) == 0 {
			delete(x.orphans, m.Namespace)
		}
	}
}

// unlinkOwners removes key from the dependents of m's owners.
func (x *index) unlinkOwners(key objKey, m *api.ObjectMeta) {
	for i := range m.OwnerReferences {
		uid := m.OwnerReferences[i].UID
		if deps := x.byOwner[uid]; deps != nil {
			delete(deps, key)
			if len(deps) == 0 {
				delete(x.byOwner, uid)
			}
		}
	}
}

// get returns the object namespace/name.
func (x *index) get(namespace, name string) (api.Object, bool) { return x.inf.Get(namespace, name) }

// inNamespace returns the objects of a namespace, in no order.
func (x *index) inNamespace(namespace string) []api.Object { return x.inf.InNamespace(namespace) }

// orphansIn returns the objects of a namespace without a controller. The
// informer's version is returned, as it is by get; one adopted since
// (whose event is still on its way here) is no orphan any more.
func (x *index) orphansIn(namespace string) []api.Object {
	x.mu.RLock()
	defer x.mu.RUnlock()
	names := x.orphans[namespace]
	out := make([]api.Object, 0, len(names))
	for name := range names {
		if obj, ok := x.inf.Get(namespace, name); ok && api.ControllerRef(obj.GetObjectMeta()) == nil {
			out = append(out, obj)
		}
	}
	return out
}

// ownedBy returns the objects with an ownerReference to uid, in no order.
func (x *index) ownedBy(uid string) []api.Object {
	x.mu.RLock()
	defer x.mu.RUnlock()
	deps := x.byOwner[uid]
	return slices.AppendSeq(make([]api.Object, 0, len(deps)), maps.Values(deps))
}

// selectors caches parsed selectors by owner UID: a workload's selector
// may not change after creation, so it is parsed once.
type selectors struct {
	mu sync.Mutex
	m  map[string]api.Selector
}

func newSelectors() *selectors { return &selectors{m: map[string]api.Selector{}} }

// of returns the parsed selector of obj.
func (s *selectors) of(obj api.Object, ls *api.LabelSelector) (api.Selector, error) {
	uid := obj.GetObjectMeta().UID
	s.mu.Lock()
	sel, ok := s.m[uid]
	s.mu.Unlock()
	if ok {
		return sel, nil
	}
	sel, err := api.SelectorFromLabelSelector(ls)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.m[uid] = sel
	s.mu.Unlock()
	return sel, nil
}

// drop forgets a deleted owner's selector.
func (s *selectors) drop(uid string) {
	s.mu.Lock()
	delete(s.m, uid)
	s.mu.Unlock()
}

// tracker remembers, per controller key, the writes the controller made
// that its caches may not show yet: the resourceVersion of its last write
// per informer (creates and updates), and the objects it deleted that the
// cache still holds. See DESIGN.md, "Acting on a lagging cache".
type tracker struct {
	mu   sync.Mutex
	keys map[string]*tracked
}

type tracked struct {
	wrote    map[*controller.Informer]uint64
	deleting map[string]string // namespace/name → UID of the deleted object
}

func newTracker() *tracker { return &tracker{keys: map[string]*tracked{}} }

func (t *tracker) entry(key string) *tracked {
	e := t.keys[key]
	if e == nil {
		e = &tracked{wrote: map[*controller.Informer]uint64{}, deleting: map[string]string{}}
		t.keys[key] = e
	}
	return e
}

// wrote records that the reconcile of key wrote obj, which inf caches.
func (t *tracker) wrote(key string, inf *controller.Informer, obj api.Object) {
	rv, err := strconv.ParseUint(obj.GetObjectMeta().ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(key)
	if rv > e.wrote[inf] {
		e.wrote[inf] = rv
	}
}

// caughtUp reports whether every informer key's reconcile wrote to has
// caught up with those writes.
func (t *tracker) caughtUp(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.keys[key]
	if e == nil {
		return true
	}
	for inf, rv := range e.wrote {
		if inf.ResourceVersion() < rv {
			return false
		}
		delete(e.wrote, inf)
	}
	return true
}

// deleting records that key's reconcile is deleting obj.
func (t *tracker) deleting(key string, obj api.Object) {
	m := obj.GetObjectMeta()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entry(key).deleting[controller.Key(m.Namespace, m.Name)] = m.UID
}

// deleteFailed forgets a delete that did not happen.
func (t *tracker) deleteFailed(key string, obj api.Object) {
	m := obj.GetObjectMeta()
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.keys[key]; e != nil {
		delete(e.deleting, controller.Key(m.Namespace, m.Name))
	}
}

// pendingDeletes returns the UIDs of the objects key's reconcile deleted
// that x still holds, and forgets the others.
func (t *tracker) pendingDeletes(key string, x *index) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.keys[key]
	if e == nil || len(e.deleting) == 0 {
		return nil
	}
	out := make(map[string]bool, len(e.deleting))
	for k, uid := range e.deleting {
		ns, name, _ := splitKey(k)
		if obj, ok := x.get(ns, name); ok && obj.GetObjectMeta().UID == uid {
			out[uid] = true
			continue
		}
		delete(e.deleting, k)
	}
	return out
}

// forget drops what is tracked for a key whose object is gone.
func (t *tracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}
