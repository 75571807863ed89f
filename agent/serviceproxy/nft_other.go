//go:build !linux

package serviceproxy

import (
	"context"
	"errors"
	"fmt"
)

// apply fails: nftables is Linux's.
func apply(ctx context.Context, script string) error {
	return fmt.Errorf("serviceproxy: nft: %w", errors.ErrUnsupported)
}
