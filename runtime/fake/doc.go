// Package fake is an in-memory runtime.Runtime for fast tests of the node
// agent. It behaves like runtime/containerd for the contract suite in
// runtime/runtimetest: images come from OCI archives (runtime/ociarchive)
// or from a simulated registry, and a container's "process" is a goroutine
// that simulates the suite's test binary from its arguments (sleep, exit N,
// echo, ignore-term, ticks, listen PORT, ...; see process.go), with logs,
// exec, signals and stop with grace.
//
// Time is the standard library's, so it works in real time and inside a
// testing/synctest bubble (where grace periods and ticks pass virtually);
// the only real I/O is "listen", which opens a real port on 127.0.0.1.
// Knobs let a test break things: FailNextPull, SetDown, Crash, OOMKill,
// AddRegistryImage, AddForeign. Everything is safe for concurrent use.
package fake
