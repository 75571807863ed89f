package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// followFloor is the least limit a following process gets. Below it the
// collector keeps its default pace (GOGC=100: the heap grows to twice
// what is live), so a small cluster's server, whose live heap is well
// under half of it, collects as often as it did without a limit.
const followFloor = 560 << 20

// followMinHeadroom is the least garbage a following heap may gather
// above what is live before it collects; followShare is the headroom
// as a part of the live heap once that part is larger. The runtime's
// own share of the limit (followLimit) comes on top.
const (
	followMinHeadroom = 64 << 20
	followShare       = 8 // live/8
)

// followLimit is the limit for a heap of live bytes, plus overhead bytes
// the runtime counts against its limit besides live objects and garbage
// (stacks, its own metadata, the unused parts of heap spans): at least
// floor, else live, its headroom, the overhead and a 32nd more, for the
// 3 % of the limit the runtime keeps back when it sets its heap goal.
// Without the last two the garbage room was a quarter of the headroom
// (a review's probe: 16 MiB of 64). At 150,000 pods a server holds
// 310–540 MiB live: its limit is then the floor, or about 64 MiB of
// garbage above what is live, where GOGC=100 let the heap reach
// 620–1,080 MiB.
func followLimit(live, overhead, floor uint64) int64 {
	headroom := max(followMinHeadroom, live/followShare)
	n := live + headroom
	if n < live || n+overhead < n {
		return math.MaxInt64
	}
	n += overhead
	if n+n/32 < n || n+n/32 > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(max(floor, n+n/32))
}

// follower resets the runtime's soft limit after every collection, from
// the live heap that collection found.
type follower struct {
	floor   uint64
	stopped atomic.Bool
	// mu serializes updates: a cleanup may run concurrently with
	// another one, or with start.
	mu      sync.Mutex
	samples []metrics.Sample
}

// following is the process's follower, if Apply started one.
var (
	followingMu sync.Mutex
	following   *follower
)

// follow makes the runtime's limit follow the live heap, at least floor,
// until stopFollowing; it replaces a follower already running.
func follow(floor uint64) {
	followingMu.Lock()
	defer followingMu.Unlock()
	if following != nil {
		following.stop()
	}
	f := &follower{floor: floor, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}}
	following = f
	f.update()
	f.arm()
}

// stopFollowing stops the follower, if one runs; the limit it set last
// stays until the caller sets another.
func stopFollowing() {
	followingMu.Lock()
	defer followingMu.Unlock()
	if following != nil {
		following.stop()
		following = nil
	}
}

// stop ends f's updates: none is made once it returns.
func (f *follower) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped.Store(true)
}

// sentinel is allocated only to become garbage: its cleanup runs after
// the collection that found it unreachable. It holds a pointer so that
// the runtime does not batch it with other tiny objects, which could
// keep it from ever being collected alone.
type sentinel struct{ _ *byte }

// arm schedules an update after the next collection.
func (f *follower) arm() {
	runtime.AddCleanup(new(sentinel), func(f *follower) {
		if f.stopped.Load() {
			return
		}
		f.update()
		f.arm()
	}, f)
}

// update sets the limit from what the last collection found live.
func (f *follower) update() {
	f.mu.Lock()
	defer f.mu.Unlock()
	metrics.Read(f.samples)
	v := func(i int) uint64 {
		if f.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return f.samples[i].Value.Uint64()
	}
	// What the limit counts (all but released memory) that is neither a
	// live object nor free heap garbage can gather in: stacks, metadata,
	// and the unused tails of heap spans, which the runtime also counts
	// outside its heap goal.
	live, total, released := v(0), v(1), v(2)
	heap := v(3) + v(4)
	var overhead uint64
	if total > released+heap {
		overhead = total - released - heap
	}
	if f.stopped.Load() {
		return
	}
	debug.SetMemoryLimit(followLimit(live, overhead, f.floor))
}
