package serviceproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Table is the nftables table the proxy owns (family ip).
const Table = "outpost-proxy"

// masqMark marks connections that must leave masqueraded: to a node
// port (the reply must come back through this node) and a pod reaching
// itself through its Service (hairpin).
const masqMark = "0x4000"

// Service is one Service as the proxy sees it.
type Service struct {
	Namespace, Name string
	ClusterIP       netip.Addr
	Ports           []Port
	// AffinityTimeout > 0 is ClientIP session affinity: a client goes to
	// the endpoint it went to last, until it was idle this long.
	AffinityTimeout time.Duration
}

// Port is one port of a Service with its endpoints.
type Port struct {
	Name     string
	Protocol string // tcp, udp or sctp
	Port     uint16
	NodePort uint16 // 0: none
	// Endpoints are where connections go: the ready ones, or, when none
	// is ready, the serving ones that terminate (as kube-proxy falls
	// back).
	Endpoints []Endpoint
}

// Endpoint is one address and port behind a Service port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
}

// chainName is a short, stable name for what key names: nftables names
// are limited to 256 bytes, and Services' names would not be unique once
// cut.
func chainName(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	return prefix + "-" + hex.EncodeToString(sum[:6])
}

// Ruleset is the nft script that replaces the proxy's table with one
// for svcs. Services without a cluster IP (headless) and ports without a
// protocol nft knows are left out; IPv6 Services are not proxied yet.
func Ruleset(svcs []Service) string {
	svcs = slices.Clone(svcs)
	slices.SortFunc(svcs, func(a, b Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	// Declaring the table first makes the delete succeed on a first run:
	// the whole script is one transaction.
	w("table ip %s {}", Table)
	w("delete table ip %s", Table)
	w("table ip %s {", Table)
	w("\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}")
	w("\tmap service-nodeports {\n\t\ttype inet_proto . inet_service : verdict\n\t}")
	w("\tmap no-endpoint-services {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}")
	w("\tmap no-endpoint-nodeports {\n\t\ttype inet_proto . inet_service : verdict\n\t}")
	w("\tset nodeports {\n\t\ttype inet_proto . inet_service\n\t}")
	w("\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ips\n\t\tfib daddr type local meta l4proto . th dport @nodeports meta mark set mark or %s\n\t\tfib daddr type local meta l4proto . th dport vmap @service-nodeports\n\t}", masqMark)
	for _, hook := range []string{"prerouting", "output"} {
		w("\tchain nat-%s {\n\t\ttype nat hook %s priority -100; policy accept;\n\t\tjump services\n\t}", hook, hook)
	}
	// hairpin holds "endpoint . endpoint": a pod that reached itself
	// through its Service, whose reply must come back through the
	// node.
	w("\tset hairpin {\n\t\ttype ipv4_addr . ipv4_addr\n\t}")
	w("\tchain nat-postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n\t\tmeta mark & %s == %s masquerade\n\t\tct status dnat ip saddr . ip daddr @hairpin masquerade\n\t}", masqMark, masqMark)
	w("\tchain reject-chain {\n\t\tmeta l4proto tcp reject with tcp reset\n\t\treject\n\t}")
	w("\tchain endpoints-check {\n\t\tip daddr . meta l4proto . th dport vmap @no-endpoint-services\n\t\tfib daddr type local meta l4proto . th dport vmap @no-endpoint-nodeports\n\t}")
	for _, hook := range []string{"input", "forward", "output"} {
		// Before nat's dstnat (-100), so that a Service without
		// endpoints is refused, not sent on to its cluster IP.
		w("\tchain filter-%s {\n\t\ttype filter hook %s priority -110; policy accept;\n\t\tct state new jump endpoints-check\n\t}", hook, hook)
	}
	var ips, nodePorts, noEPs, noEPNodePorts []string
	hairpin := map[netip.Addr]bool{}
	var nodePortSet []string
	for _, s := range svcs {
		if !s.ClusterIP.IsValid() || !s.ClusterIP.Is4() {
			continue
		}
		for _, p := range s.Ports {
			proto := strings.ToLower(p.Protocol)
			if proto != "tcp" && proto != "udp" && proto != "sctp" {
				continue
			}
			key := fmt.Sprintf("%s/%s/%s/%s", s.Namespace, s.Name, p.Name, proto)
			svcChain := chainName("svc", key)
			if len(p.Endpoints) == 0 {
				noEPs = append(noEPs, fmt.Sprintf("%s . %s . %d : goto reject-chain", s.ClusterIP, proto, p.Port))
				if p.NodePort != 0 {
					noEPNodePorts = append(noEPNodePorts, fmt.Sprintf("%s . %d : goto reject-chain", proto, p.NodePort))
				}
				continue
			}
			ips = append(ips, fmt.Sprintf("%s . %s . %d : goto %s", s.ClusterIP, proto, p.Port, svcChain))
			if p.NodePort != 0 {
				// A node port's connections leave masqueraded (the
				// services chain marks them), so replies come back
				// through this node.
				nodePorts = append(nodePorts, fmt.Sprintf("%s . %d : goto %s", proto, p.NodePort, svcChain))
				nodePortSet = append(nodePortSet, fmt.Sprintf("%s . %d", proto, p.NodePort))
			}
			eps := slices.Clone(p.Endpoints)
			slices.SortFunc(eps, func(a, b Endpoint) int {
				if c := a.Addr.Compare(b.Addr); c != 0 {
					return c
				}
				return int(a.Port) - int(b.Port)
			})
			for _, ep := range eps {
				hairpin[ep.Addr] = true
			}
			if s.AffinityTimeout <= 0 {
				// One rule: nft picks the endpoint and DNATs to it,
				// with no chain per endpoint (a sync of 1,000
				// Services stays small).
				var targets []string
				for i, ep := range eps {
					targets = append(targets, fmt.Sprintf("%d : %s . %d", i, ep.Addr, ep.Port))
				}
				w("\tchain %s {\n\t\tmeta l4proto %s dnat ip to numgen random mod %d map { %s }\n\t}", svcChain, proto, len(eps), strings.Join(targets, ", "))
				continue
			}
			// ClientIP affinity: a chain per endpoint, each
			// remembering its clients.
			var picks, sticky []string
			for i, ep := range eps {
				epChain := chainName("ep", fmt.Sprintf("%s/%s:%d", key, ep.Addr, ep.Port))
				set := epChain + "-affinity"
				picks = append(picks, fmt.Sprintf("%d : goto %s", i, epChain))
				sticky = append(sticky, fmt.Sprintf("ip saddr @%s goto %s", set, epChain))
				w("\tset %s {\n\t\ttype ipv4_addr\n\t\tflags dynamic,timeout\n\t\ttimeout %ds\n\t}", set, int(s.AffinityTimeout.Seconds()))
				w("\tchain %s {\n\t\tupdate @%s { ip saddr }\n\t\tmeta l4proto %s dnat to %s:%d\n\t}", epChain, set, proto, ep.Addr, ep.Port)
			}
			pick := fmt.Sprintf("numgen random mod %d vmap { %s }", len(eps), strings.Join(picks, ", "))
			w("\tchain %s {\n\t\t%s\n\t}", svcChain, strings.Join(append(sticky, pick), "\n\t\t"))
		}
	}
	w("}")
	for _, m := range []struct {
		name  string
		elems []string
	}{{"service-ips", ips}, {"service-nodeports", nodePorts}, {"no-endpoint-services", noEPs}, {"no-endpoint-nodeports", noEPNodePorts}, {"hairpin", hairpinElems(hairpin)}, {"nodeports", nodePortSet}} {
		if len(m.elems) > 0 {
			w("add element ip %s %s { %s }", Table, m.name, strings.Join(m.elems, ", "))
		}
	}
	return b.String()
}

func hairpinElems(addrs map[netip.Addr]bool) []string {
	out := make([]string, 0, len(addrs))
	for a := range addrs {
		out = append(out, a.String()+" . "+a.String())
	}
	slices.Sort(out)
	return out
}
