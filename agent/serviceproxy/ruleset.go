package serviceproxy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
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

// The maps and sets every Service port shares, in the order their
// elements are written.
const (
	serviceIPs          = "service-ips"
	serviceNodePorts    = "service-nodeports"
	noEndpointServices  = "no-endpoint-services"
	noEndpointNodePorts = "no-endpoint-nodeports"
	hairpinSet          = "hairpin"
	nodePortSet         = "nodeports"
)

var sharedSets = []string{serviceIPs, serviceNodePorts, noEndpointServices, noEndpointNodePorts, hairpinSet, nodePortSet}

// skeleton is the part of the table that never changes: the shared maps
// and sets (empty) and the chains hooked into the kernel, which look
// the packets up in them.
func skeleton(w func(format string, args ...any)) {
	w("\tmap %s {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}", serviceIPs)
	w("\tmap %s {\n\t\ttype inet_proto . inet_service : verdict\n\t}", serviceNodePorts)
	w("\tmap %s {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}", noEndpointServices)
	w("\tmap %s {\n\t\ttype inet_proto . inet_service : verdict\n\t}", noEndpointNodePorts)
	w("\tset %s {\n\t\ttype inet_proto . inet_service\n\t}", nodePortSet)
	w("\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @%s\n\t\tfib daddr type local meta l4proto . th dport @%s meta mark set mark or %s\n\t\tfib daddr type local meta l4proto . th dport vmap @%s\n\t}", serviceIPs, nodePortSet, masqMark, serviceNodePorts)
	for _, hook := range []string{"prerouting", "output"} {
		w("\tchain nat-%s {\n\t\ttype nat hook %s priority -100; policy accept;\n\t\tjump services\n\t}", hook, hook)
	}
	// hairpin holds "endpoint . endpoint": a pod that reached itself
	// through its Service, whose reply must come back through the
	// node.
	w("\tset %s {\n\t\ttype ipv4_addr . ipv4_addr\n\t}", hairpinSet)
	w("\tchain nat-postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n\t\tmeta mark & %s == %s masquerade\n\t\tct status dnat ip saddr . ip daddr @%s masquerade\n\t}", masqMark, masqMark, hairpinSet)
	w("\tchain reject-chain {\n\t\tmeta l4proto tcp reject with tcp reset\n\t\treject\n\t}")
	w("\tchain endpoints-check {\n\t\tip daddr . meta l4proto . th dport vmap @%s\n\t\tfib daddr type local meta l4proto . th dport vmap @%s\n\t}", noEndpointServices, noEndpointNodePorts)
	for _, hook := range []string{"input", "forward", "output"} {
		// Before nat's dstnat (-100), so that a Service without
		// endpoints is refused, not sent on to its cluster IP.
		w("\tchain filter-%s {\n\t\ttype filter hook %s priority -110; policy accept;\n\t\tct state new jump endpoints-check\n\t}", hook, hook)
	}
}

// tableState is what the proxy's table holds, in pieces two syncs can
// compare: the elements of the shared maps and sets, and each Service
// port's own sets and chains (its unit).
type tableState struct {
	// elems holds, by shared map or set, each element's key and its
	// value ("" in a set).
	elems map[string]map[string]string
	// units are by the name of their service chain.
	units map[string]*unit
}

// unit is one Service port's own objects, which nothing but the shared
// maps' elements refer to. A set's name covers all of its declaration
// (an affinity set's name has its timeout), so a set kept by name never
// has to be declared again: its remembered clients stay.
type unit struct {
	sets []nftSet
	// chains are in the order they are added: those a chain jumps to
	// come before it.
	chains []nftChain
	text   string // the whole unit as written, to compare

	// What the unit was made of, so that the next build can take it
	// as it is: making 1,000 again would cost more than the rest of
	// an update.
	affinity time.Duration
	eps      []Endpoint // sorted
}

type nftSet struct {
	kind  string // set or map
	name  string
	decl  []string
	elems []string // static elements; none in an affinity set
}

type nftChain struct {
	name  string
	rules []string
}

func (s nftSet) write(b *strings.Builder) {
	fmt.Fprintf(b, "\t%s %s {\n", s.kind, s.name)
	for _, l := range s.decl {
		fmt.Fprintf(b, "\t\t%s\n", l)
	}
	if len(s.elems) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(s.elems, ", "))
	}
	b.WriteString("\t}\n")
}

func (c nftChain) write(b *strings.Builder) {
	fmt.Fprintf(b, "\tchain %s {\n", c.name)
	for _, r := range c.rules {
		fmt.Fprintf(b, "\t\t%s\n", r)
	}
	b.WriteString("\t}\n")
}

