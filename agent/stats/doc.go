// Package stats samples the node's and its containers' resource use for
// `outpost top` and the agent's /metrics (issue 15 item 4).
//
// Every Interval (10 s, as the kubelet's housekeeping) the Sampler reads
// the node's root cgroup and, through the runtime, each running
// container's cgroup: cumulative CPU time and the memory working set. It
// keeps the last two readings of each; the CPU rate is the difference
// of the two cumulative readings over the time between them (the
// window), so a container needs two readings, Interval apart, before it
// has one. Nothing is written anywhere: the API server asks the agent
// for its Summary when a user asks (as metrics-server scrapes kubelets),
// so usage never passes through raft.
//
// Collector exports the latest readings in Prometheus' text format with
// the kubelet's /metrics/resource names (node_cpu_usage_seconds_total,
// container_memory_working_set_bytes, ...) and each container's restart
// count (kube_pod_container_status_restarts_total: the highest attempt
// the runtime holds), stamped with the time they were read.
package stats
