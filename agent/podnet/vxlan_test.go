package podnet

import (
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/internal/linuxns"
)

// Each node's tunnel end has a MAC of its own, made from its pod CIDR
// alone, so nodes need not publish it.
func TestVTEPMAC(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.42.1.0/24":    "0a:58:0a:2a:01:00",
		"10.42.1.77/24":   "0a:58:0a:2a:01:00", // a CIDR not in canonical form is its network's
		"10.42.255.0/24":  "0a:58:0a:2a:ff:00",
		"192.168.16.0/20": "0a:58:c0:a8:10:00",
	} {
		if got := VTEPMAC(netip.MustParsePrefix(cidr)).String(); got != want {
			t.Errorf("VTEPMAC(%s) = %s, want %s", cidr, got, want)
		}
	}
	if o := vxlanOverhead(netip.MustParseAddr("10.0.0.1")); o != 50 {
		t.Errorf("overhead over IPv4 = %d, want 50", o)
	}
	if o := vxlanOverhead(netip.MustParseAddr("fd00::1")); o != 70 {
		t.Errorf("overhead over IPv6 = %d, want 70", o)
	}
}

// commands renders steps as the command lines they run.
func commands(steps []step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, strings.Join(s.args, " "))
	}
	return out
}

func TestLinkSteps(t *testing.T) {
	want := vxlanLink{Kind: "vxlan", VNI: 1, Port: 8472, Local: netip.MustParseAddr("10.0.1.5"), MTU: 1450, MAC: "0a:58:0a:2a:01:00", Up: true}
	add := []string{
		"ip link add outpost.vxlan address 0a:58:0a:2a:01:00 mtu 1450 type vxlan id 1 local 10.0.1.5 dstport 8472 nolearning",
		"ip link set outpost.vxlan up",
	}
	remake := append([]string{"ip link del outpost.vxlan"}, add...)
	with := func(f func(l *vxlanLink)) *vxlanLink { l := want; f(&l); return &l }
	for _, c := range []struct {
		name string
		have *vxlanLink
		want []string
	}{
		{"none", nil, add},
		{"as wanted", with(func(*vxlanLink) {}), nil},
		{"down", with(func(l *vxlanLink) { l.Up = false }), []string{"ip link set outpost.vxlan up"}},
		{"the link's MTU changed", with(func(l *vxlanLink) { l.MTU = 8950 }), []string{"ip link set outpost.vxlan mtu 1450"}},
		{"another pod CIDR", with(func(l *vxlanLink) { l.MAC = "0a:58:0a:2a:07:00" }), []string{"ip link set outpost.vxlan address 0a:58:0a:2a:01:00"}},
		{"another InternalIP", with(func(l *vxlanLink) { l.Local = netip.MustParseAddr("10.0.1.6") }), remake},
		{"another VNI", with(func(l *vxlanLink) { l.VNI = 2 }), remake},
		{"another port", with(func(l *vxlanLink) { l.Port = 4789 }), remake},
		{"learning", with(func(l *vxlanLink) { l.Learning = true }), remake},
		{"not a vxlan device", &vxlanLink{Kind: "bridge"}, remake},
	} {
		if got := commands(linkSteps(c.have, want)); !slices.Equal(got, c.want) {
			t.Errorf("%s: steps\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

// The entries on the device follow the nodes: all of a new node's, none
// of one that left, only what changed of one that changed, nothing when
// all is as wanted; routes of host-gw become the overlay's.
func TestEntrySteps(t *testing.T) {
	own := netip.MustParsePrefix("10.42.1.0/24")
	p2, p3 := netip.MustParsePrefix("10.42.2.0/24"), netip.MustParsePrefix("10.42.3.0/24")
	n2 := Gateway{Node: "edge-2", Addr: netip.MustParseAddr("10.0.2.5")}
	n3 := Gateway{Node: "edge-3", Addr: netip.MustParseAddr("10.0.3.5")}
	both := map[netip.Prefix]Gateway{p2: n2, p3: n3}
	// set is what the host has once both nodes' entries are made.
	set := vxlanEntries{
		addrs: []netip.Prefix{netip.MustParsePrefix("10.42.1.0/32")},
		neigh: map[netip.Addr]string{netip.MustParseAddr("10.42.2.0"): "0a:58:0a:2a:02:00", netip.MustParseAddr("10.42.3.0"): "0a:58:0a:2a:03:00"},
		fdb:   map[string]netip.Addr{"0a:58:0a:2a:02:00": n2.Addr, "0a:58:0a:2a:03:00": n3.Addr},
		routes: map[netip.Prefix]route{
			p2: {Via: netip.MustParseAddr("10.42.2.0"), Dev: VXLANDevice},
			p3: {Via: netip.MustParseAddr("10.42.3.0"), Dev: VXLANDevice},
		},
	}
	edit := func(f func(e *vxlanEntries)) vxlanEntries {
		e := vxlanEntries{addrs: slices.Clone(set.addrs), neigh: map[netip.Addr]string{}, fdb: map[string]netip.Addr{}, routes: map[netip.Prefix]route{}}
		for k, v := range set.neigh {
			e.neigh[k] = v
		}
		for k, v := range set.fdb {
			e.fdb[k] = v
		}
		for k, v := range set.routes {
			e.routes[k] = v
		}
		f(&e)
		return e
	}
	for _, c := range []struct {
		name string
		have vxlanEntries
		want map[netip.Prefix]Gateway
		cmds []string
	}{
		{"a new device", vxlanEntries{}, both, []string{
			"ip addr add 10.42.1.0/32 dev outpost.vxlan",
			"bridge fdb replace 0a:58:0a:2a:02:00 dev outpost.vxlan dst 10.0.2.5 self permanent",
			"bridge fdb replace 0a:58:0a:2a:03:00 dev outpost.vxlan dst 10.0.3.5 self permanent",
			"ip neigh replace 10.42.2.0 lladdr 0a:58:0a:2a:02:00 dev outpost.vxlan nud permanent",
			"ip neigh replace 10.42.3.0 lladdr 0a:58:0a:2a:03:00 dev outpost.vxlan nud permanent",
			"ip route replace 10.42.2.0/24 via 10.42.2.0 dev outpost.vxlan onlink proto 79",
			"ip route replace 10.42.3.0/24 via 10.42.3.0 dev outpost.vxlan onlink proto 79",
		}},
		{"as wanted", set, both, nil},
		{"a node left", set, map[netip.Prefix]Gateway{p2: n2}, []string{
			"ip route del 10.42.3.0/24 proto 79",
			"ip neigh del 10.42.3.0 dev outpost.vxlan",
			"bridge fdb del 0a:58:0a:2a:03:00 dev outpost.vxlan dst 10.0.3.5 self",
		}},
		{"a node's new address", set, map[netip.Prefix]Gateway{p2: n2, p3: {Node: "edge-3", Addr: netip.MustParseAddr("10.0.3.6")}}, []string{
			"bridge fdb replace 0a:58:0a:2a:03:00 dev outpost.vxlan dst 10.0.3.6 self permanent",
		}},
		{"a node's new pod CIDR", set, map[netip.Prefix]Gateway{p2: n2, netip.MustParsePrefix("10.42.9.0/24"): n3}, []string{
			"ip route del 10.42.3.0/24 proto 79",
			"ip neigh del 10.42.3.0 dev outpost.vxlan",
			"bridge fdb del 0a:58:0a:2a:03:00 dev outpost.vxlan dst 10.0.3.5 self",
			"bridge fdb replace 0a:58:0a:2a:09:00 dev outpost.vxlan dst 10.0.3.5 self permanent",
			"ip neigh replace 10.42.9.0 lladdr 0a:58:0a:2a:09:00 dev outpost.vxlan nud permanent",
			"ip route replace 10.42.9.0/24 via 10.42.9.0 dev outpost.vxlan onlink proto 79",
		}},
		{"this node's new pod CIDR", edit(func(e *vxlanEntries) { e.addrs = []netip.Prefix{netip.MustParsePrefix("10.42.7.0/32")} }), both, []string{
			"ip addr del 10.42.7.0/32 dev outpost.vxlan",
			"ip addr add 10.42.1.0/32 dev outpost.vxlan",
		}},
		{"host-gw's routes of before", edit(func(e *vxlanEntries) {
			e.routes[p2] = route{Via: n2.Addr, Dev: "eth0"}
			e.routes[p3] = route{Via: netip.MustParseAddr("10.42.3.0"), Dev: "eth0"}
		}), both, []string{
			"ip route replace 10.42.2.0/24 via 10.42.2.0 dev outpost.vxlan onlink proto 79",
			"ip route replace 10.42.3.0/24 via 10.42.3.0 dev outpost.vxlan onlink proto 79",
		}},
		{"a neighbor entry gone", edit(func(e *vxlanEntries) { delete(e.neigh, netip.MustParseAddr("10.42.2.0")) }), both, []string{
			"ip neigh replace 10.42.2.0 lladdr 0a:58:0a:2a:02:00 dev outpost.vxlan nud permanent",
		}},
	} {
		steps, err := entrySteps(c.have, own, c.want)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if got := commands(steps); !slices.Equal(got, c.cmds) {
			t.Errorf("%s: steps\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.cmds, "\n"))
		}
	}

	// A node without a tunnel end is named in the error; the others'
	// entries are made all the same.
	steps, err := entrySteps(set, own, map[netip.Prefix]Gateway{
		p2: n2, p3: n3,
		netip.MustParsePrefix("fd00:42::/64"): {Node: "v6", Addr: netip.MustParseAddr("fd00::5")},
		netip.MustParsePrefix("10.42.1.0/25"): {Node: "twin", Addr: netip.MustParseAddr("10.0.9.5")},
	})
	if len(steps) != 0 || err == nil || !strings.Contains(err.Error(), "node v6's") || !strings.Contains(err.Error(), "node twin's") {
		t.Errorf("unusable nodes: steps %q, err %v", commands(steps), err)
	}
}

// host-gw's routes go via the node's address on whatever link has it; a
// route of the overlay's is replaced.
func TestRouteStepsHostGW(t *testing.T) {
	p2, p3 := netip.MustParsePrefix("10.42.2.0/24"), netip.MustParsePrefix("10.42.3.0/24")
	have := map[netip.Prefix]route{
		p2: {Via: netip.MustParseAddr("10.0.0.2"), Dev: "eth0"},
		p3: {Via: netip.MustParseAddr("10.42.3.0"), Dev: VXLANDevice},
	}
	want := map[netip.Prefix]route{
		p2: {Node: "edge-2", Via: netip.MustParseAddr("10.0.0.2")},
		p3: {Node: "edge-3", Via: netip.MustParseAddr("10.0.0.3")},
	}
	dels, adds := routeSteps(have, want)
	if got := commands(append(dels, adds...)); !slices.Equal(got, []string{"ip route replace 10.42.3.0/24 via 10.0.0.3 proto 79"}) {
		t.Errorf("steps %q", got)
	}
	dels, adds = routeSteps(have, nil)
	if got := commands(append(dels, adds...)); !slices.Equal(got, []string{"ip route del 10.42.2.0/24 proto 79", "ip route del 10.42.3.0/24 proto 79"}) {
		t.Errorf("no node left: steps %q", got)
	}
}

// SyncVXLAN on the real kernel, in a namespace of the test's own: the
// device and every node's entries are made; run again it finds nothing
// to do; a node that left takes its entries, a node with a new address
// has its forwarding entry moved; and host-gw, switched to, removes the
// device.
func TestSyncVXLANReal(t *testing.T) {
	requireReal(t)
	ns := filepath.Join(t.TempDir(), "ns")
	if err := linuxns.New(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = linuxns.Remove(ns) })
	in := func(f func() error) {
		t.Helper()
		if err := linuxns.Run(ns, f); err != nil {
			t.Fatal(err)
		}
	}
	sh := func(args ...string) string {
		t.Helper()
		var out []byte
		in(func() (err error) {
			out, err = exec.Command(args[0], args[1:]...).CombinedOutput()
			return err
		})
		return string(out)
	}
	// The node's link, which holds its InternalIP.
	sh("ip", "link", "add", "up0", "mtu", "9000", "type", "veth", "peer", "name", "up1")
	sh("ip", "addr", "add", "10.0.1.5/24", "dev", "up0")
	sh("ip", "link", "set", "up0", "up")
	local := netip.MustParseAddr("10.0.1.5")
	own := netip.MustParsePrefix("10.42.1.0/24")
	p2, p3 := netip.MustParsePrefix("10.42.2.0/24"), netip.MustParsePrefix("10.42.3.0/24")
	want := map[netip.Prefix]Gateway{
		p2: {Node: "edge-2", Addr: netip.MustParseAddr("10.0.2.5")},
		p3: {Node: "edge-3", Addr: netip.MustParseAddr("10.0.3.5")},
	}
	in(func() error { return SyncVXLAN(t.Context(), local, own, want) })

	link := sh("ip", "-d", "link", "show", VXLANDevice)
	for _, w := range []string{"mtu 8950", "0a:58:0a:2a:01:00", "vxlan id 1 local 10.0.1.5", "dstport 8472", "nolearning", ",UP,"} {
		if !strings.Contains(link, w) {
			t.Errorf("the device lacks %q:\n%s", w, link)
		}
	}
	if a := sh("ip", "addr", "show", "dev", VXLANDevice); !strings.Contains(a, "inet 10.42.1.0/32") {
		t.Errorf("the device's addresses lack this node's tunnel end:\n%s", a)
	}
	entries := func() string {
		return sh("ip", "route", "show", "proto", "79") + sh("ip", "neigh", "show", "dev", VXLANDevice) + sh("bridge", "fdb", "show", "dev", VXLANDevice)
	}
	e := entries()
	for _, w := range []string{
		"10.42.2.0/24 via 10.42.2.0 dev outpost.vxlan onlink", "10.42.3.0/24 via 10.42.3.0 dev outpost.vxlan onlink",
		"10.42.2.0 lladdr 0a:58:0a:2a:02:00 PERMANENT", "10.42.3.0 lladdr 0a:58:0a:2a:03:00 PERMANENT",
		"0a:58:0a:2a:02:00 dst 10.0.2.5 self permanent", "0a:58:0a:2a:03:00 dst 10.0.3.5 self permanent",
	} {
		if !strings.Contains(e, w) {
			t.Errorf("entries lack %q:\n%s", w, e)
		}
	}
	// The MTU of pods' links is the device's.
	in(func() error {
		mtu, err := VXLANMTU(t.Context(), local)
		if mtu != 8950 {
			t.Errorf("VXLANMTU = %d, %v; want 8950", mtu, err)
		}
		return nil
	})

	// Run again: nothing to do.
	in(func() error {
		links, err := readLinks(t.Context())
		if err != nil {
			return err
		}
		mtu, _ := vxlanMTU(links, local)
		if s := linkSteps(findVXLAN(links), vxlanLink{VNI: 1, Port: 8472, Local: local, MTU: mtu, MAC: VTEPMAC(own).String(), Up: true}); len(s) > 0 {
			t.Errorf("the device as made wants steps %q", commands(s))
		}
		have, err := readVXLANEntries(t.Context(), links)
		if err != nil {
			return err
		}
		if s, _ := entrySteps(have, own, want); len(s) > 0 {
			t.Errorf("the entries as made want steps %q", commands(s))
		}
		return nil
	})

	// edge-3 left; edge-2 has another address.
	want = map[netip.Prefix]Gateway{p2: {Node: "edge-2", Addr: netip.MustParseAddr("10.0.2.6")}}
	in(func() error { return SyncVXLAN(t.Context(), local, own, want) })
	e = entries()
	if strings.Contains(e, "10.42.3.0") || strings.Contains(e, "0a:58:0a:2a:03:00") {
		t.Errorf("edge-3's entries outlived it:\n%s", e)
	}
	if !strings.Contains(e, "0a:58:0a:2a:02:00 dst 10.0.2.6 self permanent") || strings.Contains(e, "10.0.2.5") {
		t.Errorf("edge-2's forwarding entry not moved to its new address:\n%s", e)
	}

	// Switched to host-gw: the device goes, the route is host-gw's.
	sh("ip", "addr", "add", "10.0.2.6/24", "dev", "up0")
	in(func() error { return SyncRoutes(t.Context(), want) })
	if l := sh("ip", "link", "show"); strings.Contains(l, VXLANDevice) {
		t.Errorf("the vxlan device outlived host-gw:\n%s", l)
	}
	if r := sh("ip", "route", "show", "proto", "79"); !strings.Contains(r, "10.42.2.0/24 via 10.0.2.6 dev up0") {
		t.Errorf("host-gw's routes: %q", r)
	}
}
