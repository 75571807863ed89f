// Package cluster starts in-process outpost control-plane clusters for
// tests: temp dirs, loopback ports, short raft timeouts, WaitForLeader, and
// a network between the servers that a test can partition.
package cluster
