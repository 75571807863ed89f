// Package linearize records concurrent client histories against an outpost
// cluster and checks them for linearizability with porcupine.
//
// The model is a set of independent registers (one per object name) whose
// versions the server assigns: create-if-absent, conditional update on the
// resourceVersion the client read, and consistent reads. Operations whose
// outcome the client could not learn (a timeout, a lost leader) may or may
// not have happened; the model allows both, and bounds the version such a
// write would have from below (resource versions are raft indexes).
//
// Workload is the client side shared by the in-process and process-level
// checks: each client talks to one server and waits longer than the
// servers' own timeouts, and Classify keeps a server's 504 apart from a
// client that gave up.
package linearize
