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
// leader, authorize → read and strictly decode the body → package core's
// pipeline (server-owned fields, defaults, validation, admission, raft
// Apply) → reply with the bytes the store encoded. A follower does not
// authorize what it forwards: the leader decides, with the freshest state
// (which node a pod is bound to). This package holds no write logic of its
// own beyond the HTTP shape of a request; the leader's loops use the same
// core through its in-process client.
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
// store until the core says it has caught up (core.AwaitCatchUp), and
// the leader's duties start only after the core's leader barrier.
//
// /healthz, /readyz and /version answer without a token, as Kubernetes
// answers them to anonymous callers: probes and install scripts have no
// credentials, and the replies reveal nothing stored. Everything else needs
// one, in insecure (plain HTTP) mode too: discovery (/api, /apis) is open
// to any authenticated caller, /metrics and the raft endpoints to cluster
// admins and servers.
package server
