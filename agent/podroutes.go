package agent

import (
	"context"
	"net/netip"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// Pod routes (SPEC NET-2): how this host reaches other nodes' pods.
const (
	// PodRoutesHostGW routes each node's pod CIDR via the node's
	// InternalIP: plain routes, for nodes on one link.
	PodRoutesHostGW = "host-gw"
	// PodRoutesVXLAN reaches each node's pods through the kernel's
	// VXLAN device, wrapped in UDP to the node's InternalIP: for nodes
	// across routers that know nothing of the pod CIDRs.
	PodRoutesVXLAN = "vxlan"
	// PodRoutesNone leaves routing to the site (its routers know the
	// nodes' pod CIDRs, or its own CNI network does).
	PodRoutesNone = "none"
)

// routeResync is how often the routes are made what they should be when
// no node changed: a route someone removed comes back within it.
const routeResync = 30 * time.Second

// routePods keeps the host-gw routes, or the vxlan overlay, to every
// other node's pod CIDR from a watch of the nodes, until ctx ends.
func (a *Agent) routePods(ctx context.Context) {
	var nodes watchedSet
	rep := &syncReport{a: a, what: "routes to other nodes' pods", reason: "PodRoutesFailed"}
	wake, run := resync(ctx, routeResync, func() {
		objs, listed := nodes.snapshot()
		if !listed {
			return
		}
		want := map[netip.Prefix]podnet.Gateway{}
		var self podnet.Gateway
		var own netip.Prefix
		for _, o := range objs {
			n, ok := o.(*api.Node)
			if !ok {
				continue
			}
			gw := routeOf(n)
			if !gw.Addr.IsValid() {
				continue
			}
			cidr, _ := netip.ParsePrefix(n.Spec.PodCIDR)
			if n.Name == a.cfg.NodeName {
				self, own = gw, cidr.Masked()
				continue
			}
			want[cidr.Masked()] = gw
		}
		var err error
		if a.cfg.PodRoutes == PodRoutesVXLAN {
			// The device sends from this node's InternalIP as the
			// others have it, which is where they send to.
			err = podnet.SyncVXLAN(ctx, self.Addr, own, want)
		} else {
			err = podnet.SyncRoutes(ctx, want)
		}
		rep.result(err, "nodes", len(want))
	})
	go nodes.follow(ctx, a.cl, nodesResource, func(old, cur api.Object) bool {
		return routeOf(old.(*api.Node)) != routeOf(cur.(*api.Node))
	}, wake)
	run()
}

// syncReport says what a repeated sync of the node's rules does: each
// new failure once (a log line and a Warning event on the node), and the
// first success after failures.
type syncReport struct {
	a            *Agent
	what, reason string
	last         string
}

func (r *syncReport) result(err error, okArgs ...any) {
	switch {
	case err != nil && err.Error() != r.last:
		r.a.log.Warn(r.what, "err", err)
		r.a.nodeEvent(eventWarning, r.reason, err.Error())
	case err == nil && r.last != "":
		r.a.log.Info(r.what+": set", okArgs...)
	}
	r.last = ""
	if err != nil {
		r.last = err.Error()
	}
}

// routeOf is where node n's pods are reached: its InternalIP, if it has
// a pod CIDR of the same family.
func routeOf(n *api.Node) podnet.Gateway {
	cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
	if err != nil {
		return podnet.Gateway{}
	}
	for _, addr := range n.Status.Addresses {
		if addr.Type != "InternalIP" {
			continue
		}
		if ip, err := netip.ParseAddr(addr.Address); err == nil && ip.Is4() == cidr.Addr().Is4() {
			return podnet.Gateway{Node: n.Name, Addr: ip}
		}
	}
	return podnet.Gateway{}
}
