// Package cgroups reads what the kernel's control groups count of a
// container's (or the whole node's) use: cumulative CPU time and the
// memory working set, as the kubelet counts them for `kubectl top` and
// for memory pressure, and the OOM killer's count.
//
// Both layouts are read. cgroup v2 (one unified tree, cgroup.controllers
// at the root): cpu.stat's usage_usec, memory.current less memory.stat's
// inactive_file, memory.events' oom_kill. cgroup v1 (a tree per
// controller): cpuacct/…/cpuacct.usage, memory/…/memory.usage_in_bytes
// less memory.stat's total_inactive_file, memory.oom_control's oom_kill.
// Paths are the OCI spec's cgroupsPath in cgroupfs form ("/outpost/ID");
// systemd's "slice:prefix:name" form is refused (ErrSystemdPath).
//
// The node is the root cgroup: on v1 its counters cover every process;
// on v2 the root has no memory.current, so the node's working set comes
// from /proc/meminfo (MemTotal − MemFree − Inactive(file), the same
// "in use less what the kernel can drop at once").
//
// HybridControllers tells whether a hybrid layout (v1 hierarchies plus
// cgroup2 at unified/) left controllers in its cgroup2 tree, where crun
// will not run containers (the agent's --oci-runtime auto).
//
// FS's Root and Proc are directories, so tests read testdata trees
// (testdata/v1, testdata/v2) instead of the host's.
package cgroups
