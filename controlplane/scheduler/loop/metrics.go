package loop

import (
	"log/slog"
	"time"

	"github.com/outpost-edge/outpost/internal/promreg"
	"github.com/prometheus/client_golang/prometheus"
)

// Results of a scheduling attempt, the label values of attempts_total.
const (
	resultScheduled = iota
	resultUnschedulable
	resultError
	numResults
)

var resultNames = [numResults]string{"scheduled", "unschedulable", "error"}

// metrics are the loop's Prometheus series; every method is a no-op on a
// nil *metrics.
type metrics struct {
	attempts  *prometheus.CounterVec
	batchSize prometheus.Histogram
	e2eTime   prometheus.Histogram
	queue     [3]prometheus.Gauge
	// bySched caches the attempt counters per scheduler; the owner
	// goroutine alone reads and fills it.
	bySched map[string]*[numResults]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{bySched: map[string]*[numResults]prometheus.Counter{}}
	m.attempts = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "outpost", Subsystem: "scheduler", Name: "attempts_total",
		Help: "Scheduling attempts, by scheduler and result (scheduled, unschedulable, error).",
	}, []string{"scheduler", "result"}), log)
	m.batchSize = promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "outpost", Subsystem: "scheduler", Name: "bind_batch_size",
		Help:    "Bindings per Bind call.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	}), log)
	m.e2eTime = promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "outpost", Subsystem: "scheduler", Name: "e2e_seconds",
		Help:    "Time from a pod entering the scheduling queue to its binding being acknowledged.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}), log)
	queue := promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "outpost", Subsystem: "scheduler", Name: "queue_length",
		Help: "Unbound pods waiting, by queue: active (to be scheduled), backoff, unschedulable (parked until the cluster changes).",
	}, []string{"queue"}), log)
	for i, q := range []string{"active", "backoff", "unschedulable"} {
		m.queue[i] = queue.WithLabelValues(q)
	}
	return m
}

func (m *metrics) attempt(scheduler string, result int) {
	if m == nil {
		return
	}
	cs := m.bySched[scheduler]
	if cs == nil {
		cs = new([numResults]prometheus.Counter)
		for i := range cs {
			cs[i] = m.attempts.WithLabelValues(scheduler, resultNames[i])
		}
		m.bySched[scheduler] = cs
	}
	cs[result].Inc()
}

func (m *metrics) batch(n int) {
	if m != nil {
		m.batchSize.Observe(float64(n))
	}
}

func (m *metrics) e2e(d time.Duration) {
	if m != nil {
		m.e2eTime.Observe(d.Seconds())
	}
}

func (m *metrics) queues(active, backoff, unschedulable int) {
	if m == nil {
		return
	}
	m.queue[0].Set(float64(active))
	m.queue[1].Set(float64(backoff))
	m.queue[2].Set(float64(unschedulable))
}
