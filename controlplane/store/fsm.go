package store

import "github.com/outpost-edge/outpost/raftstore"

// FSMSnapshot is what Snapshot returns: raftstore's point-in-time state,
// written out by Persist while Apply goes on.
type FSMSnapshot = raftstore.FSMSnapshot

// The store is the state machine raftstore replicates.
var _ raftstore.FSM = (*Store)(nil)
