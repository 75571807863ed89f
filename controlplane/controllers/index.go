package controllers

import (
	"strconv"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// index keeps the objects of one informer by namespace and by the UID of
// each of their owners, so that a reconcile looks at one namespace or one
// owner's dependents instead of every object. It holds the informer's
// (shared, never changed) objects.
type index struct {
	mu      sync.RWMutex
	byNS    map[string]map[string]api.Object
	byOwner map[string]map[string]api.Object // owner UID → namespace/name → object
	// orphans holds, by namespace, the objects without a controller: the
	// ones an owner may adopt.
	orphans map[string]map[string]api.Object
}

func newIndex() *index {
	return &index{byNS: map[string]map[string]api.Object{}, byOwner: map[string]map[string]api.Object{}, orphans: map[string]map[string]api.Object{}}
}

// apply follows one informer event.
func (x *index) apply(ev controller.Event) {
	m := ev.Object.GetObjectMeta()
	key := controller.Key(m.Namespace, m.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	if ev.Old != nil {
		x.unlinkOwners(key, ev.Old.GetObjectMeta())
	}
	if ev.Type == api.Deleted {
		x.unlinkOwners(key, m)
		remove(x.byNS, m.Namespace, m.Name)
		remove(x.orphans, m.Namespace, m.Name)
		return
	}
	put(x.byNS, m.Namespace, m.Name, ev.Object)
	if api.ControllerRef(m) == nil {
		put(x.orphans, m.Namespace, m.Name, ev.Object)
	} else {
		remove(x.orphans, m.Namespace, m.Name)
	}
	for i := range m.OwnerReferences {
		uid := m.OwnerReferences[i].UID
		deps := x.byOwner[uid]
		if deps == nil {
			deps = map[string]api.Object{}
			x.byOwner[uid] = deps
		}
		deps[key] = ev.Object
	}
}

func put(m map[string]map[string]api.Object, ns, name string, obj api.Object) {
	inner := m[ns]
	if inner == nil {
		inner = map[string]api.Object{}
		m[ns] = inner
	}
	inner[name] = obj
}

func remove(m map[string]map[string]api.Object, ns, name string) {
	if inner := m[ns]; inner != nil {
		delete(inner, name)
		if len(inner) == 0 {
			delete(m, ns)
		}
	}
}

// unlinkOwners removes key from the dependents of m's owners.
func (x *index) unlinkOwners(key string, m *api.ObjectMeta) {
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
func (x *index) get(namespace, name string) (api.Object, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	obj, ok := x.byNS[namespace][name]
	return obj, ok
}

// inNamespace returns the objects of a namespace, in no order.
func (x *index) inNamespace(namespace string) []api.Object {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ns := x.byNS[namespace]
	out := make([]api.Object, 0, len(ns))
	for _, obj := range ns {
		out = append(out, obj)
	}
	return out
}

// orphansIn returns the objects of a namespace without a controller.
func (x *index) orphansIn(namespace string) []api.Object {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ns := x.orphans[namespace]
	out := make([]api.Object, 0, len(ns))
	for _, obj := range ns {
		out = append(out, obj)
	}
	return out
}

// ownedBy returns the objects with an ownerReference to uid, in no order.
func (x *index) ownedBy(uid string) []api.Object {
	x.mu.RLock()
	defer x.mu.RUnlock()
	deps := x.byOwner[uid]
	out := make([]api.Object, 0, len(deps))
	for _, obj := range deps {
		out = append(out, obj)
	}
	return out
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
