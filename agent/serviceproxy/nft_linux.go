package serviceproxy

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Apply replaces the proxy's table with the rules for svcs, in one
// transaction: a connection never sees half a ruleset.
func Apply(ctx context.Context, svcs []Service) error {
	return apply(ctx, Ruleset(svcs))
}

func apply(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("serviceproxy: nft: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Remove deletes the proxy's table; none is no error.
func Remove(ctx context.Context) error {
	return apply(ctx, fmt.Sprintf("table ip %s {}\ndelete table ip %s\n", Table, Table))
}
