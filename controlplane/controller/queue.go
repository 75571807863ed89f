package controller

import (
	"context"
	"sync"
	"time"
)

// Queue holds keys of objects to reconcile. A key is held once however
// often it is added; a key being worked on is not handed out again until
// Done, and one added meanwhile comes back after Done, so two workers
// never reconcile the same object at once and no change is lost.
// AddRateLimited retries a key with a per-key exponential backoff that
// Forget resets.
type Queue struct {
	mu     sync.Mutex
	cond   chan struct{} // closed and replaced when a key becomes ready
	order  []string
	queued map[string]bool
	// queuedPeak is the most keys queued since queued was last made:
	// a Go map keeps the room of its most entries, so once a burst (a
	// list of 150,000 pods) has drained, queued is made anew.
	queuedPeak int
	processing map[string]bool
	dirty      map[string]bool // added while processing
	failures   map[string]int
	timers     map[string]*time.Timer
	due        map[string]time.Time // when each timer fires

	baseDelay, maxDelay time.Duration
}

// shrinkAfter is how many keys a queue may have held before it lets the
// room for them go once empty.
const shrinkAfter = 1024

// NewQueue returns a queue whose retries wait base, 2×base, ... up to max.
func NewQueue(base, max time.Duration) *Queue {
	return &Queue{
		cond:       make(chan struct{}),
		queued:     map[string]bool{},
		processing: map[string]bool{},
		dirty:      map[string]bool{},
		failures:   map[string]int{},
		timers:     map[string]*time.Timer{},
		due:        map[string]time.Time{},
		baseDelay:  base,
		maxDelay:   max,
	}
}

// Add makes key ready now.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue) addLocked(key string) {
	if t := q.timers[key]; t != nil {
		t.Stop()
		delete(q.timers, key)
		delete(q.due, key)
	}
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	if q.queued[key] {
		return
	}
	q.queued[key] = true
	q.queuedPeak = max(q.queuedPeak, len(q.queued))
	q.order = append(q.order, key)
	close(q.cond)
	q.cond = make(chan struct{})
}

// AddAfter makes key ready after d, unless it is added sooner. Of two
// delayed adds of one key the earlier wins: a later one must not push
// back a retry that is already due sooner.
func (q *Queue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[key] {
		return
	}
	due := time.Now().Add(d)
	if t := q.timers[key]; t != nil {
		if !due.Before(q.due[key]) {
			return
		}
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.timers[key] == t {
			delete(q.timers, key)
			delete(q.due, key)
			q.addLocked(key)
		}
	})
	q.timers[key] = t
	q.due[key] = due
}

// AddRateLimited retries key after its backoff, which doubles each time
// until Forget.
func (q *Queue) AddRateLimited(key string) {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.baseDelay
	for range n {
		d *= 2
		if d >= q.maxDelay {
			d = q.maxDelay
			break
		}
	}
	q.AddAfter(key, d)
}

// Forget resets key's backoff: its last reconcile succeeded.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// Get waits for a ready key; ok is false when ctx ended. The caller must
// call Done(key) when finished with it.
func (q *Queue) Get(ctx context.Context) (key string, ok bool) {
	for {
		q.mu.Lock()
		if len(q.order) > 0 {
			key = q.order[0]
			q.order[0] = ""
			q.order = q.order[1:]
			delete(q.queued, key)
			if len(q.queued) == 0 && q.queuedPeak > shrinkAfter {
				q.queued, q.queuedPeak, q.order = map[string]bool{}, 0, nil
			}
			q.processing[key] = true
			q.mu.Unlock()
			return key, true
		}
		wait := q.cond
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-wait:
		}
	}
}

// Done ends the work on key; if it was added meanwhile, it is ready again.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] {
		delete(q.dirty, key)
		q.addLocked(key)
	}
}

// Len is how many keys are ready.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Stop cancels the pending delayed adds.
func (q *Queue) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, t := range q.timers {
		t.Stop()
		delete(q.timers, k)
		delete(q.due, k)
	}
}
