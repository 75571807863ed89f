package core

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// Nodes' pod CIDRs (SPEC NET-2): a node without one is given the lowest
// free range of the cluster CIDR, NodeCIDRMaskSize long, when it is
// created or next written, as Kubernetes' node IPAM controller does. Doing
// it in admission rather than in a controller gives an agent its range in
// the answer to its registration. A range asked for must lie in the
// cluster CIDR and overlap no other node's; once set it does not change
// (the node's pods hold addresses from it). Allocation is serialized by
// the same lock as Services' addresses. A full cluster CIDR does not keep
// a node out: it registers without a range (its agent then reports the
// network unavailable) and is given one once another node leaves and it
// is written again.

type podCIDRAdmission struct {
	net     Network
	objects func(*api.Resource) ([]api.Object, uint64, error)
}

func (podCIDRAdmission) KeepsValid() {}

func (podCIDRAdmission) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	return r == nodesResource && (op == admission.OpCreate || op == admission.OpUpdate)
}

func (a podCIDRAdmission) Admit(_ context.Context, _ string, _ *auth.Identity, obj, old api.Object) error {
	n, ok := obj.(*api.Node)
	if !ok {
		return nil
	}
	field := api.Root("spec").Child("podCIDR")
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[api.AnnotationClusterCIDR] = a.net.ClusterCIDR.String()
	n.Annotations[api.AnnotationClusterDNS] = a.net.ClusterDNS.String()
	if o, ok := old.(*api.Node); ok && o.Spec.PodCIDR != "" {
		switch n.Spec.PodCIDR {
		case "":
			// A writer that did not know of it (an agent's copy from
			// before it was given) keeps it.
			n.Spec.PodCIDR, n.Spec.PodCIDRs = o.Spec.PodCIDR, slices.Clone(o.Spec.PodCIDRs)
			return nil
		case o.Spec.PodCIDR:
			return nil
		}
		return api.NewInvalid("Node", n.Name, api.ErrorList{api.Invalid(field, n.Spec.PodCIDR,
			"may not be changed once set (it is "+o.Spec.PodCIDR+"): the node's pods hold addresses from it; delete the node to give it another")})
	}
	others, _, err := a.objects(nodesResource)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	var used []taken
	for _, o := range others {
		other := o.(*api.Node)
		if other.Name == n.Name {
			continue
		}
		if p, err := netip.ParsePrefix(other.Spec.PodCIDR); err == nil {
			used = append(used, taken{p.Masked(), other.Name})
		}
	}
	if n.Spec.PodCIDR == "" {
		if p, ok := lowestFreeBlock(a.net.ClusterCIDR, a.net.NodeCIDRMaskSize, used); ok {
			n.Spec.PodCIDR = p.String()
			n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
		}
		return nil
	}
	p, err := netip.ParsePrefix(n.Spec.PodCIDR)
	if err != nil {
		return nil // validation says so
	}
	var errs api.ErrorList
	if !a.net.ClusterCIDR.Contains(p.Addr()) || p.Bits() < a.net.ClusterCIDR.Bits() {
		errs = append(errs, api.Invalid(field, n.Spec.PodCIDR, fmt.Sprintf("is not in the cluster CIDR %s (--cluster-cidr)", a.net.ClusterCIDR)))
	} else if t, clash := overlapping(p.Masked(), used); clash {
		errs = append(errs, api.Invalid(field, n.Spec.PodCIDR, fmt.Sprintf("overlaps node %s's pod CIDR %s", t.node, t.cidr)))
	}
	if len(errs) > 0 {
		return api.NewInvalid("Node", n.Name, errs)
	}
	return nil
}

// taken is a pod CIDR and the node that holds it.
type taken struct {
	cidr netip.Prefix
	node string
}

func overlapping(p netip.Prefix, used []taken) (taken, bool) {
	for _, t := range used {
		if t.cidr.Overlaps(p) {
			return t, true
		}
	}
	return taken{}, false
}

// lowestFreeBlock is the lowest range of length bits in cidr that
// overlaps none of used. It looks at most len(used)+1 ranges past the
// ones a used range covers, so a large cluster CIDR costs nothing.
func lowestFreeBlock(cidr netip.Prefix, bits int, used []taken) (netip.Prefix, bool) {
	if bits < cidr.Bits() || bits > cidr.Addr().BitLen() {
		return netip.Prefix{}, false
	}
	for start := cidr.Masked().Addr(); start.IsValid() && cidr.Contains(start); {
		p := netip.PrefixFrom(start, bits)
		t, clash := overlapping(p, used)
		if !clash {
			return p, true
		}
		// Skip past whichever ends later: this range or the one in the
		// way (a larger range an administrator gave).
		end := lastAddr(p)
		if e := lastAddr(t.cidr); e.Compare(end) > 0 {
			end = e
		}
		start = end.Next()
	}
	return netip.Prefix{}, false
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As16()
	offset := 0
	if p.Addr().Is4() {
		offset = 96
	}
	for i := p.Bits() + offset; i < 128; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}
