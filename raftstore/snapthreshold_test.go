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
	if err := leader.node.Snapshot(); err != nil {
		t.Fatal(err)
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
