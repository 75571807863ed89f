package raftstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// sizedKV is a kvFSM that says it holds size objects.
type sizedKV struct {
	*kvFSM
	size atomic.Int64
}

func (f *sizedKV) Size() int { return int(f.size.Load()) }

// Snapshots are spaced by the state's size, never closer than the
// configured threshold (issue 16 item 3): a snapshot encodes every
// object, so a fixed spacing made each write pay for encoding more
// objects the larger the state.
func TestSnapshotThresholdFollowsSize(t *testing.T) {
	for _, tc := range []struct {
		floor uint64
		size  int
		want  uint64
	}{
		{8192, 0, 8192},
		{8192, 20_000, 8192},
		{8192, 150_000, 37_500},
		{100_000, 150_000, 100_000},
	} {
		if got := snapshotThreshold(tc.floor, tc.size); got != tc.want {
			t.Errorf("snapshotThreshold(%d, %d) = %d, want %d", tc.floor, tc.size, got, tc.want)
		}
	}

	cfg := testConfig(t, "s1")
	cfg.BootstrapExpect = 1
	cfg.SnapshotThreshold = 100
	cfg.SnapshotInterval = 20 * time.Millisecond
	fsm := &sizedKV{kvFSM: newKV()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	threshold := func() uint64 { return n.raft.ReloadableConfig().SnapshotThreshold }
	waitFor(t, 10*time.Second, "the configured threshold", func() bool { return threshold() == 100 })
	fsm.size.Store(10_000)
	waitFor(t, 10*time.Second, "a quarter of 10,000 objects", func() bool { return threshold() == 2500 })
	fsm.size.Store(40)
	waitFor(t, 10*time.Second, "back to the configured threshold", func() bool { return threshold() == 100 })
}

// lenKV is a kvFSM that says it holds as many objects as it has keys.
type lenKV struct{ *kvFSM }

func (f lenKV) Size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.data)
}

// A member that installs a snapshot sets its threshold from the state
// it installed before it replays the log after it, not at its tuner's
// next look (SnapshotInterval later): at 150,000 pods a joining member
// still at the configured threshold snapshotted all it had just
// installed, and was ready 1-2 s later.
func TestSnapshotInstallSetsThresholdAtOnce(t *testing.T) {
	nodes := startCluster(t, 3, func(c *Config) {
		c.SnapshotThreshold = 64
		c.TrailingLogs = 32
		c.SnapshotInterval = time.Hour // the tuner looks once, at start
	})
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	f.close(t)
	var idx uint64
	for i := range 400 {
		idx = set(t, leader.node, fmt.Sprintf("k%03d", i), "v")
	}
	// Every running member snapshots and compacts its log: should the
	// leader change before the member is back (it did once, a loaded
	// CI run), the new one must have no log to send it either.
	for _, o := range nodes {
		if o == f {
			continue
		}
		if o != leader {
			if err := o.node.WaitApplied(ctxT(t, 10*time.Second), idx); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.node.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	fsm := lenKV{newKV()}
	n, err := Open(ctxT(t, 10*time.Second), f.cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	f.node, f.fsm = n, fsm.kvFSM
	if err := n.WaitApplied(ctxT(t, 10*time.Second), idx); err != nil {
		t.Fatal(err)
	}
	if fsm.restoreCount() == 0 {
		t.Fatal("the member caught up without installing a snapshot")
	}
	want := snapshotThreshold(64, fsm.Size())
	if got := n.raft.ReloadableConfig().SnapshotThreshold; got != want || want == 64 {
		t.Fatalf("threshold after installing %d objects = %d, want %d", fsm.Size(), got, want)
	}
}

// racyKV is a kvFSM whose size a restore changes while the tuner looks:
// armed, the tuner's next Size call returns the size from before a
// restore that lands before the tuner sets its threshold.
type racyKV struct {
	*kvFSM
	n        atomic.Pointer[Node]
	size     atomic.Int64
	armed    atomic.Bool
	restored chan struct{} // closed once the restore set its threshold
	seen     chan uint64   // the threshold at the tuner's first look after
}

func (f *racyKV) Size() int {
	v := int(f.size.Load())
	n := f.n.Load()
	if n == nil {
		return v
	}
	select {
	case <-f.restored:
		// Nothing else calls Size now: this is the tuner's next look, so
		// its write before it is done.
		select {
		case f.seen <- n.raft.ReloadableConfig().SnapshotThreshold:
		default:
		}
		return v
	default:
	}
	if !f.armed.CompareAndSwap(true, false) {
		return v
	}
	// The tuner has read v. A restore installs 4,000 objects and sets the
	// threshold from them before the tuner writes its own, unless the
	// tuner holds the lock the restore takes (then the restore waits for
	// the tuner's write and comes after it).
	f.size.Store(4000)
	free := n.tuneMu.TryLock()
	if free {
		n.tuneMu.Unlock()
	}
	go func() {
		n.fsm.onRestore()
		close(f.restored)
	}()
	if free {
		<-f.restored
	}
	return v
}

// A restore that lands while the tuner looks at the state keeps its
// threshold: the tuner must not write one from the size it read before
// the restore (issue 16 item 3: the restore's threshold lasted until the
// tuner's look, and a member that had just installed a snapshot
// snapshotted it all again while it replayed the log).
func TestSnapshotRestoreDuringTunerLookKeepsThreshold(t *testing.T) {
	cfg := testConfig(t, "s1")
	cfg.BootstrapExpect = 1
	cfg.SnapshotThreshold = 100
	cfg.SnapshotInterval = 20 * time.Millisecond
	fsm := &racyKV{kvFSM: newKV(), restored: make(chan struct{}), seen: make(chan uint64, 1)}
	n, err := Open(ctxT(t, 20*time.Second), cfg, fsm)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fsm.n.Store(n)
	fsm.armed.Store(true)
	select {
	case got := <-fsm.seen:
		if want := snapshotThreshold(100, 4000); got != want {
			t.Fatalf("threshold after a restore of 4,000 objects during the tuner's look = %d, want %d", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tuner did not look again after the restore")
	}
}
