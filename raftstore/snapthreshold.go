package raftstore

import (
	"time"

	"github.com/hashicorp/raft"
)

// Sizer is an FSM that says how many objects its snapshot holds.
type Sizer interface {
	Size() int
}

// snapshotShare is how many snapshots' worth of writes the log may hold
// before the next snapshot: a snapshot is taken once the log since the
// last one holds a quarter as many entries as the state holds objects
// (and at least SnapshotThreshold). A snapshot encodes every object, so
// with a fixed threshold its cost per write grows with the state: at
// 150,000 pods, 8,192 entries apart, every write paid for encoding 18
// objects, and snapshots took a fifth of the leader's CPU while pods were
// created (issue 16 item 3). Spaced by the state, a write pays for at most
// 4; the log a restarting or joining member replays after the snapshot
// grows to a quarter of the state's objects.
const snapshotShare = 4

// snapshotThreshold is the threshold for a state of size objects.
func snapshotThreshold(floor uint64, size int) uint64 {
	return max(floor, uint64(size)/snapshotShare)
}

// tuneSnapshots keeps raft's SnapshotThreshold at snapshotThreshold of
// the FSM's size, looking as often as raft looks whether to snapshot;
// the FSM adapter also sets it after each restore.
func (n *Node) tuneSnapshots(fsm Sizer, floor uint64, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n.setSnapshotThreshold(n.raft, fsm, floor)
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setSnapshotThreshold sets raft's threshold from the FSM's size: it
// reads the size and raft's reloadable config, changes the threshold and
// writes it back, all under tuneMu. The tuner and a restore both call it,
// and nothing else reloads the config, so nothing can write in between;
// and a size read before a restore cannot be written after the restore's
// own (the member would snapshot all it had just installed).
func (n *Node) setSnapshotThreshold(r *raft.Raft, fsm Sizer, floor uint64) {
	n.tuneMu.Lock()
	defer n.tuneMu.Unlock()
	want := snapshotThreshold(floor, fsm.Size())
	rc := r.ReloadableConfig()
	if rc.SnapshotThreshold == want {
		return
	}
	rc.SnapshotThreshold = want
	if err := r.ReloadConfig(rc); err != nil {
		n.log.Warn("snapshot threshold not changed", "threshold", want, "err", err)
		return
	}
	n.log.Debug("snapshot threshold", "threshold", want)
}
