// Package client is the Go client of the outpost HTTP API, used by the
// CLI, the agent and tests: the client configuration file, typed CRUD and
// watch over the Kubernetes-shaped paths, raw JSON requests for callers
// that must round-trip fields this build does not know, and the
// outpost.io extras (raft membership, tokens).
//
// Replies are decoded leniently, unlike requests on the server: a server
// may be newer than its clients during a rolling update, and an unknown
// field in a reply is no reason to fail. Errors the server sends come back
// as *api.StatusError, so api.IsNotFound, api.IsConflict and the like work
// on them.
package client
