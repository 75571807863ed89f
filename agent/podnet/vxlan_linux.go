package podnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
)

// VXLAN pod routes (SPEC NET-2): other nodes' pods are reached through the
// kernel's VXLAN device, which wraps their packets in UDP to the node's
// InternalIP, so the nodes need only reach each other's addresses, across
// any routers, and nothing between them knows the pod CIDRs. Each node's
// tunnel end (VTEP) is the network address of its pod CIDR (10.42.1.0 for
// 10.42.1.0/24, as flannel has it) with a MAC made from that address, so
// that every node knows every other's from the Node objects alone: no
// MAC is published, and none is learnt from traffic (nolearning).
const (
	// VXLANDevice is the device: named by the agent, so the agent may
	// remove it and everything on it.
	VXLANDevice = "outpost.vxlan"
	vxlanVNI    = 1
	// vxlanPort is the Linux kernel's VXLAN port, which flannel uses
	// (IANA's is 4789): a host that runs flannel too would conflict on
	// the VNI rather than the port.
	vxlanPort = 8472
)

// vxlanOverhead is what VXLAN adds to every packet over an underlay of
// local's family: the outer IP header, UDP (8), VXLAN (8) and the inner
// Ethernet header (14).
func vxlanOverhead(local netip.Addr) int {
	if local.Is6() {
		return 40 + 8 + 8 + 14
	}
	return 20 + 8 + 8 + 14
}

// VTEPMAC is the MAC of the tunnel end of the node with pod CIDR cidr:
// 0a:58 (locally administered, as CNI's MACs made from IPs begin) and the
// four bytes of its network address, so that no two nodes' are the same.
func VTEPMAC(cidr netip.Prefix) net.HardwareAddr {
	a := cidr.Masked().Addr().As4()
	return net.HardwareAddr{0x0a, 0x58, a[0], a[1], a[2], a[3]}
}

// vtepAddr is the tunnel end's address of the node with pod CIDR cidr.
func vtepAddr(cidr netip.Prefix) netip.Addr { return cidr.Masked().Addr() }

// VXLANMTU is the MTU of the VXLAN device of a node whose InternalIP is
// local: its link's less the overhead, so that a wrapped packet still
// fits the link and is never fragmented between the nodes. Pods' links
// get it too (the default network's mtu).
func VXLANMTU(ctx context.Context, local netip.Addr) (int, error) {
	links, err := readLinks(ctx)
	if err != nil {
		return 0, err
	}
	return vxlanMTU(links, local)
}

func vxlanMTU(links []ipLink, local netip.Addr) (int, error) {
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil && ip == local {
				return l.MTU - vxlanOverhead(local), nil
			}
		}
	}
	return 0, fmt.Errorf("the node's address %s is on no link of this host, which the vxlan device must send from", local)
}

// SyncVXLAN makes this host's overlay to other nodes' pods (vxlan, SPEC
// NET-2) what want says: the VXLAN device sending from local with
// podCIDR's tunnel end, and for each other node (want: its pod CIDR and
// InternalIP) a route to its pod CIDR via its tunnel end, a permanent
// neighbor entry with the tunnel end's MAC, and a forwarding entry
// sending that MAC to its InternalIP. Entries of nodes no longer wanted
// (a node that left, or has another address or pod CIDR now) go; run
// again with the same, it changes nothing. Each entry is tried on its
// own: the error joins those that failed, naming the node.
func SyncVXLAN(ctx context.Context, local netip.Addr, podCIDR netip.Prefix, want map[netip.Prefix]Gateway) error {
	if !local.IsValid() || !podCIDR.IsValid() {
		return fmt.Errorf("vxlan: the node has no InternalIP or pod CIDR yet")
	}
	if !podCIDR.Addr().Is4() {
		return fmt.Errorf("vxlan: pod CIDR %s: only IPv4 pod CIDRs have tunnel ends", podCIDR)
	}
	links, err := readLinks(ctx)
	if err != nil {
		return fmt.Errorf("vxlan: %w", err)
	}
	mtu, err := vxlanMTU(links, local)
	if err != nil {
		return fmt.Errorf("vxlan: %w", err)
	}
	dev := vxlanLink{VNI: vxlanVNI, Port: vxlanPort, Local: local, MTU: mtu, MAC: VTEPMAC(podCIDR).String(), Up: true}
	if steps := linkSteps(findVXLAN(links), dev); len(steps) > 0 {
		if err := runSteps(ctx, steps); err != nil {
			return fmt.Errorf("vxlan: %w", err)
		}
		// A device made anew, or given another MAC, has lost its
		// neighbor entries (the kernel flushes them): read it again.
		if links, err = readLinks(ctx); err != nil {
			return fmt.Errorf("vxlan: %w", err)
		}
	}
	have, err := readVXLANEntries(ctx, links)
	if err != nil {
		return fmt.Errorf("vxlan: %w", err)
	}
	steps, err := entrySteps(have, podCIDR, want)
	return errors.Join(err, runSteps(ctx, steps))
}

