package loop

import (
	"context"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/controller"
)

// bindBatch is one Bind call's bindings' entries and outcomes, for the
// owner goroutine.
type bindBatch struct {
	entries []*podEntry
	errs    []error
}

// batcher writes bindings by group commit: a few binders each take
// whatever has queued up (at most maxBatch) and make one Bind call of it,
// so while some calls are in flight the next batch gathers, and raft
// pipelines the calls. Nothing waits when the queue is short: a lone
// binding goes at once.
type batcher struct {
	client   controller.Client
	maxBatch int
	m        *metrics
	post     func(input)

	mu       sync.Mutex
	bindings []controller.Binding
	entries  []*podEntry
	wake     chan struct{}
}

func newBatcher(l *Loop, post func(input)) *batcher {
	return &batcher{client: l.client, maxBatch: l.maxBatch, m: l.m, post: post, wake: make(chan struct{}, 1)}
}

// add queues one binding; the owner goroutine calls it.
func (b *batcher) add(bd controller.Binding, e *podEntry) {
	b.mu.Lock()
	b.bindings = append(b.bindings, bd)
	b.entries = append(b.entries, e)
	b.mu.Unlock()
	b.signal()
}

func (b *batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take removes the next batch from the queue; another binder is woken
// if bindings remain.
func (b *batcher) take() ([]controller.Binding, []*podEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.bindings), b.maxBatch)
	if n == 0 {
		return nil, nil
	}
	bs := make([]controller.Binding, n)
	es := make([]*podEntry, n)
	copy(bs, b.bindings)
	copy(es, b.entries)
	rest := copy(b.bindings, b.bindings[n:])
	copy(b.entries, b.entries[n:])
	clear(b.bindings[rest:])
	clear(b.entries[rest:])
	b.bindings, b.entries = b.bindings[:rest], b.entries[:rest]
	if rest > 0 {
		b.signal()
	}
	return bs, es
}

// run is one binder; bindersInFlight of them run.
func (b *batcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		}
		for ctx.Err() == nil {
			bs, es := b.take()
			if len(bs) == 0 {
				break
			}
			b.m.batch(len(bs))
			errs := b.client.Bind(ctx, bs)
			if len(errs) != len(bs) {
				// nil is read as "no errors"; any other length is a bug of
				// the client, and what it left out counts as failed.
				fixed := make([]error, len(bs))
				for i := range fixed {
					switch {
					case errs == nil:
					case i < len(errs):
						fixed[i] = errs[i]
					default:
						fixed[i] = errBindResult
					}
				}
				errs = fixed
			}
			b.post(input{kind: inBound, batch: &bindBatch{entries: es, errs: errs}})
		}
	}
}
