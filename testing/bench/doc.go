// Command bench runs outpost's cluster benchmarks and writes BENCHMARKS.md:
// real `outpost server` processes on loopback, driven through the real HTTP
// API, with the CPU of every process (and of everything else on the machine)
// measured per level so that a noisy run can be told from a slow one.
// The scheduler section (scheduler.go) and the node agent section
// (agent.go: a real agent with its own containerd in a network namespace;
// root, containerd and runc needed) follow; -scheduler-only and
// -agent-only run one alone.
//
//	go run ./testing/bench -bin bin/outpost -out BENCHMARKS.md
package main
