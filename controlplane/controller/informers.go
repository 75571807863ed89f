package controller

import (
	"context"
	"log/slog"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Informers hands out one Informer per resource to every loop that asks
// for it, serving each until the context given to NewInformers ends. The
// leader's scheduler and workload controllers both follow pods, nodes
// and services: through one Informers they keep one cache of each, list
// each once when the server becomes leader and take one watch of each
// (at 150,000 pods a second pod cache was about 10 MB of the leader's
// heap; issue 16 item 3).
type Informers struct {
	ctx context.Context
	c   Client
	log *slog.Logger

	mu   sync.Mutex
	infs map[resourceKey]*Informer
	wg   sync.WaitGroup
}

type resourceKey struct{ group, plural string }

// NewInformers returns an empty set whose informers use c and run until
// ctx ends.
func NewInformers(ctx context.Context, c Client, log *slog.Logger) *Informers {
	return &Informers{ctx: ctx, c: c, log: log, infs: map[resourceKey]*Informer{}}
}

// For returns the set's informer of r, started at the first call. Add
// handlers with Informer.Handle; Synced closes once it has listed.
func (s *Informers) For(r *api.Resource) *Informer {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := resourceKey{r.Group, r.Plural}
	if inf := s.infs[k]; inf != nil {
		return inf
	}
	inf := NewInformer(s.c, r, s.log)
	s.infs[k] = inf
	s.wg.Go(func() { inf.serve(s.ctx) })
	return inf
}

// Wait returns once every informer of the set has stopped, after the
// set's context ended.
func (s *Informers) Wait() { s.wg.Wait() }

// SharedOrOwn returns shared when it is set, else a set of the caller's
// own over c under ctx; done stops the caller's own set and waits for it
// (for a shared set it does nothing: its owner does that). A loop that
// may be given its informers calls it once, and done when it returns.
func SharedOrOwn(ctx context.Context, shared *Informers, c Client, log *slog.Logger) (infs *Informers, done func()) {
	if shared != nil {
		return shared, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	own := NewInformers(ctx, c, log)
	return own, func() {
		cancel()
		own.Wait()
	}
}
