// Package core is the control plane's API core, apart from any transport:
// the write pipeline, the leadership lifecycle, and the one place that
// hands out the store's objects. The HTTP API (package server), the
// leader's loops (through the in-process Client) and the node proxy sit on
// top of it; none of them builds a raft command or reads the store on its
// own.
//
// A write goes through Create, Update, Delete or Bind: the server-owned
// fields are set (uid, creationTimestamp, a generated name), then
// defaults, validation and the admission chain (the built-in steps first,
// then the configured ones, validation again after any that may make the
// object invalid, i.e. is not admission.KeepsValid), then the store's
// command goes to raft. Every refusal happens before Apply, so a refused
// write leaves the store and the raft log as they were. Authorization is
// the caller's: it knows the verb and the URL, and the in-process loops
// are allowed everything.
//
// RunLeadership starts the leader's duties (bootstrap objects, event
// expiry, the loops passed in Config.Duties) only after the leader
// barrier: this server's store has applied an entry of its own term, and
// with it everything an earlier leader committed. AwaitCatchUp does the
// same for every server after it starts: until its store has applied a
// read index obtained after the start, CatchingUp says why and the
// transports answer nothing that depends on the store.
//
// Objects returned by Get, List, Watch and the Client are the store's
// own: shared, never to be changed (the store's mutation detector fails a
// test that does). A caller that needs to change one copies it first.
package core