// Ruleset is the nft script that replaces the proxy's table with one
// for svcs. Services without a cluster IP (headless) and ports without a
// protocol nft knows are left out; IPv6 Services are not proxied yet.
func Ruleset(svcs []Service) string {
	return build(svcs, nil).full()
}

// build is the table for svcs, with the units of prev (which may be nil)
// that are still the same. Where two Service ports claim the same
// address and port, the last by namespace and name wins.
func build(svcs []Service, prev *tableState) *tableState {
	svcs = slices.Clone(svcs)
	slices.SortFunc(svcs, func(a, b Service) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	st := &tableState{elems: map[string]map[string]string{}, units: map[string]*unit{}}
	for _, name := range sharedSets {
		st.elems[name] = map[string]string{}
	}
	hairpin := map[netip.Addr]bool{}
	for _, s := range svcs {
		if !s.ClusterIP.IsValid() || !s.ClusterIP.Is4() {
			continue
		}
		for _, p := range s.Ports {
			proto := strings.ToLower(p.Protocol)
			if proto != "tcp" && proto != "udp" && proto != "sctp" {
				continue
			}
			key := s.Namespace + "/" + s.Name + "/" + p.Name + "/" + proto
			svcChain := chainName("svc", key)
			ipKey := s.ClusterIP.String() + " . " + proto + " . " + strconv.Itoa(int(p.Port))
			nodePortKey := proto + " . " + strconv.Itoa(int(p.NodePort))
			if len(p.Endpoints) == 0 {
				st.elems[noEndpointServices][ipKey] = "goto reject-chain"
				if p.NodePort != 0 {
					st.elems[noEndpointNodePorts][nodePortKey] = "goto reject-chain"
				}
				continue
			}
			st.elems[serviceIPs][ipKey] = "goto " + svcChain
			if p.NodePort != 0 {
				// A node port's connections leave masqueraded (the
				// services chain marks them), so replies come back
				// through this node.
				st.elems[serviceNodePorts][nodePortKey] = "goto " + svcChain
				st.elems[nodePortSet][nodePortKey] = ""
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
			if prev != nil {
				if u := prev.units[svcChain]; u != nil && u.affinity == s.AffinityTimeout && slices.Equal(u.eps, eps) {
					st.units[svcChain] = u
					continue
				}
			}
			u := portUnit(key, svcChain, proto, s.AffinityTimeout, eps)
			var b strings.Builder
			for _, set := range u.sets {
				set.write(&b)
			}
			for _, c := range u.chains {
				c.write(&b)
			}
			u.text, u.affinity, u.eps = b.String(), s.AffinityTimeout, eps
			st.units[svcChain] = u
		}
	}
	for a := range hairpin {
		st.elems[hairpinSet][a.String()+" . "+a.String()] = ""
	}
	return st
}

// portUnit is the sets and chains of one Service port with endpoints.
func portUnit(key, svcChain, proto string, affinity time.Duration, eps []Endpoint) *unit {
	if affinity <= 0 {
		// One rule: nft picks the endpoint from a map of the port's own
		// and DNATs to it, with no chain per endpoint (a sync of 1,000
		// Services stays small). The map is named, not written into
		// the rule: the kernel names and binds anonymous sets in time
		// that grows with their number, a third of a whole sync at
		// 1,000 Services.
		targets := make([]string, len(eps))
		for i, ep := range eps {
			targets[i] = fmt.Sprintf("%d : %s . %d", i, ep.Addr, ep.Port)
		}
		m := nftSet{kind: "map", name: svcChain + "-endpoints", decl: []string{fmt.Sprintf("typeof numgen random mod 2 : ip daddr . %s dport", proto)}, elems: targets}
		return &unit{
			sets:   []nftSet{m},
			chains: []nftChain{{name: svcChain, rules: []string{fmt.Sprintf("meta l4proto %s dnat ip to numgen random mod %d map @%s", proto, len(eps), m.name)}}},
		}
	}
	// ClientIP affinity: a chain per endpoint, each remembering its
	// clients.
	u := &unit{}
	secs := int(affinity.Seconds())
	var picks, sticky []string
	for i, ep := range eps {
		epChain := chainName("ep", fmt.Sprintf("%s/%s:%d", key, ep.Addr, ep.Port))
		set := fmt.Sprintf("%s-affinity-%ds", epChain, secs)
		picks = append(picks, fmt.Sprintf("%d : goto %s", i, epChain))
		sticky = append(sticky, fmt.Sprintf("ip saddr @%s goto %s", set, epChain))
		u.sets = append(u.sets, nftSet{kind: "set", name: set, decl: []string{"type ipv4_addr", "flags dynamic,timeout", fmt.Sprintf("timeout %ds", secs)}})
		u.chains = append(u.chains, nftChain{name: epChain, rules: []string{fmt.Sprintf("update @%s { ip saddr }", set), fmt.Sprintf("meta l4proto %s dnat to %s:%d", proto, ep.Addr, ep.Port)}})
	}
	pick := fmt.Sprintf("numgen random mod %d vmap { %s }", len(eps), strings.Join(picks, ", "))
	u.chains = append(u.chains, nftChain{name: svcChain, rules: append(sticky, pick)})
	return u
}

// full is the script that replaces the table with st, in one
// transaction.
func (st *tableState) full() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	// Declaring the table first makes the delete succeed on a first run:
	// the whole script is one transaction.
	w("table ip %s {}", Table)
	w("delete table ip %s", Table)
	w("table ip %s {", Table)
	skeleton(w)
	for _, name := range slices.Sorted(maps.Keys(st.units)) {
		b.WriteString(st.units[name].text)
	}
	w("}")
	for _, name := range sharedSets {
		if elems := elements(st.elems[name], nil); len(elems) > 0 {
			w("add element ip %s %s { %s }", Table, name, strings.Join(elems, ", "))
		}
	}
	return b.String()
}

// notIn is the keys of set that other lacks or holds with another value,
// sorted.
func notIn(set, other map[string]string) []string {
	var out []string
	for k, v := range set {
		if ov, ok := other[k]; !ok || ov != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// elements is the elements of set that other lacks or holds with another
// value, as nft writes them ("key : value" in a map).
func elements(set, other map[string]string) []string {
	out := notIn(set, other)
	for i, k := range out {
		if v := set[k]; v != "" {
			out[i] = k + " : " + v
		}
	}
	return out
}

// diff is the script that turns the table from what from holds into
// what to holds in one transaction, "" when they are the same. A unit
// that changed has all of its chains flushed and written again; its sets
// stay when their name does (static map elements are written again).
//
// The order matters: nftables refuses to delete a chain a map element
// or a rule still jumps to, or a set a rule still uses, even when the
// same transaction removes the reference later. So references go first
// (shared map elements, then every rule of the changed units), then the
// chains and sets nothing refers to any more, and what is new comes
// last.
func diff(from, to *tableState) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	// Shared elements gone or with another value.
	for _, name := range sharedSets {
		if gone := notIn(from.elems[name], to.elems[name]); len(gone) > 0 {
			w("delete element ip %s %s { %s }", Table, name, strings.Join(gone, ", "))
		}
	}

	// Units gone or changed: every rule out, so that nothing refers
	// to what goes.
	var changed []string
	for name, ou := range from.units {
		if nu, ok := to.units[name]; !ok || nu.text != ou.text {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	for _, name := range changed {
		for _, c := range from.units[name].chains {
			w("flush chain ip %s %s", Table, c.name)
		}
	}
	kept := map[string]bool{} // sets that stay as they are
	for _, name := range changed {
		ou, nu := from.units[name], to.units[name]
		newChains, newSets := map[string]bool{}, map[string]bool{}
		if nu != nil {
			for _, c := range nu.chains {
				newChains[c.name] = true
			}
			for _, s := range nu.sets {
				newSets[s.name] = true
			}
		}
		for _, c := range ou.chains {
			if !newChains[c.name] {
				w("delete chain ip %s %s", Table, c.name)
			}
		}
		for _, s := range ou.sets {
			switch {
			case !newSets[s.name]:
				w("delete %s ip %s %s", s.kind, Table, s.name)
			case len(s.elems) > 0:
				// Written again below, with its elements.
				w("flush %s ip %s %s", s.kind, Table, s.name)
			default:
				kept[s.name] = true
			}
		}
	}

	// Units new or changed, whole but for the sets kept as they were.
	var written []string
	for name, nu := range to.units {
		if ou, ok := from.units[name]; !ok || ou.text != nu.text {
			written = append(written, name)
		}
	}
	slices.Sort(written)
	var block strings.Builder
	for _, name := range written {
		nu := to.units[name]
		for _, s := range nu.sets {
			if !kept[s.name] {
				s.write(&block)
			}
		}
		for _, c := range nu.chains {
			c.write(&block)
		}
	}
	if block.Len() > 0 {
		w("table ip %s {\n%s}", Table, block.String())
	}

	// Shared elements new or with another value, once the chains they
	// jump to are there.
	for _, name := range sharedSets {
		if added := elements(to.elems[name], from.elems[name]); len(added) > 0 {
			w("add element ip %s %s { %s }", Table, name, strings.Join(added, ", "))
		}
	}
	return b.String()
}
