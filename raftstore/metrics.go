package raftstore

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeMetrics are the outpost_raft_* metrics. Without a Registerer they
// still exist (unregistered) so the hot path has no nil checks.
type nodeMetrics struct {
	commit        prometheus.Histogram
	inflight      prometheus.Gauge
	leaderChanges prometheus.Counter

	reg        prometheus.Registerer
	registered []prometheus.Collector
}

func newNodeMetrics(reg prometheus.Registerer, n *Node) (*nodeMetrics, error) {
	m := &nodeMetrics{
		reg: reg,
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "outpost_raft_commit_seconds",
			Help:    "Time from Apply to the command being committed and applied on the leader.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outpost_raft_apply_inflight",
			Help: "Apply calls waiting for their command to commit.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outpost_raft_leader_changes_total",
			Help: "Times this server saw a new raft leader.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		m.commit, m.inflight, m.leaderChanges,
		gauge("outpost_raft_term", "Current raft term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("outpost_raft_commit_index", "Index of the last committed log entry.", func() float64 { return float64(n.raft.CommitIndex()) }),
		gauge("outpost_raft_applied_index", "Index of the last entry applied to the local state machine.", func() float64 { return float64(n.fsm.applied.Load()) }),
		gauge("outpost_raft_last_snapshot_index", "Index of the last snapshot taken or installed.", func() float64 { return float64(n.snaps.last.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "outpost_raft_sent_ahead_total",
			Help: "Batches of new entries the leader sent to a follower while storing them itself, before raft's replication.",
		}, func() float64 { return float64(n.ahead.started.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "outpost_raft_answered_early_total",
			Help: "Appends of raft's replication to a follower answered by an earlier send of the same entries instead of a round trip.",
		}, func() float64 { return float64(n.ahead.covered.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("register raft metrics: %w", err)
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

func (m *nodeMetrics) unregister() {
	for _, c := range m.registered {
		m.reg.Unregister(c)
	}
	m.registered = nil
}
