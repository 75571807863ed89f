// Package store is the raft state machine of outpost's control plane: every
// API object, typed and in memory, with the JSON a GET returns kept for the
// recently written ones and encoded again for the others.
//
// The leader turns each write into a versioned command (CreateCmd,
// UpdateCmd, DeleteCmd, BindCmd, ExpireEventsCmd, BatchCmd); raft
// replicates it and every server hands it to Apply with the entry's index,
// which becomes the resourceVersion of everything the command touches. Apply is deterministic:
// times and UIDs travel inside the command, never from the local clock.
// Store.CreateCmd also hands the created object to this server's own Apply,
// which then need not decode the command the leader has just encoded.
//
// Reads (Get, List, Watch) are local and run while Apply goes on. They
// return objects shared with the store and with every other reader: callers
// must never change them, and copy first when they need a changed one.
//
// Watches resume from a resourceVersion out of a bounded window of recent
// events per resource; older versions get 410 Gone so that clients relist.
// Snapshot and Restore write and read the whole state in a compact,
// versioned stream. DESIGN.md says why it is built this way.
package store
