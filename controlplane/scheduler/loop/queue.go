package loop

import (
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// podKey names a pod.
type podKey struct{ namespace, name string }

// state is where an unbound pod is in the loop.
type state uint8

const (
	stGone        state = iota // no longer tracked
	stActive                   // in the FIFO, to be scheduled
	stBackoff                  // timed: waits out its backoff, then active
	stParked                   // timed: fits nowhere; waits for a change or the periodic recheck
	stNoScheduler              // names no running scheduler; timed until it is reported
	stBinding                  // assumed; its binding is with the batcher
	stBound                    // binding acknowledged; waits for the informer to show it
	stConflict                 // binding refused (pod gone or bound elsewhere); waits for the informer
	numStates
)

// podEntry is one unbound pod the loop knows. Only the owner goroutine
// reads or writes it; the batcher carries the pointer without touching it.
type podEntry struct {
	key podKey
	// pod is the newest version the informer delivered.
	pod   *api.Pod
	state state
	// added is when the loop first saw the pod unbound: the start of the
	// end-to-end latency.
	added time.Time
	// lastTry is the start of the last attempt; attempts counts the
	// failed ones, for the backoff.
	lastTry  time.Time
	attempts int
	// due is when a timed state ends; hidx is the index in the timed
	// heap, -1 when not in it.
	due  time.Time
	hidx int
	// queued reports whether the entry sits in the FIFO (perhaps stale).
	queued bool
	// reported reports whether SchedulerNotRunning was written for it.
	reported bool
	// wrote reports whether the writer may hold memory of this pod.
	wrote   bool
	removed bool
}

// backoff is the wait after n failed attempts: 1 s doubling to 10 s.
func backoff(n int) time.Duration {
	d := initialBackoff
	for i := 1; i < n; i++ {
		d *= 2
		if d >= maxBackoff {
			return maxBackoff
		}
	}
	return d
}

// fifo is the queue of active pods in arrival order. Entries that left
// the active state while queued are skipped when they come up.
type fifo struct {
	items []*podEntry
	head  int
}

func (q *fifo) push(e *podEntry) {
	if e.queued {
		return
	}
	e.queued = true
	q.items = append(q.items, e)
}

// pop returns the next active entry, or nil.
func (q *fifo) pop() *podEntry {
	for q.head < len(q.items) {
		e := q.items[q.head]
		q.items[q.head] = nil
		q.head++
		e.queued = false
		if q.head == len(q.items) {
			q.items, q.head = q.items[:0], 0
		} else if q.head >= 1024 && q.head*2 >= len(q.items) {
			n := copy(q.items, q.items[q.head:])
			clear(q.items[n:])
			q.items, q.head = q.items[:n], 0
		}
		if e.state == stActive && !e.removed {
			return e
		}
	}
	return nil
}

// timedHeap orders entries in timed states by due.
type timedHeap struct{ items []*podEntry }

func (h *timedHeap) less(i, j int) bool { return h.items[i].due.Before(h.items[j].due) }

func (h *timedHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].hidx = i
	h.items[j].hidx = j
}

func (h *timedHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timedHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// set puts e in the heap at its due, or moves it there.
func (h *timedHeap) set(e *podEntry) {
	if e.hidx < 0 {
		e.hidx = len(h.items)
		h.items = append(h.items, e)
		h.up(e.hidx)
		return
	}
	if !h.down(e.hidx) {
		h.up(e.hidx)
	}
}

// remove takes e out of the heap if it is there.
func (h *timedHeap) remove(e *podEntry) {
	i := e.hidx
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	e.hidx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// peek returns the entry due first, or nil.
func (h *timedHeap) peek() *podEntry {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// reorder restores the heap after dues changed in place.
func (h *timedHeap) reorder() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
