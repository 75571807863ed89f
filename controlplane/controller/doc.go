// Package controller holds what the leader's control loops share: the
// Client through which they read and change the cluster, an Informer that
// keeps a local cache of one resource current from a list and a watch
// for any number of handlers, Informers that hands every loop the same
// Informer of a resource (one cache, one watch), and a Queue of keys with
// deduplication and backoff.
//
// The control loops (the schedulers of controlplane/scheduler/loop, the
// workload controllers of controlplane/controllers) run inside the raft
// leader. The server implements Client in-process: reads come from the
// leader's store, and every write goes through the same defaulting,
// validation and admission as an API request, under the control plane's
// own identity, then through raft. Keeping the loops behind this small
// interface lets them be tested against controllertest's store-backed fake
// without raft or HTTP, and lets them move out of process later.
package controller