// vxlanLink is the VXLAN device as the kernel has it, or as it should be.
type vxlanLink struct {
	// Kind is the device's type; another device under VXLANDevice's
	// name is made anew.
	Kind      string
	VNI, Port int
	Local     netip.Addr
	Learning  bool
	MTU       int
	MAC       string
	Up        bool
}

// linkSteps are the steps from the device have (nil: none) to want. A
// device with another VNI, port, address sent from, or learning is made
// anew rather than changed in place, which kernels allow for some of
// these only: the entries on the old device go with it and entrySteps
// puts them back.
func linkSteps(have *vxlanLink, want vxlanLink) []step {
	const what = "the vxlan device " + VXLANDevice
	add := []step{
		{args: []string{"ip", "link", "add", VXLANDevice, "address", want.MAC, "mtu", strconv.Itoa(want.MTU), "type", "vxlan",
			"id", strconv.Itoa(want.VNI), "local", want.Local.String(), "dstport", strconv.Itoa(want.Port), "nolearning"}, what: "make " + what},
		{args: []string{"ip", "link", "set", VXLANDevice, "up"}, what: "bring up " + what},
	}
	switch {
	case have == nil:
		return add
	case have.Kind != "vxlan" || have.VNI != want.VNI || have.Port != want.Port || have.Local != want.Local || have.Learning:
		return append([]step{{args: []string{"ip", "link", "del", VXLANDevice}, what: "remove " + what + " to make it anew"}}, add...)
	}
	var steps []step
	if have.MTU != want.MTU {
		steps = append(steps, step{args: []string{"ip", "link", "set", VXLANDevice, "mtu", strconv.Itoa(want.MTU)}, what: "set the MTU of " + what})
	}
	if have.MAC != want.MAC {
		steps = append(steps, step{args: []string{"ip", "link", "set", VXLANDevice, "address", want.MAC}, what: "set the MAC of " + what})
	}
	if !have.Up {
		steps = append(steps, add[1])
	}
	return steps
}

// vxlanEntries is what hangs on the VXLAN device, as the kernel has it.
type vxlanEntries struct {
	// addrs are the device's IPv4 addresses (it has one: this node's
	// tunnel end).
	addrs []netip.Prefix
	// neigh are its permanent neighbor entries: tunnel end → MAC.
	neigh map[netip.Addr]string
	// fdb are its forwarding entries: MAC → the node's InternalIP.
	fdb map[string]netip.Addr
	// routes are every route of routeProto, host-gw's of an earlier
	// mode among them, which entrySteps replaces.
	routes map[netip.Prefix]route
}

// entrySteps are the steps from the entries have to those of this node's
// pod CIDR own and of the nodes of want. Deletions run first, the route
// before the neighbor and forwarding entries it used; additions last, a
// route after what it uses, so that no packet finds a route without its
// neighbor. Nodes that cannot have a tunnel end are left out, and said
// so in the error.
func entrySteps(have vxlanEntries, own netip.Prefix, want map[netip.Prefix]Gateway) ([]step, error) {
	var errs []error
	routes := map[netip.Prefix]route{}
	neigh := map[netip.Addr]string{}
	fdb := map[string]netip.Addr{}
	nodes := map[string]string{} // MAC → node, for errors
	for _, cidr := range sortedKeys(want) {
		gw := want[cidr]
		switch {
		case !cidr.Addr().Is4():
			errs = append(errs, fmt.Errorf("vxlan: node %s's pod CIDR %s: only IPv4 pod CIDRs have tunnel ends", gw.Node, cidr))
			continue
		case cidr.Overlaps(own):
			errs = append(errs, fmt.Errorf("vxlan: node %s's pod CIDR %s overlaps this node's %s", gw.Node, cidr, own))
			continue
		}
		vtep, mac := vtepAddr(cidr), VTEPMAC(cidr).String()
		routes[cidr.Masked()] = route{Node: gw.Node, Via: vtep, Dev: VXLANDevice}
		neigh[vtep] = mac
		fdb[mac] = gw.Addr
		nodes[mac] = gw.Node
	}
	dev := []string{"dev", VXLANDevice}
	routeDels, routeAdds := routeSteps(have.routes, routes)
	steps := routeDels
	for _, a := range sortedKeys(have.neigh) {
		if _, ok := neigh[a]; !ok {
			steps = append(steps, step{args: append([]string{"ip", "neigh", "del", a.String()}, dev...), what: "remove the neighbor entry of " + a.String()})
		}
	}
	for _, mac := range slices.Sorted(maps.Keys(have.fdb)) {
		if _, ok := fdb[mac]; !ok {
			steps = append(steps, step{args: append([]string{"bridge", "fdb", "del", mac}, append(dev, "dst", have.fdb[mac].String(), "self")...), what: "remove the forwarding entry of " + mac})
		}
	}
	self := netip.PrefixFrom(vtepAddr(own), 32)
	for _, a := range have.addrs {
		if a != self {
			steps = append(steps, step{args: append([]string{"ip", "addr", "del", a.String()}, dev...), what: "remove the address " + a.String() + " of the vxlan device"})
		}
	}
	if !slices.Contains(have.addrs, self) {
		steps = append(steps, step{args: append([]string{"ip", "addr", "add", self.String()}, dev...), what: "give the vxlan device this node's tunnel end " + self.String()})
	}
	for _, mac := range slices.Sorted(maps.Keys(fdb)) {
		if h, ok := have.fdb[mac]; !ok || h != fdb[mac] {
			steps = append(steps, step{args: append([]string{"bridge", "fdb", "replace", mac}, append(dev, "dst", fdb[mac].String(), "self", "permanent")...),
				what: fmt.Sprintf("forwarding entry of node %s's tunnel end %s to %s", nodes[mac], mac, fdb[mac])})
		}
	}
	for _, a := range sortedKeys(neigh) {
		if have.neigh[a] != neigh[a] {
			steps = append(steps, step{args: append([]string{"ip", "neigh", "replace", a.String(), "lladdr", neigh[a]}, append(dev, "nud", "permanent")...),
				what: fmt.Sprintf("neighbor entry of node %s's tunnel end %s", nodes[neigh[a]], a)})
		}
	}
	return append(steps, routeAdds...), errors.Join(errs...)
}

