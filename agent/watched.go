package agent

import (
	"context"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// watchedSet is every object of one resource as a ListWatch last showed
// it, by namespace/name: the view the node's rule keepers (routes, the
// service proxy) rebuild their rules from.
type watchedSet struct {
	mu     sync.Mutex
	objs   map[string]api.Object
	listed bool
}

// follow keeps s current from a ListWatch of r until ctx ends. wake is
// called after every list, and after every event unless matters says the
// change is of nothing the caller uses.
func (s *watchedSet) follow(ctx context.Context, cl *client.Client, r *api.Resource, matters func(old, cur api.Object) bool, wake func()) {
	key := func(o api.Object) string { m := o.GetObjectMeta(); return m.Namespace + "/" + m.Name }
	cl.ListWatch(ctx, r, "", client.ListOptions{}, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			s.mu.Lock()
			s.objs = make(map[string]api.Object, len(objs))
			for _, o := range objs {
				s.objs[key(o)] = o
			}
			s.listed = true
			s.mu.Unlock()
			wake()
		},
		Event: func(typ string, obj api.Object) {
			s.mu.Lock()
			old := s.objs[key(obj)]
			if typ == client.EventDeleted {
				delete(s.objs, key(obj))
			} else {
				s.objs[key(obj)] = obj
			}
			s.mu.Unlock()
			if typ == client.EventDeleted || old == nil || matters == nil || matters(old, obj) {
				wake()
			}
		},
	})
}

// snapshot is the objects of s, and whether s has been listed yet.
func (s *watchedSet) snapshot() ([]api.Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]api.Object, 0, len(s.objs))
	for _, o := range s.objs {
		out = append(out, o)
	}
	return out, s.listed
}

// resync runs sync at once when woken (a call of the returned wake; calls
// while sync runs fold into one more run) and every interval, until ctx
// ends.
func resync(ctx context.Context, every time.Duration, sync func()) (wake func(), run func()) {
	poke := make(chan struct{}, 1)
	wake = func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	run = func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-poke:
			case <-t.C:
			}
			sync()
		}
	}
	return wake, run
}
