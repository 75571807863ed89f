package raftstore

import (
	"context"
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
