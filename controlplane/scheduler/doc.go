// Package scheduler decides where pods go (SPEC SCH-1..13): the framework
// of filter plugins (the seed's predicates) and score plugins (its
// priorities) that a policy file selects, and the cluster view they read.
//
// It is pure decision logic. Cluster holds the nodes, the pods placed on
// them and the services, kept up to date by its owner; Scheduler.Schedule
// runs one cycle for one pod over it and returns a node, or a *FitError
// that counts the nodes each predicate rejected, worded as SCH-13 asks.
// Nothing here talks HTTP or raft, watches, binds or writes status: the
// leader-only scheduler loop does, and calls this package (DESIGN.md says
// how). Package policy reads policy files; package taints holds the
// toleration rules the eviction controller and the agent share.
package scheduler
