//go:build !linux

package host

import (
	"context"
	"errors"
	"fmt"
)

// Facts reads the host's capacity and node info; only Linux is supported.
func Facts(ctx context.Context, cfg FactsConfig) (NodeFacts, error) {
	return NodeFacts{}, fmt.Errorf("host facts: %w", errors.ErrUnsupported)
}

// Observe reads the host's pressure signals; only Linux is supported.
func Observe(ctx context.Context, cfg ObserveConfig) (Observation, error) {
	return Observation{}, fmt.Errorf("observe host: %w", errors.ErrUnsupported)
}
