package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Watch event types, as Kubernetes names them (api's, named here too for
// the store's own code and tests).
const (
	Added    = api.Added
	Modified = api.Modified
	Deleted  = api.Deleted
	Bookmark = api.Bookmark
	Error    = api.Error
)

// WatchEvent is one change seen by a watch (api.WatchEvent).
type WatchEvent = api.WatchEvent

// event is one change in a resource's window. prev is the object before a
// MODIFIED (or the last stored version before a DELETED), so that a watch
// with a selector can tell an object entering or leaving its selection.
// e is the entry an ADDED or MODIFIED stored, which keeps raw while the
// event is in the window.
type event struct {
	typ  string
	obj  api.Object
	raw  []byte
	prev api.Object
	rv   uint64
	e    *entry
}

// window keeps a resource's most recent events, oldest first, in a ring.
// horizon is the resourceVersion of the newest event it no longer holds:
// every event after it is still there, so a watch can resume from any
// resourceVersion at or above it.
type window struct {
	buf     []event
	head    int // position of the oldest event once buf is full
	size    int
	horizon uint64
}

func (w *window) init(size int, horizon uint64) {
	w.buf = nil
	w.head = 0
	w.size = size
	w.horizon = horizon
}

// push adds ev and returns the entry of the event it pushed out, if any.
func (w *window) push(ev event) *entry {
	if len(w.buf) < w.size {
		w.buf = append(w.buf, ev)
		return nil
	}
	w.horizon = w.buf[w.head].rv
	out := w.buf[w.head].e
	w.buf[w.head] = ev
	w.head++
	if w.head == len(w.buf) {
		w.head = 0
	}
	return out
}

func (w *window) len() int { return len(w.buf) }

// at is the i-th oldest event.
func (w *window) at(i int) *event {
	i += w.head
	if i >= len(w.buf) {
		i -= len(w.buf)
	}
	return &w.buf[i]
}

// after is the position of the first event with a resourceVersion above rv.
func (w *window) after(rv uint64) int {
	lo, hi := 0, w.len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w.at(mid).rv <= rv {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// watcher is one open watch. Apply hands it events through deliver, which
// never blocks: it appends to pending and wakes the watcher's goroutine,
// which alone writes to the consumer's channel. A watcher whose pending
// events pass its limit is dropped with a 410, so a slow consumer costs
// Apply nothing but a bounded queue.
type watcher struct {
	t     *table
	f     filter
	limit int
	wake  chan struct{}

	mu      sync.Mutex
	pending []WatchEvent
	gone    *api.StatusError // set once the watcher is dropped

	registered bool // guarded by t.wmu
}

// translate turns a window event into what this watcher sees, by
// Kubernetes' rules: an object that starts matching is ADDED, one that
// stops matching is DELETED.
func (w *watcher) translate(ev *event) (WatchEvent, bool) {
	typ := ev.typ
	switch ev.typ {
	case Added, Deleted:
		if !w.f.matches(ev.obj) {
			return WatchEvent{}, false
		}
	case Modified:
		now := w.f.matches(ev.obj)
		before := ev.prev != nil && w.f.matches(ev.prev)
		switch {
		case now && before:
		case now:
			typ = Added
		case before:
			typ = Deleted
		default:
			return WatchEvent{}, false
		}
	}
	return WatchEvent{Type: typ, Object: ev.obj, Raw: ev.raw, RV: ev.rv}, true
}

// deliver queues ev for the watcher if it matches. Called by Apply with
// s.mu held.
func (w *watcher) deliver(ev *event, m *metrics) {
	we, ok := w.translate(ev)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.gone != nil {
		w.mu.Unlock()
		return
	}
	if len(w.pending) >= w.limit {
		w.gone = api.NewGone(fmt.Sprintf("too old resource version: watcher fell more than %d events behind at %d; relist", w.limit, ev.rv))
		w.pending = nil
		m.watcherDropped()
	} else {
		w.pending = append(w.pending, we)
	}
	w.mu.Unlock()
	w.poke()
}

// kill ends the watcher with err as its last event.
func (w *watcher) kill(err *api.StatusError) {
	w.mu.Lock()
	if w.gone == nil {
		w.gone = err
		w.pending = nil
	}
	w.mu.Unlock()
	w.poke()
}

func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Watch streams the changes of r in namespace ("" for all) that match opts.
//
// With sendInitial, it first sends a synthetic ADDED for every matching
// object, then every change after that point. Otherwise it sends every
// change after fromRV (fromRV 0 means from now); a fromRV older than the
// resource's window fails with 410 Gone. A raft entry is one step: all the
// changes of one entry share its index, so resuming after an index resumes
// after the whole entry.
//
// The channel closes when ctx ends. A watcher that falls too far behind,
// and every watcher when a snapshot is restored, gets a final ERROR event
// carrying a 410 and its channel closes: the client must relist.
func (s *Store) Watch(ctx context.Context, r *api.Resource, namespace string, opts ListOptions, fromRV uint64, sendInitial bool) (<-chan WatchEvent, error) {
	t, err := s.table(r)
	if err != nil {
		return nil, err
	}
	if !t.res.Namespaced {
		namespace = ""
	}
	w := &watcher{t: t, f: newFilter(t, namespace, opts), wake: make(chan struct{}, 1)}
	var backlog []WatchEvent
	var initial []*entry // sendInitial: the objects, encoded as they are sent

	s.mu.RLock()
	cur := s.applied.Load()
	switch {
	case sendInitial:
		initial = t.selected(&w.f)
	case fromRV > 0:
		if fromRV < t.win.horizon {
			h := t.win.horizon
			s.mu.RUnlock()
			return nil, api.NewGone(fmt.Sprintf("too old resource version: %d (%d)", fromRV, h))
		}
		for i := t.win.after(fromRV); i < t.win.len(); i++ {
			if we, ok := w.translate(t.win.at(i)); ok {
				backlog = append(backlog, we)
			}
		}
	}
	// The limit grows with the backlog, so that a large initial list does
	// not by itself make the watcher too slow.
	w.limit = s.watcherBuffer + len(backlog) + len(initial)
	s.register(w)
	s.mu.RUnlock()

	sortEntries(initial)
	out := make(chan WatchEvent, 64)
	go s.run(ctx, w, initial, cur, backlog, out)
	return out, nil
}

func (s *Store) register(w *watcher) {
	t := w.t
	t.wmu.Lock()
	if w.f.hasNode && t.nodeWatchers != nil {
		set := t.nodeWatchers[w.f.node]
		if set == nil {
			set = make(map[*watcher]struct{})
			t.nodeWatchers[w.f.node] = set
		}
		set[w] = struct{}{}
	} else {
		t.watchers[w] = struct{}{}
	}
	w.registered = true
	t.wmu.Unlock()
	s.m.watcherAdded(1)
}

func (s *Store) unregister(w *watcher) {
	t := w.t
	t.wmu.Lock()
	defer t.wmu.Unlock()
	s.unregisterLocked(w)
}

func (s *Store) unregisterLocked(w *watcher) {
	if !w.registered {
		return
	}
	w.registered = false
	t := w.t
	if w.f.hasNode && t.nodeWatchers != nil {
		set := t.nodeWatchers[w.f.node]
		delete(set, w)
		if len(set) == 0 {
			delete(t.nodeWatchers, w.f.node)
		}
	} else {
		delete(t.watchers, w)
	}
	s.m.watcherAdded(-1)
}

// run is the watcher's goroutine: it sends an ADDED at index cur for each
// initial entry, then the backlog, then moves events from the pending
// queue to the consumer, and ends the watch. The initial entries' JSON is
// encoded here, one at a time as the consumer takes them, for those that
// no longer keep it.
func (s *Store) run(ctx context.Context, w *watcher, initial []*entry, cur uint64, backlog []WatchEvent, out chan<- WatchEvent) {
	defer close(out)
	defer s.unregister(w)
	send := func(ev WatchEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i, e := range initial {
		raw, err := e.json()
		if err != nil {
			s.log.Error("watch: stored object not encoded", "resource", w.t.res.Plural, "err", err)
			se, ok := errors.AsType[*api.StatusError](err)
			if !ok {
				se = api.NewInternalError(err)
			}
			send(errorEvent(se))
			return
		}
		if !send(WatchEvent{Type: Added, Object: e.obj, Raw: raw, RV: cur}) {
			return
		}
		initial[i] = nil
	}
	for i := range backlog {
		if !send(backlog[i]) {
			return
		}
	}
	backlog = nil
	var buf []WatchEvent
	for {
		w.mu.Lock()
		buf, w.pending = w.pending, buf[:0]
		gone := w.gone
		w.mu.Unlock()
		if gone != nil {
			s.unregister(w)
			send(errorEvent(gone))
			return
		}
		if len(buf) == 0 {
			select {
			case <-w.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		for i := range buf {
			if !send(buf[i]) {
				return
			}
		}
		clear(buf) // drop the references so old versions can be collected
	}
}

// errorEvent is the ERROR event that ends a watch with se.
func errorEvent(se *api.StatusError) WatchEvent {
	raw, _ := api.Marshal(&se.Status)
	return WatchEvent{Type: Error, Raw: raw, Err: se}
}

// emit records ev in t's window and hands it to t's watchers. The entry
// whose event leaves the window drops its JSON (see entry). Called by
// Apply with s.mu held.
func (s *Store) emit(t *table, ev event) {
	if old := t.win.push(ev); old != nil {
		old.drop()
	}
	t.wmu.Lock()
	for w := range t.watchers {
		w.deliver(&ev, s.m)
	}
	if len(t.nodeWatchers) > 0 {
		node := podNode(ev.obj)
		for w := range t.nodeWatchers[node] {
			w.deliver(&ev, s.m)
		}
		if ev.prev != nil {
			if prev := podNode(ev.prev); prev != node {
				for w := range t.nodeWatchers[prev] {
					w.deliver(&ev, s.m)
				}
			}
		}
	}
	t.wmu.Unlock()
}

// closeWatchers ends every watch with err. Called by Restore with s.mu
// held: the history the watchers stand on is gone.
func (s *Store) closeWatchers(err *api.StatusError) {
	for _, t := range s.tables {
		t.wmu.Lock()
		for w := range t.watchers {
			s.unregisterLocked(w)
			w.kill(err)
		}
		for _, set := range t.nodeWatchers {
			for w := range set {
				s.unregisterLocked(w)
				w.kill(err)
			}
		}
		t.wmu.Unlock()
	}
}

func podNode(obj api.Object) string {
	if p, ok := obj.(*api.Pod); ok {
		return p.Spec.NodeName
	}
	return ""
}
