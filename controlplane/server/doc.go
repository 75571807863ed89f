// Package server is outpost's control-plane server: the Kubernetes-shaped
// HTTP API in front of the raft-replicated store, and Start, which assembles
// one server from its parts (cluster CA and certificate, store, raftstore,
// HTTPS listener, admin client config, leader duties).
//
// It lives apart from the store and raftstore so that those stay free of
// HTTP, authentication and admission: the server is the one place where a
// request becomes a raft command, and where a follower hands writes to the
// leader.
//
// A write goes: authenticate (bearer token, else a client certificate of
// the cluster CA) → on a follower, forward to the leader as it is → on the
// leader, authorize → read and strictly decode the body → set the fields
// the server owns (uid, creationTimestamp, generated name) → default →
// validate → admission chain → raft Apply → reply with the bytes the store
// encoded. A follower does not authorize what it forwards: the leader
// decides, with the freshest state (which node a pod is bound to). Every
// refusal happens before Apply, so a refused write leaves the store and
// the raft log as they were; an update that carries no resourceVersion is
// still applied conditionally, on the version it was validated against,
// and retried if it lost a race.
//
// Reads follow Kubernetes' resourceVersion semantics. A get, list or
// watch without a resourceVersion asks for the most recent state: the
// server first waits for raftstore's read index (on raftstore's applied
// index, since the index may name a read barrier the store never sees),
// so a follower or a restarted server never answers from a stale copy,
// and without a leader the answer is 503. resourceVersion=0 (or
// consistent=false) is served from the local store as it is;
// resourceVersion=N from the local store once it has applied N (a watch
// resumes from N instead). consistent=true forces the quorum read.
//
// A server that has just started answers nothing that depends on its
// store (authentication, authorization, admission, reads) until the store
// has applied a read index obtained after the start: its snapshot may hold
// a token deleted since, or lack one created since. The leader's duties
// (schedulers, controllers, event expiry) start only after the leader
// barrier, for the same reason.
//
// Every write passes the built-in admission steps before Config.Admission:
// ADM-1's rule that only users allowed pods/binding may set spec.nodeName
// (on pods and on workloads' pod templates), and NodeRestriction, which
// keeps a node's own identity from changing its taints, unschedulable,
// labels other than the kubelet's well-known ones, or deleting its Node.
//
// /healthz, /readyz and /version answer without a token, as Kubernetes
// answers them to anonymous callers: probes and install scripts have no
// credentials, and the replies reveal nothing stored. Everything else needs
// one, in insecure (plain HTTP) mode too: discovery (/api, /apis) is open
// to any authenticated caller, /metrics and the raft endpoints to cluster
// admins and servers.
package server
