package agent

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Sync loops, as outpost_agent_sync_errors_total names them.
const (
	loopNode      = "node"       // registration, heartbeats, node status
	loopHost      = "host"       // reading the host's conditions
	loopPods      = "pods"       // the list and watch of the node's pods
	loopPodStatus = "pod-status" // pods' status reports
	loopStats     = "stats"      // usage readings
)

// agentMetrics is the agent's own health on its /metrics, beside its
// pods' use (agent/stats) and the Go runtime's and process's collectors
// (go_goroutines, process_resident_memory_bytes).
type agentMetrics struct {
	reg        *prometheus.Registry
	syncErrors *prometheus.CounterVec
	lastStatus prometheus.Gauge
}

func newAgentMetrics(a *Agent, log *slog.Logger) *agentMetrics {
	m := &agentMetrics{
		reg: prometheus.NewRegistry(),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outpost_agent_sync_errors_total",
			Help: "Failures of the agent's loops that talk to the control plane or read the node, by loop.",
		}, []string{"loop"}),
		lastStatus: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outpost_agent_last_status_report_timestamp_seconds",
			Help: "When the control plane last accepted the node's status or heartbeat, in Unix seconds (0: not yet).",
		}),
	}
	for _, loop := range []string{loopNode, loopHost, loopPods, loopPodStatus, loopStats} {
		m.syncErrors.WithLabelValues(loop) // every loop's series from the start, at 0
	}
	for _, c := range []prometheus.Collector{
		m.syncErrors, m.lastStatus,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "outpost_agent_control_plane_reachable",
			Help: "1 while the control plane answered the agent's last call, else 0.",
		}, func() float64 {
			if a.online.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "outpost_agent_pods",
			Help: "Pods the agent runs (bound to its node and not finished).",
		}, func() float64 { return float64(a.podCount()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := m.reg.Register(c); err != nil {
			log.Warn("agent metric not registered", "err", err)
		}
	}
	return m
}

// register adds c (the usage sampler's collector).
func (m *agentMetrics) register(c prometheus.Collector) error {
	if m == nil {
		return errors.New("no metrics registry")
	}
	return m.reg.Register(c)
}

// handler serves the registry in Prometheus' text format.
func (m *agentMetrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
}

// syncError counts a failure of loop. Safe on a nil receiver, for tests
// that build an Agent by hand.
func (m *agentMetrics) syncError(loop string) {
	if m != nil {
		m.syncErrors.WithLabelValues(loop).Inc()
	}
}

// statusReported records that the control plane accepted the node's
// status or heartbeat at t.
func (m *agentMetrics) statusReported(t time.Time) {
	if m != nil {
		m.lastStatus.Set(float64(t.UnixNano()) / 1e9)
	}
}
