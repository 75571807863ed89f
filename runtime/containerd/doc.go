// Package containerd is outpost's container runtime on containerd: it
// implements runtime.Runtime with the containerd Go client (one containerd
// namespace for outpost, containers labelled with the pod they belong to,
// runc tasks in the host's network namespace with cgroup limits), and a
// Supervisor that runs a private containerd when the host has none
// configured, as k3s does.
//
// Containers do not depend on the client: their tasks live in containerd's
// shims, their logs are written by a small log-writer process the shim
// starts (the outpost binary itself, re-executed; see RunLogWriterIfAsked),
// and everything ContainerStatus reports after an exit is kept in the
// container's own labels. An agent that restarts finds its containers,
// their state and their logs as if it had never left. DESIGN.md says why
// in more words, and what is and is not supported.
package containerd