// ipLink is a link as `ip -j -d addr show` gives it.
type ipLink struct {
	Name     string   `json:"ifname"`
	Flags    []string `json:"flags"`
	MTU      int      `json:"mtu"`
	Address  string   `json:"address"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
		Data struct {
			ID       int    `json:"id"`
			Local    string `json:"local"`
			Port     int    `json:"port"`
			Learning bool   `json:"learning"`
		} `json:"info_data"`
	} `json:"linkinfo"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// readLinks lists the host's links with their addresses and details.
func readLinks(ctx context.Context) ([]ipLink, error) {
	var links []ipLink
	if err := ipJSON(ctx, &links, "-d", "addr", "show"); err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	return links, nil
}

// findVXLAN is the device of links named VXLANDevice, or nil.
func findVXLAN(links []ipLink) *vxlanLink {
	for _, l := range links {
		if l.Name != VXLANDevice {
			continue
		}
		d := l.LinkInfo.Data
		local, _ := netip.ParseAddr(d.Local)
		return &vxlanLink{Kind: l.LinkInfo.Kind, VNI: d.ID, Port: d.Port, Local: local, Learning: d.Learning,
			MTU: l.MTU, MAC: l.Address, Up: slices.Contains(l.Flags, "UP")}
	}
	return nil
}

// readVXLANEntries reads what hangs on the VXLAN device of links.
func readVXLANEntries(ctx context.Context, links []ipLink) (vxlanEntries, error) {
	have := vxlanEntries{neigh: map[netip.Addr]string{}, fdb: map[string]netip.Addr{}}
	for _, l := range links {
		if l.Name != VXLANDevice {
			continue
		}
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil && a.Family == "inet" {
				have.addrs = append(have.addrs, netip.PrefixFrom(ip, a.PrefixLen))
			}
		}
	}
	var neigh []struct {
		Dst    string   `json:"dst"`
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if err := ipJSON(ctx, &neigh, "-4", "neigh", "show", "dev", VXLANDevice); err != nil {
		return have, fmt.Errorf("list neighbors: %w", err)
	}
	for _, n := range neigh {
		// Entries the kernel made itself (a lookup before the permanent
		// one was there) are replaced, never removed: they age out.
		if ip, err := netip.ParseAddr(n.Dst); err == nil && n.LLAddr != "" && slices.Contains(n.State, "PERMANENT") {
			have.neigh[ip] = n.LLAddr
		}
	}
	var fdb []struct {
		MAC string `json:"mac"`
		Dst string `json:"dst"`
	}
	if err := ipJSON(ctx, &fdb, "bridge", "fdb", "show", "dev", VXLANDevice); err != nil {
		return have, fmt.Errorf("list forwarding entries: %w", err)
	}
	for _, f := range fdb {
		if ip, err := netip.ParseAddr(f.Dst); err == nil {
			have.fdb[f.MAC] = ip
		}
	}
	routes, err := ownRoutes(ctx)
	if err != nil {
		return have, err
	}
	have.routes = routes
	return have, nil
}
