package podnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
)

// routeProto marks the routes SyncRoutes and SyncVXLAN keep (ip route ...
// proto 79): they remove only routes of their own, never a site's.
const routeProto = "79"

// SyncRoutes makes this host's routes to other nodes' pod CIDRs (host-gw,
// SPEC NET-2) what want says: a route per pod CIDR via the node's
// address, which must be on a link of this host; routes of its own to
// CIDRs no longer wanted (a node that left) go. Each route is tried on
// its own: the error joins those that failed, naming the node.
func SyncRoutes(ctx context.Context, want map[netip.Prefix]Gateway) error {
	var errs []error
	// A host switched from vxlan: the device goes, and with it its
	// routes, which are then made anew below.
	if _, err := net.InterfaceByName(VXLANDevice); err == nil {
		errs = append(errs, runSteps(ctx, []step{{args: []string{"ip", "link", "del", VXLANDevice}, what: "remove the vxlan device"}}))
	}
	have, err := ownRoutes(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	routes := make(map[netip.Prefix]route, len(want))
	for dst, gw := range want {
		routes[dst] = route{Node: gw.Node, Via: gw.Addr}
	}
	dels, adds := routeSteps(have, routes)
	return errors.Join(append(errs, runSteps(ctx, append(dels, adds...)))...)
}

// Gateway is a node's address, where its pod CIDR is routed.
type Gateway struct {
	Node string
	Addr netip.Addr
}

// route is a route of routeProto to a node's pod CIDR: via the node's
// address on a link of this host (host-gw), or via the node's VTEP
// address through Dev, onlink (vxlan).
type route struct {
	// Node names the node, for errors; it is empty in what the host has.
	Node string
	Via  netip.Addr
	Dev  string
}

// routeSteps are the steps from the routes of routeProto the host has to
// those wanted: deletions (run first, before what else they used goes)
// and additions (run last, once what they use is there). A wanted route
// without Dev matches whatever link the host routes it through.
func routeSteps(have, want map[netip.Prefix]route) (dels, adds []step) {
	for _, dst := range sortedKeys(have) {
		if _, ok := want[dst]; !ok {
			dels = append(dels, step{args: []string{"ip", "route", "del", dst.String(), "proto", routeProto}, what: "remove the route to " + dst.String()})
		}
	}
	for _, dst := range sortedKeys(want) {
		w := want[dst]
		if h, ok := have[dst]; ok && h.Via == w.Via && (w.Dev == "" || h.Dev == w.Dev) {
			continue
		}
		args := []string{"ip", "route", "replace", dst.String(), "via", w.Via.String()}
		hint := ": host-gw routes need the nodes on one link"
		if w.Dev != "" {
			args, hint = append(args, "dev", w.Dev, "onlink"), ""
		}
		adds = append(adds, step{
			args: append(args, "proto", routeProto),
			what: fmt.Sprintf("route to node %s's pods %s via %s", w.Node, dst, w.Via),
			hint: hint,
		})
	}
	return dels, adds
}

// ownRoutes lists the routes of routeProto, by destination.
func ownRoutes(ctx context.Context) (map[netip.Prefix]route, error) {
	out := map[netip.Prefix]route{}
	for _, family := range []string{"-4", "-6"} {
		var routes []struct {
			Dst     string `json:"dst"`
			Gateway string `json:"gateway"`
			Dev     string `json:"dev"`
		}
		if err := ipJSON(ctx, &routes, family, "route", "show", "proto", routeProto); err != nil {
			if family == "-6" {
				continue // a kernel without IPv6 has no such routes
			}
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range routes {
			dst, err := netip.ParsePrefix(r.Dst)
			if err != nil {
				continue
			}
			gw, _ := netip.ParseAddr(r.Gateway)
			out[dst] = route{Via: gw, Dev: r.Dev}
		}
	}
	return out, nil
}

// step is one command of a sync ("ip ..." or "bridge ..."), with what
// it is for, which its error names.
type step struct {
	args []string
	what string
	// hint is added to the error of a route the kernel finds no link
	// for.
	hint string
}

// runSteps runs every step, even after one failed: an entry of one node
// is no reason to leave another's wrong. The error joins those that
// failed.
func runSteps(ctx context.Context, steps []step) error {
	var errs []error
	for _, s := range steps {
		out, err := exec.CommandContext(ctx, s.args[0], s.args[1:]...).CombinedOutput()
		if err == nil {
			continue
		}
		msg := strings.TrimSpace(string(out))
		hint := ""
		if strings.Contains(msg, "Nexthop has invalid gateway") || strings.Contains(msg, "Network is unreachable") {
			hint = s.hint
		}
		errs = append(errs, fmt.Errorf("%s%s: %s: %w: %s", s.what, hint, strings.Join(s.args, " "), err, msg))
	}
	return errors.Join(errs...)
}

// ipJSON runs `ip -j args...` (or `bridge -j` when args start with
// "bridge") and decodes its output into v; no output is an empty list.
func ipJSON(ctx context.Context, v any, args ...string) error {
	bin := "ip"
	if len(args) > 0 && args[0] == "bridge" {
		bin, args = "bridge", args[1:]
	}
	b, err := exec.CommandContext(ctx, bin, append([]string{"-j"}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return fmt.Errorf("%s -j %s: %w", bin, strings.Join(args, " "), err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s -j %s: %w", bin, strings.Join(args, " "), err)
	}
	return nil
}

// sortedKeys are m's keys in the order of their text, so that steps run,
// and errors read, the same way every time.
func sortedKeys[K interface {
	comparable
	String() string
}, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(a.String(), b.String()) })
	return keys
}
