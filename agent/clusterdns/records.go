package clusterdns

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// TTL is how long clients may keep an answer, in seconds: short, as
// CoreDNS's Kubernetes plugin answers, since endpoints come and go.
const TTL = 5

// Records is what the resolver knows of the cluster's names at one
// moment; it is never changed once built.
type Records struct {
	domain string // "cluster.local." (lowercase, fully qualified)
	addrs  map[string][]netip.Addr
	srv    map[string][]srvTarget
	cname  map[string]string
	ptr    map[string]string
	// names holds every name that exists and every name above one
	// within the domain: a question for one of those with no record of
	// its type is answered "no data", not "no such name".
	names map[string]bool
}

type srvTarget struct {
	target string
	port   uint16
}

// Build is the records of svcs and their EndpointSlices under domain
// (such as "cluster.local").
func Build(domain string, svcs []*api.Service, slices []*api.EndpointSlice) *Records {
	r := &Records{
		domain: dns.CanonicalName(domain),
		addrs:  map[string][]netip.Addr{},
		srv:    map[string][]srvTarget{},
		cname:  map[string]string{},
		ptr:    map[string]string{},
		names:  map[string]bool{},
	}
	bySvc := map[string][]*api.EndpointSlice{}
	for _, es := range slices {
		if name := es.Labels[api.LabelServiceName]; name != "" {
			bySvc[es.Namespace+"/"+name] = append(bySvc[es.Namespace+"/"+name], es)
		}
	}
	for _, s := range svcs {
		svcName := dns.CanonicalName(fmt.Sprintf("%s.%s.svc.%s", s.Name, s.Namespace, r.domain))
		r.add(svcName)
		if s.Spec.Type == api.ServiceTypeExternalName {
			r.cname[svcName] = dns.Fqdn(s.Spec.ExternalName)
			continue
		}
		if ip, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil {
			r.addrs[svcName] = append(r.addrs[svcName], ip)
			r.ptr[reverse(ip)] = svcName
			for _, p := range s.Spec.Ports {
				r.addSRV(p.Name, p.Protocol, svcName, srvTarget{svcName, uint16(p.Port)})
			}
			continue
		}
		// Headless: the name is the ready endpoints themselves, each
		// also by a name of its own (its hostname, or its address with
		// dashes) for SRV answers to point at.
		for _, es := range bySvc[s.Namespace+"/"+s.Name] {
			for _, e := range es.Endpoints {
				if len(e.Addresses) == 0 || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
					continue
				}
				ip, err := netip.ParseAddr(e.Addresses[0])
				if err != nil {
					continue
				}
				label := e.Hostname
				if label == "" {
					label = dashed(ip)
				}
				epName := label + "." + svcName
				r.add(epName)
				r.addrs[svcName] = append(r.addrs[svcName], ip)
				r.addrs[epName] = append(r.addrs[epName], ip)
				r.ptr[reverse(ip)] = epName
				for _, p := range es.Ports {
					if p.Port != nil {
						r.addSRV(p.Name, p.Protocol, svcName, srvTarget{epName, uint16(*p.Port)})
					}
				}
			}
		}
	}
	return r
}

// add records that name exists, and the names above it in the domain.
func (r *Records) add(name string) {
	for n := name; dns.IsSubDomain(r.domain, n); {
		if r.names[n] {
			return
		}
		r.names[n] = true
		i, end := dns.NextLabel(n, 0)
		if end {
			return
		}
		n = n[i:]
	}
}

// addSRV adds _PORT._PROTO.SERVICE for a named port (only named ports
// have SRV records, as in Kubernetes).
func (r *Records) addSRV(port, proto, svcName string, t srvTarget) {
	if port == "" {
		return
	}
	if proto == "" {
		proto = api.ProtocolTCP
	}
	name := "_" + strings.ToLower(port) + "._" + strings.ToLower(proto) + "." + svcName
	r.add(name)
	r.srv[name] = append(r.srv[name], t)
}

// dashed is ip written as one DNS label: 10.42.1.7 → 10-42-1-7, as
// Kubernetes names pods and unnamed endpoints.
func dashed(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.StringExpanded(), ":", "-")
}

// reverse is ip's name under in-addr.arpa or ip6.arpa.
func reverse(ip netip.Addr) string {
	name, _ := dns.ReverseAddr(ip.String())
	return name
}

// podAddr is the address a name of a pod (A-B-C-D.NAMESPACE.pod.DOMAIN)
// stands for.
func (r *Records) podAddr(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(name, ".pod."+r.domain)
	if !ok {
		return netip.Addr{}, false
	}
	label, ns, ok := strings.Cut(rest, ".")
	if !ok || ns == "" || strings.Contains(ns, ".") {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(strings.ReplaceAll(label, "-", "."))
	if err != nil || !ip.Is4() {
		return netip.Addr{}, false
	}
	return ip, true
}
