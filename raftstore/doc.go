// Package raftstore runs one member of outpost's raft-replicated control
// plane on top of hashicorp/raft.
//
// It owns everything below the state machine: the bbolt-backed log and
// stable store (one file, one fsync per batch), file snapshots, the TCP/TLS
// transport whose listener is shared by raft traffic and a small outpost RPC
// protocol (status, read index, join), cluster formation (bootstrap-expect
// and join), membership changes, and the single quorum check that every
// membership change goes through (SPEC CPL-1). The control plane plugs its
// state machine in through the FSM interface and never touches raft types,
// so that this package can be tested, tuned and replaced on its own.
//
// DESIGN.md beside this file explains the choices.
package raftstore
