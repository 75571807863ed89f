package podnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
)

// routeProto marks the routes SyncRoutes keeps (ip route ... proto 79):
// it removes only routes of its own, never a site's.
const routeProto = "79"

// SyncRoutes makes this host's routes to other nodes' pod CIDRs (host-gw,
// SPEC NET-2) what want says: a route per pod CIDR via the node's
// address, which must be on a link of this host; routes of its own to
// CIDRs no longer wanted (a node that left) go. Each route is tried on
// its own: the error joins those that failed, naming the node.
func SyncRoutes(ctx context.Context, want map[netip.Prefix]Gateway) error {
	have, err := ownRoutes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for dst, gw := range have {
		if w, ok := want[dst]; !ok || w.Addr != gw {
			if err := ip(ctx, "route", "del", dst.String(), "proto", routeProto); err != nil {
				errs = append(errs, err)
			}
		}
	}
	keys := make([]netip.Prefix, 0, len(want))
	for dst := range want {
		keys = append(keys, dst)
	}
	slices.SortFunc(keys, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	for _, dst := range keys {
		gw := want[dst]
		if have[dst] == gw.Addr {
			continue
		}
		if err := ip(ctx, "route", "replace", dst.String(), "via", gw.Addr.String(), "proto", routeProto); err != nil {
			hint := ""
			if strings.Contains(err.Error(), "Nexthop has invalid gateway") || strings.Contains(err.Error(), "Network is unreachable") {
				hint = ": host-gw routes need the nodes on one link"
			}
			errs = append(errs, fmt.Errorf("route to node %s's pods %s via %s%s: %w", gw.Node, dst, gw.Addr, hint, err))
		}
	}
	return errors.Join(errs...)
}

// Gateway is a node's address, where its pod CIDR is routed.
type Gateway struct {
	Node string
	Addr netip.Addr
}

// ownRoutes lists the routes of routeProto, by destination.
func ownRoutes(ctx context.Context) (map[netip.Prefix]netip.Addr, error) {
	out := map[netip.Prefix]netip.Addr{}
	for _, family := range []string{"-4", "-6"} {
		b, err := exec.CommandContext(ctx, "ip", "-j", family, "route", "show", "proto", routeProto).Output()
		if err != nil {
			if family == "-6" {
				continue // a kernel without IPv6 has no such routes
			}
			return nil, fmt.Errorf("list routes: %w", err)
		}
		var routes []struct {
			Dst     string `json:"dst"`
			Gateway string `json:"gateway"`
		}
		if len(strings.TrimSpace(string(b))) > 0 {
			if err := json.Unmarshal(b, &routes); err != nil {
				return nil, fmt.Errorf("list routes: %w", err)
			}
		}
		for _, r := range routes {
			dst, err := netip.ParsePrefix(r.Dst)
			if err != nil {
				continue
			}
			gw, _ := netip.ParseAddr(r.Gateway)
			out[dst] = gw
		}
	}
	return out, nil
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
