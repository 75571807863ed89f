// Package loop runs the schedulers on the raft leader (SPEC SCH-1,
// SCH-12, SCH-13): it keeps a scheduler.Cluster current from informers of
// nodes, pods and services, takes unbound pods in arrival order, asks the
// scheduler their pod names for a node, and binds them in batches through
// controller.Client.Bind, the same path as the binding subresource.
//
// One goroutine owns the Cluster and every scheduler: informer events,
// binding outcomes and policy reloads reach it through an inbox and are
// applied between cycles, so a cycle reads the cluster in place without
// locks or copies. A decision is assumed in the cluster at once and the
// next pod is scheduled while the binding is written; bindings that fail
// are forgotten. Pods that fit nowhere get PodScheduled=False and a
// FailedScheduling event, and wait for a change of the cluster that could
// make them fit, with backoff, so that they never spin. Status and event
// writes go through their own goroutine, so that a slow write never stalls
// scheduling.
package loop
