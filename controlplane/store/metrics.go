package store

import (
	"errors"
	"log/slog"
	"time"

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
	m.objects = register(reg, m.objects, log)
	m.apply = register(reg, m.apply, log)
	m.watchers = register(reg, m.watchers, log)
	m.dropped = register(reg, m.dropped, log)
	return m
}

// register registers c, or returns the collector registered before under
// the same name: a second store in one process (tests, a node that
// restarts its store) shares the series.
func register[T prometheus.Collector](reg prometheus.Registerer, c T, log *slog.Logger) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	log.Warn("store metric not registered", "err", err)
	return c
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
