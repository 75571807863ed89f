package stats

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The kubelet's /metrics/resource names, so dashboards made for it work.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative CPU time the node used, in core-seconds.", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"The node's memory working set: in use less the inactive file cache.", nil, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative CPU time of the pod's running containers, in core-seconds.", []string{"namespace", "pod"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Memory working set of the pod's running containers.", []string{"namespace", "pod"}, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative CPU time the container used, in core-seconds.", []string{"namespace", "pod", "container"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"The container's memory working set: in use less the inactive file cache.", []string{"namespace", "pod", "container"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"When the container started, in Unix seconds.", []string{"namespace", "pod", "container"}, nil)
	restartsDesc = prometheus.NewDesc("kube_pod_container_status_restarts_total",
		"How many times the agent restarted the container.", []string{"namespace", "pod", "container"}, nil)
)

// Collector exports the Sampler's latest readings, each stamped with the
// time it was read (a scrape between two readings sees the same values).
func (s *Sampler) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Sampler }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, podCPUDesc, podMemoryDesc, containerCPUDesc, containerMemoryDesc, containerStartDesc, restartsDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	emit := func(t time.Time, d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(d, typ, v, labels...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(d, err)
			return
		}
		if !t.IsZero() {
			m = prometheus.NewMetricWithTimestamp(t, m)
		}
		ch <- m
	}
	if s.nodeN > 0 {
		emit(s.nodeCur.t, nodeCPUDesc, prometheus.CounterValue, seconds(s.nodeCur.cpu))
		emit(s.nodeCur.t, nodeMemoryDesc, prometheus.GaugeValue, float64(s.nodeCur.memory))
	}
	// A pod deleted and made again under its name may have containers of
	// both UIDs for a moment: one series per name, the newest container
	// (the registry refuses two series with the same labels).
	type ctrKey struct{ ns, pod, name string }
	newest := map[ctrKey]containerInfo{}
	for _, ci := range s.containers {
		k := ctrKey{ci.ns, ci.pod, ci.name}
		if old, ok := newest[k]; !ok || ci.started.After(old.started) {
			newest[k] = ci
		}
	}
	type podKey struct{ ns, pod string }
	type podSum struct {
		t           time.Time
		cpu, memory uint64
	}
	pods := map[podKey]podSum{}
	for _, ci := range newest {
		emit(ci.cur.t, containerCPUDesc, prometheus.CounterValue, seconds(ci.cur.cpu), ci.ns, ci.pod, ci.name)
		emit(ci.cur.t, containerMemoryDesc, prometheus.GaugeValue, float64(ci.cur.memory), ci.ns, ci.pod, ci.name)
		if !ci.started.IsZero() {
			emit(ci.cur.t, containerStartDesc, prometheus.GaugeValue, float64(ci.started.UnixNano())/1e9, ci.ns, ci.pod, ci.name)
		}
		k := podKey{ci.ns, ci.pod}
		p := pods[k]
		p.t = ci.cur.t
		p.cpu += ci.cur.cpu
		p.memory += ci.cur.memory
		pods[k] = p
	}
	for k, p := range pods {
		// A pod's sum is not a true counter (a container that stops
		// takes its part away), as with the kubelet's.
		emit(p.t, podCPUDesc, prometheus.CounterValue, seconds(p.cpu), k.ns, k.pod)
		emit(p.t, podMemoryDesc, prometheus.GaugeValue, float64(p.memory), k.ns, k.pod)
	}
	restarts := map[ctrKey]int{}
	for k, r := range s.restarts {
		ck := ctrKey{r.ns, r.pod, k.name}
		restarts[ck] = max(restarts[ck], r.count)
	}
	for k, n := range restarts {
		emit(time.Time{}, restartsDesc, prometheus.CounterValue, float64(n), k.ns, k.pod, k.name)
	}
}

func seconds(nanos uint64) float64 { return float64(nanos) / 1e9 }
