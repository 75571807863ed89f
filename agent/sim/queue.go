package sim

import "sync"

// workQueue hands keys to workers so that each key is worked on by one
// worker at a time and is queued at most once: a key added again while
// queued is a no-op, and one added while a worker has it is queued again
// when that worker is done. Heartbeats and pod updates coalesce this way
// when the API is slower than the nodes.
type workQueue[K comparable] struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  []K
	queued map[K]bool
	active map[K]bool
	redo   map[K]bool
	closed bool
}

func newWorkQueue[K comparable]() *workQueue[K] {
	q := &workQueue[K]{queued: map[K]bool{}, active: map[K]bool{}, redo: map[K]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues k unless it is queued already.
func (q *workQueue[K]) Add(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(k)
}

func (q *workQueue[K]) addLocked(k K) {
	switch {
	case q.closed || q.queued[k]:
	case q.active[k]:
		q.redo[k] = true
	default:
		q.queued[k] = true
		q.items = append(q.items, k)
		q.cond.Signal()
	}
}

// Get waits for a key; ok is false once the queue is shut down. The
// caller must call Done(k) when it has finished with k.
func (q *workQueue[K]) Get() (k K, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return k, false
	}
	k = q.items[0]
	var zero K
	q.items[0] = zero
	q.items = q.items[1:]
	delete(q.queued, k)
	q.active[k] = true
	return k, true
}

// Done ends the work on k, queueing it again if it was added meanwhile.
func (q *workQueue[K]) Done(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.active, k)
	if q.redo[k] {
		delete(q.redo, k)
		q.addLocked(k)
	}
}

// Len is the number of queued keys.
func (q *workQueue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Shutdown wakes every worker with ok false and drops what was queued.
func (q *workQueue[K]) Shutdown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.items = nil
	q.cond.Broadcast()
}
