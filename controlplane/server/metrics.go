package server

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the API's request metrics. Label lookups are cached because
// WithLabelValues hashes and locks on every call, and every request
// records both metrics.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	counters   sync.Map // counterKey → prometheus.Counter
	histograms sync.Map // histKey → prometheus.Observer
}

type counterKey struct {
	verb, resource string
	code           int
}

type histKey struct{ verb, resource string }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outpost_api_requests_total",
			Help: "API requests by verb, resource and HTTP status code.",
		}, []string{"verb", "resource", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "outpost_api_request_duration_seconds",
			Help:    "API request latency by verb and resource (watches: until the stream ends).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "resource"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		// A registry the caller shares may hold the runtime collectors
		// already; one copy of them is what it wants.
		if err := reg.Register(c); err != nil {
			if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok {
				return nil, err
			}
		}
	}
	return m, nil
}

// observe records one finished request.
func (m *metrics) observe(verb, resource string, code int, d time.Duration) {
	ck := counterKey{verb, resource, code}
	c, ok := m.counters.Load(ck)
	if !ok {
		c, _ = m.counters.LoadOrStore(ck, m.requests.WithLabelValues(verb, resource, strconv.Itoa(code)))
	}
	c.(prometheus.Counter).Inc()
	hk := histKey{verb, resource}
	h, ok := m.histograms.Load(hk)
	if !ok {
		h, _ = m.histograms.LoadOrStore(hk, m.duration.WithLabelValues(verb, resource))
	}
	h.(prometheus.Observer).Observe(d.Seconds())
}

// methodLabel maps the request method to a fixed set of label values, so
// that odd methods cannot grow the metrics without bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodDelete:
		return "delete"
	case http.MethodPatch:
		return "patch"
	case http.MethodHead:
		return "head"
	}
	return "other"
}
