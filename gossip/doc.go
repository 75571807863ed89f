// Package gossip is outpost's membership pool: servers and agents gossip in
// one hashicorp/memberlist pool, encrypted with a key derived from the
// cluster secret (KeyFromSecret) that agents receive when they join.
//
// The pool is how the control plane learns within seconds that a node went
// silent (issue 4, item 3); the agent's heartbeats through the API are the
// slower backstop. Start a pool with Start; read it with Members, Member and
// Subscribe. Join keeps retrying in the background, because edge links
// drop: an agent started while no server is reachable joins once one is,
// and a member cut off for long enough that both sides declared each other
// dead joins again by itself.
//
// Member names are unique in a pool. Agents are named after their node,
// which is how the control plane's node lifecycle controller finds them;
// servers are named "server:" and their raft ID (controlplane/server), so
// a host that runs both has two members. Each member's role travels in
// its metadata.
package gossip
