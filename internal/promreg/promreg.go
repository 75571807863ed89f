package promreg

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg, or returns the collector registered
// before under the same name: the leader's loops are made again at every
// term in one process, and share the series. A collector that cannot be
// registered is logged and returned unregistered (its updates go
// nowhere).
func Register[T prometheus.Collector](reg prometheus.Registerer, c T, log *slog.Logger) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	log.Warn("metric not registered", "err", err)
	return c
}
