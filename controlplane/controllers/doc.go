// Package controllers holds the workload controllers that run on the raft
// leader only: ReplicaSet, Deployment and DaemonSet, and the garbage
// collector that deletes objects whose owners are gone.
//
// They behave as kube-controller-manager's do, so that Kubernetes users
// find what they know: a ReplicaSet keeps its count of pods (adopting
// orphans, replacing deleted, evicted and finished ones, creating in
// slow-start batches); a Deployment rolls its template out through
// ReplicaSets named after a hash of the template, with revision
// annotations, maxSurge/maxUnavailable or Recreate, history pruning and
// the Available/Progressing conditions that `rollout status` reads; a
// DaemonSet places one pod per node that passes the scheduler's own
// predicates, created bound; the garbage collector follows
// ownerReferences so that deleting a Deployment removes its ReplicaSets
// and their pods.
//
// Run starts them all on one shared set of informers and returns when its
// context ends (the server cancels it when leadership is lost). Reads come
// from the informers' caches; every write goes through controller.Client
// and is conditional. DESIGN.md says how the controllers avoid acting on
// a cache that lags their own writes, and how adoption and rollouts work.
package controllers
