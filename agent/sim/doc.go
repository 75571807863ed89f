// Package sim runs simulated node agents: many Nodes served from one
// process, for tests, demos and scale runs of the scheduler and, later,
// of eviction (as kwok or nomad-nodesim do for their systems).
//
// Each simulated node is a real API client with a node credential of its
// own, so the server's authentication, authorization and node restriction
// treat it as they treat a real agent. The nodes share the admin client's
// connections (client.WithToken): thousands of TLS connections would
// measure the simulation, not the control plane. A node registers its
// Node (labels, taints, capacity, conditions from a file, plus the labels
// a real agent sets), heartbeats with jitter through a bounded pool of
// writers, and marks the pods bound to it Running through the status
// subresource. One pod watch and one node watch serve all nodes.
//
// A node can be made to go quiet, to stand for a host that went away:
// through the annotation SilencedAnnotation (`outpost sim silence`), a
// signal, or Agents.Silence in-process.
//
// Start and Run are for Go tests and benchmarks; Command is the `outpost
// sim` CLI. It lives beside the agent, not under testing/, because it is
// part of the binary (testing/ packages never are); it runs no workload,
// it only makes the API look like a cluster of hosts.
package sim
