package wire

import "time"

// KindSummary is the kind of GET /stats/summary's reply.
const KindSummary = "Summary"

// Summary is the agent's latest resource usage readings (GET
// /stats/summary): the node's and each running container's, in the
// spirit of the kubelet's summary API, which metrics-server scrapes. The
// API server turns it into metrics.k8s.io's NodeMetrics and PodMetrics.
type Summary struct {
	Kind string     `json:"kind"`
	Node NodeStats  `json:"node"`
	Pods []PodStats `json:"pods"`
}

// NodeStats is the whole node's use.
type NodeStats struct {
	NodeName string       `json:"nodeName"`
	CPU      *CPUStats    `json:"cpu,omitempty"`
	Memory   *MemoryStats `json:"memory,omitempty"`
}

// CPUStats is CPU use at Time: cumulative, and as a rate over the
// window between two readings.
type CPUStats struct {
	Time time.Time `json:"time"`
	// WindowNanos is the time between the two readings UsageNanoCores
	// is computed from; 0 with no rate yet.
	WindowNanos int64 `json:"windowNanos,omitempty"`
	// UsageNanoCores is the average use over the window in billionths of
	// a core; nil until there are two readings.
	UsageNanoCores *uint64 `json:"usageNanoCores,omitempty"`
	// UsageCoreNanoSeconds is the CPU time used since the start.
	UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
}

// MemoryStats is memory use at Time.
type MemoryStats struct {
	Time time.Time `json:"time"`
	// WorkingSetBytes is memory in use less the inactive file cache.
	WorkingSetBytes uint64 `json:"workingSetBytes"`
}

// PodReference names a pod.
type PodReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

// PodStats is one pod's running containers.
type PodStats struct {
	PodRef     PodReference     `json:"podRef"`
	Containers []ContainerStats `json:"containers"`
}

// ContainerStats is one running container's use.
type ContainerStats struct {
	Name      string       `json:"name"`
	StartTime time.Time    `json:"startTime"`
	CPU       *CPUStats    `json:"cpu,omitempty"`
	Memory    *MemoryStats `json:"memory,omitempty"`
}
