package clusterdns

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// Label marks the resolver's address on the node's loopback link.
const Label = "lo:outpost-dns"

// EnsureAddress puts addr on the loopback link: traffic to it from the
// node's pods (and the node itself) is delivered locally, on every node
// alike, with no rule of the service proxy in the way and no kernel
// module needed (a dummy link needs one a network namespace cannot
// load). The address stays when the agent stops, as the proxy's rules
// do.
func EnsureAddress(ctx context.Context, addr netip.Addr) error {
	bits, label := 32, []string{"label", Label}
	if addr.Is6() {
		// IPv6 addresses take no label.
		bits, label = 128, nil
	}
	args := append([]string{"ip", "addr", "replace", fmt.Sprintf("%s/%d", addr, bits), "dev", "lo"}, label...)
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("clusterdns: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
