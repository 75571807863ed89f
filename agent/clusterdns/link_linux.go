package clusterdns

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// Link is the dummy link the resolver's address is put on: traffic to it
// from the node's pods (and the node itself) is delivered locally, on
// every node alike, with no rule of the service proxy in the way.
const Link = "outpost-dns"

// EnsureAddress puts addr on Link, making the link if it is missing. The
// link stays when the agent stops, as the proxy's rules do.
func EnsureAddress(ctx context.Context, addr netip.Addr) error {
	if err := exec.CommandContext(ctx, "ip", "link", "show", Link).Run(); err != nil {
		if err := run(ctx, "ip", "link", "add", Link, "type", "dummy"); err != nil {
			return err
		}
	}
	bits := 32
	if addr.Is6() {
		bits = 128
	}
	if err := run(ctx, "ip", "addr", "replace", fmt.Sprintf("%s/%d", addr, bits), "dev", Link); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", Link, "up")
}

func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("clusterdns: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
