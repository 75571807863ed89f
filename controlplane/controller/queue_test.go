package controller

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// A key added many times is handed out once; added while it is being
// worked on, it comes back after Done, never to two workers at once.
func TestQueueDedupAndDirty(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	q.Add("a")
	q.Add("a")
	q.Add("b")
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2", q.Len())
	}
	ctx := context.Background()
	k, _ := q.Get(ctx)
	if k != "a" {
		t.Fatalf("first key %q, want a (FIFO)", k)
	}
	q.Add("a") // while processing
	k2, _ := q.Get(ctx)
	if k2 != "b" {
		t.Fatalf("second key %q, want b: a is being processed", k2)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d while a is processed, want 0", q.Len())
	}
	q.Done("a")
	if q.Len() != 1 {
		t.Fatalf("a added during processing did not come back after Done")
	}
	k3, _ := q.Get(ctx)
	if k3 != "a" {
		t.Fatalf("got %q, want a", k3)
	}
}

// Retries wait base, 2×base, 4×base ... up to max; Forget starts over.
func TestQueueBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(100*time.Millisecond, 300*time.Millisecond)
		defer q.Stop()
		ctx := context.Background()
		wait := func() time.Duration {
			start := time.Now()
			k, ok := q.Get(ctx)
			if !ok || k != "x" {
				t.Fatalf("Get = %q %v", k, ok)
			}
			q.Done(k)
			return time.Since(start)
		}
		for i, want := range []time.Duration{100, 200, 300, 300} {
			q.AddRateLimited("x")
			if got := wait(); got != want*time.Millisecond {
				t.Fatalf("retry %d waited %v, want %v", i, got, want*time.Millisecond)
			}
		}
		q.Forget("x")
		q.AddRateLimited("x")
		if got := wait(); got != 100*time.Millisecond {
			t.Fatalf("after Forget waited %v, want 100ms", got)
		}
	})
}

// Get gives up when its context ends.
func TestQueueGetCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(time.Millisecond, time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, ok := q.Get(ctx); ok {
			t.Fatal("Get on an empty queue returned a key")
		}
	})
}

// Once a burst of keys (a relist of every pod) has drained, the queue
// lets go of the room it took, and goes on deduplicating as before.
func TestQueueLetsBurstRoomGo(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	ctx := context.Background()
	for i := range 3 * shrinkAfter {
		q.Add(string(rune('a'+i%26)) + strconv.Itoa(i))
	}
	for range 3 * shrinkAfter {
		k, _ := q.Get(ctx)
		q.Done(k)
	}
	if q.queuedPeak != 0 || len(q.queued) != 0 || cap(q.order) != 0 {
		t.Fatalf("drained queue still sized for its burst: peak %d, %d queued, order cap %d", q.queuedPeak, len(q.queued), cap(q.order))
	}
	q.Add("x")
	q.Add("x")
	if q.Len() != 1 {
		t.Fatalf("Len = %d after adding x twice, want 1", q.Len())
	}
}
