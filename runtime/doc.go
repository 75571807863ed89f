// Package runtime is the seam between the node agent and a container
// runtime: the data the agent hands over (ContainerSpec, Resources,
// pull policies and registry credentials) and what it gets back
// (ContainerStatus, Image), plus the error values a pod's status is made
// from. runtime/containerd is the real implementation, runtime/fake the
// one for fast tests, and runtime/runtimetest the contract suite both
// must pass.
//
// Containers share the host's network (pods are hostNetwork for now), so
// there is no sandbox object: a pod is the set of containers that carry
// its UID in LabelPodUID.
package runtime
