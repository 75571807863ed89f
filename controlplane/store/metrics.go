package store

import (
	"log/slog"
	"time"

	"github.com/outpost-edge/outpost/internal/promreg"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the store's Prometheus series; every method is a no-op on a
// nil *metrics, so a store without a Registerer pays nothing for them.
type metrics struct {
	objects  *prometheus.GaugeVec
	apply    prometheus.Histogram
	watchers prometheus.Gauge
	dropped  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "outpost", Subsystem: "store", Name: "objects",
			Help: "Objects stored, per resource.",
		}, []string{"resource"}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "outpost", Subsystem: "store", Name: "apply_duration_seconds",
			Help:    "Time to apply one raft entry to the store.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
		}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "outpost", Subsystem: "store", Name: "watchers",
			Help: "Open watches.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "outpost", Subsystem: "store", Name: "watch_events_dropped_total",
			Help: "Watchers dropped because they fell behind, with a 410 so that they relist.",
		}),
	}
	m.objects = promreg.Register(reg, m.objects, log)
	m.apply = promreg.Register(reg, m.apply, log)
	m.watchers = promreg.Register(reg, m.watchers, log)
	m.dropped = promreg.Register(reg, m.dropped, log)
	return m
}

func (m *metrics) objectsGauge(resource string) prometheus.Gauge {
	if m == nil {
		return nil
	}
	return m.objects.WithLabelValues(resource)
}

func (m *metrics) observeApply(d time.Duration) {
	if m != nil {
		m.apply.Observe(d.Seconds())
	}
}

func (m *metrics) watcherAdded(delta float64) {
	if m != nil {
		m.watchers.Add(delta)
	}
}

func (m *metrics) watcherDropped() {
	if m != nil {
		m.dropped.Inc()
	}
}
