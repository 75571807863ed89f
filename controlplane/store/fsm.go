package store

import "io"

// FSMSnapshot is what Snapshot returns: a point-in-time state, written
// out by Persist while Apply goes on. It has raftstore's FSMSnapshot's
// methods; the store does not import raftstore, so that the loops, which
// read the store's types, do not depend on replication (testing/repo's
// layers). The server adapts the store to raftstore.FSM.
type FSMSnapshot interface {
	Persist(w io.Writer) error
	Release()
}
