package core

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/admission"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// Services' virtual addresses (SPEC NET-3): a Service of type ClusterIP
// or NodePort is given the lowest free address of the service CIDR, and a
// NodePort Service the lowest free node port of each of its ports, when
// its author left them out; an address or port asked for must be in
// range and free, else the create is refused naming the field, as
// Kubernetes' allocators do. LoadBalancer is refused with what to use
// instead until outpost has a load balancer. Allocation is serialized by
// svcMu, held by Create and Update from the check through raft's apply
// (only the leader writes, after its barrier), so two Services never get
// one address.

var servicesResource = api.ResourceForKind("Service")

type serviceIPAdmission struct {
	net     Network
	objects func(*api.Resource) ([]api.Object, uint64, error)
}

func (serviceIPAdmission) KeepsValid() {}

func (serviceIPAdmission) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	return r == servicesResource && (op == admission.OpCreate || op == admission.OpUpdate)
}

func (a serviceIPAdmission) Admit(_ context.Context, _ string, _ *auth.Identity, obj, old api.Object) error {
	s, ok := obj.(*api.Service)
	if !ok {
		return nil
	}
	sp := api.Root("spec")
	var errs api.ErrorList
	switch s.Spec.Type {
	case api.ServiceTypeLoadBalancer:
		return api.NewInvalid("Service", s.Name, api.ErrorList{api.Invalid(sp.Child("type"), s.Spec.Type,
			"outpost has no load balancer yet: use NodePort (and a site's load balancer in front of the nodes' ports) or ClusterIP")})
	case api.ServiceTypeExternalName:
		return nil
	}
	var prev *api.Service
	if o, ok := old.(*api.Service); ok {
		prev = o
		if s.Spec.ClusterIP == "" {
			s.Spec.ClusterIP = prev.Spec.ClusterIP
		}
	}
	others, _, err := a.objects(servicesResource)
	if err != nil {
		return fmt.Errorf("services: %w", err)
	}
	// The resolver's address is never a Service's: lowestFree skips it.
	usedIPs := map[netip.Addr]string{a.net.ClusterDNS: "-"}
	usedPorts := map[int32]string{}
	for _, o := range others {
		other := o.(*api.Service)
		if other.Namespace == s.Namespace && other.Name == s.Name {
			continue
		}
		if ip, err := netip.ParseAddr(other.Spec.ClusterIP); err == nil {
			usedIPs[ip] = other.Namespace + "/" + other.Name
		}
		for _, p := range other.Spec.Ports {
			if p.NodePort != 0 {
				usedPorts[p.NodePort] = other.Namespace + "/" + other.Name
			}
		}
	}
	switch ip := s.Spec.ClusterIP; {
	case ip == "None":
	case ip == "":
		free, ok := lowestFree(a.net.ServiceCIDR, usedIPs)
		if !ok {
			errs = append(errs, api.Invalid(sp.Child("clusterIP"), "", fmt.Sprintf("no address of the service CIDR %s is free", a.net.ServiceCIDR)))
		}
		s.Spec.ClusterIP = free.String()
	case prev != nil && prev.Spec.ClusterIP == ip:
		// Kept as it was (given before a --service-cidr change, say).
	default:
		addr, err := netip.ParseAddr(ip)
		switch {
		case err != nil:
			// validation says so
		case !a.net.ServiceCIDR.Contains(addr):
			errs = append(errs, api.Invalid(sp.Child("clusterIP"), ip, fmt.Sprintf("provided IP is not in the service CIDR %s (--service-cidr)", a.net.ServiceCIDR)))
		case addr == a.net.ClusterDNS:
			errs = append(errs, api.Invalid(sp.Child("clusterIP"), ip, "provided IP is reserved for the cluster's DNS resolver (--cluster-dns)"))
		case usedIPs[addr] != "":
			errs = append(errs, api.Invalid(sp.Child("clusterIP"), ip, "provided IP is already allocated (to service "+usedIPs[addr]+")"))
		}
	}
	lo, hi := a.net.NodePorts[0], a.net.NodePorts[1]
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		pp := sp.Child("ports").Index(i).Child("nodePort")
		if s.Spec.Type != api.ServiceTypeNodePort {
			if p.NodePort != 0 {
				errs = append(errs, api.Invalid(pp, int64(p.NodePort), "may not be used when `type` is '"+s.Spec.Type+"'"))
			}
			continue
		}
		if p.NodePort == 0 && prev != nil {
			for _, op := range prev.Spec.Ports {
				if op.Port == p.Port && op.Protocol == p.Protocol {
					p.NodePort = op.NodePort
				}
			}
		}
		kept := false
		if prev != nil {
			for _, op := range prev.Spec.Ports {
				kept = kept || op.NodePort == p.NodePort && op.NodePort != 0
			}
		}
		switch {
		case kept:
			// Kept as it was.
		case p.NodePort == 0:
			for port := lo; port <= hi; port++ {
				if usedPorts[port] == "" {
					p.NodePort = port
					break
				}
			}
			if p.NodePort == 0 {
				errs = append(errs, api.Invalid(pp, int64(0), fmt.Sprintf("no node port of %d-%d is free", lo, hi)))
			}
		case p.NodePort < lo || p.NodePort > hi:
			errs = append(errs, api.Invalid(pp, int64(p.NodePort), fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", lo, hi)))
		case usedPorts[p.NodePort] != "":
			errs = append(errs, api.Invalid(pp, int64(p.NodePort), "provided port is already allocated (to service "+usedPorts[p.NodePort]+")"))
		}
		if p.NodePort != 0 {
			usedPorts[p.NodePort] = s.Namespace + "/" + s.Name // two ports of this one
		}
	}
	if len(errs) > 0 {
		return api.NewInvalid("Service", s.Name, errs)
	}
	return nil
}

// lowestFree is the lowest address of cidr after its network address
// that used lacks (the broadcast address of an IPv4 range excluded).
func lowestFree(cidr netip.Prefix, used map[netip.Addr]string) (netip.Addr, bool) {
	cidr = cidr.Masked()
	for a := cidr.Addr().Next(); a.IsValid() && cidr.Contains(a); a = a.Next() {
		if next := a.Next(); a.Is4() && (!next.IsValid() || !cidr.Contains(next)) {
			break // the broadcast address
		}
		if used[a] == "" {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// mayAllocate reports whether an update of res ns/name may take
// addresses: any Service's, and a Node's only while it has no pod CIDR
// (once set it never changes, so the answer cannot go stale). Cordons,
// taints and labels of nodes with a range then do not wait for one
// another or for Services.
func (c *Core) mayAllocate(res *api.Resource, ns, name string) bool {
	if res != nodesResource {
		return true
	}
	cur, err := c.st.GetObject(res, ns, name)
	if err != nil {
		return true
	}
	n, ok := cur.(*api.Node)
	return !ok || n.Spec.PodCIDR == ""
}

// allocationLock serializes writes that take addresses, from their
// allocation through raft's apply: Services' (headless Services without
// node ports take none and are not held up) and Nodes' pod CIDRs. Status
// writes never allocate and are not held.
type allocationLock struct{ mu sync.Mutex }

// hold takes the lock if any of objs may take addresses, and returns
// what gives it back.
func (l *allocationLock) hold(objs ...api.Object) func() {
	for _, obj := range objs {
		switch o := obj.(type) {
		case *api.Service:
			if !takesAddresses(o) {
				continue
			}
		case *api.Node:
		default:
			continue
		}
		l.mu.Lock()
		return l.mu.Unlock
	}
	return func() {}
}

// takesAddresses reports whether s is given a cluster IP or node ports.
func takesAddresses(s *api.Service) bool {
	return s.Spec.ClusterIP != "None" || s.Spec.Type == api.ServiceTypeNodePort
}
