package api

import (
	"strconv"
	"time"
)

// The resource metrics API (metrics.k8s.io/v1beta1), served by every
// server from the agents' usage readings for `outpost top` and any tool
// that reads metrics-server (issue 15 item 4). Its objects are made per
// request and never stored: they have no resourceVersion and no
// Resource in the table.
const (
	MetricsGroup      = "metrics.k8s.io"
	MetricsVersion    = "v1beta1"
	MetricsAPIVersion = MetricsGroup + "/" + MetricsVersion
)

// NodeMetrics is a node's use: CPU averaged over Window ending at
// Timestamp, memory working set at Timestamp.
type NodeMetrics struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Timestamp  Time         `json:"timestamp"`
	Window     Duration     `json:"window"`
	Usage      ResourceList `json:"usage"`
}

// NodeMetricsList is a list of NodeMetrics.
type NodeMetricsList struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata"`
	Items    []NodeMetrics `json:"items"`
}

// PodMetrics is the use of a pod's running containers.
type PodMetrics struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Timestamp  Time               `json:"timestamp"`
	Window     Duration           `json:"window"`
	Containers []ContainerMetrics `json:"containers"`
}

// ContainerMetrics is one container's use.
type ContainerMetrics struct {
	Name  string       `json:"name"`
	Usage ResourceList `json:"usage"`
}

// PodMetricsList is a list of PodMetrics.
type PodMetricsList struct {
	TypeMeta `json:",inline"`
	ListMeta `json:"metadata"`
	Items    []PodMetrics `json:"items"`
}

// Duration is a time span that encodes as Go writes durations ("10.5s"),
// as Kubernetes' metav1.Duration does.
type Duration struct {
	time.Duration
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, d.Duration.String()), nil
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return ErrDuration
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return ErrDuration
	}
	d.Duration = v
	return nil
}

// NanoCPU is a CPU use of n billionths of a core as metrics-server writes
// it ("123456789n"); the quantity keeps that text.
func NanoCPU(n uint64) Quantity {
	s := strconv.FormatUint(n, 10) + "n"
	// Thousandths rounded up, as Kubernetes' MilliValue rounds.
	return Quantity{s: s, milli: int64((n + 999_999) / 1_000_000)}
}

// BinaryBytes is an amount of memory written as metrics-server writes it:
// in Ki when it is whole kibibytes ("1588180Ki"), else in bytes.
func BinaryBytes(n uint64) Quantity {
	s := strconv.FormatUint(n, 10)
	if n%1024 == 0 && n > 0 {
		s = strconv.FormatUint(n/1024, 10) + "Ki"
	}
	return Quantity{s: s, milli: int64(min(n, uint64(1<<63-1)/1000)) * 1000}
}
