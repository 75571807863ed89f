// Package podnet gives each pod a network namespace of its own and wires
// it with CNI plugins (SPEC NET-1, NET-2), as a container runtime's CRI
// layer does for Kubernetes: the namespace is a file bind-mounted under
// the state directory (under /run, so it goes with a reboot, as the
// namespace does) named by the pod's UID, the plugins are the
// conflist in the CNI configuration directory (a site may put its own;
// without one, the agent writes a bridge network over the node's pod
// CIDR), and results are cached by libcni so that an agent restarted
// finds, and later tears down, what an earlier run set up.
package podnet
