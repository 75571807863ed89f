package memlimit

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestFollowLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, overhead, floor uint64
		want                  int64
	}{
		// A small heap: the floor, where GOGC=100 collects first.
		{0, 0, 560 * mib, 560 * mib},
		{100 * mib, 20 * mib, 560 * mib, 560 * mib},
		// A server at 150,000 pods: 64 MiB above what is live and the
		// overhead, and a 32nd more for the runtime's reserve.
		{512 * mib, 32 * mib, 560 * mib, 608 * mib * 33 / 32},
		// A larger heap: an eighth of it.
		{1024 * mib, 32 * mib, 560 * mib, 1184 * mib * 33 / 32},
		{math.MaxUint64 / 2, math.MaxUint64 / 2, 0, math.MaxInt64},
		{math.MaxInt64 - 100*mib, 0, 0, math.MaxInt64},
	} {
		if got := followLimit(tc.live, tc.overhead, tc.floor); got != tc.want {
			t.Errorf("followLimit(%d MiB live, %d MiB overhead, floor %d MiB) = %d MiB, want %d MiB",
				tc.live/mib, tc.overhead/mib, tc.floor/mib, got/mib, tc.want/mib)
		}
	}
}

// The runtime's limit follows the live heap, collection after
// collection, and stays put once the follower stops (issue 16 item 3:
// a server's RSS near what it holds, with no limit given).
func TestFollowing(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		stopFollowing()
		debug.SetMemoryLimit(old)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// limitAfterGC collects until the limit is within [lo, hi] (the
	// follower updates in a cleanup that runs after a collection).
	limitAfterGC := func(what string, lo, hi int64) {
		t.Helper()
		for {
			runtime.GC()
			got := debug.SetMemoryLimit(-1)
			if got >= lo && got <= hi {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: limit %d MiB, want %d–%d MiB", what, got>>20, lo>>20, hi>>20)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	// No floor, so that a small test heap moves the limit.
	follow(0)
	const held = 200 << 20
	hold := make([]byte, held)
	for i := range hold {
		hold[i] = 1
	}
	// What is live, plus the 64 MiB headroom, plus the runtime's own
	// (a few MiB; the test binary's other objects are in live too).
	limitAfterGC("200 MiB held", held+followMinHeadroom, held+followMinHeadroom+64<<20)
	runtime.KeepAlive(hold)
	hold = nil
	limitAfterGC("released", followMinHeadroom, followMinHeadroom+64<<20)

	// Apply with a fixed limit stops following: neither a collection nor
	// an update of the stopped follower (whose cleanup may still be
	// queued) moves the limit.
	f := following
	Apply(Limit{Bytes: 900 << 20, From: "--memory-limit"})
	for range 3 {
		runtime.GC()
	}
	f.update()
	if got := debug.SetMemoryLimit(-1); got != 900<<20 {
		t.Errorf("after Apply of 900 MiB: %d MiB, want it left alone by the stopped follower", got>>20)
	}
}
