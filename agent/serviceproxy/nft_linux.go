package serviceproxy

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// apply hands script to nft, which runs it as one transaction.
func apply(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("serviceproxy: nft: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
