package netns

import (
	"fmt"
	"os"
	"testing"
)

// Routed is test hosts each on a subnet of its own, joined by a router
// (a namespace of its own) as sites are: hosts reach each other and the
// test's side through it, and it routes nothing else (no default route),
// so a packet to an address it has no subnet for (a pod's, unwrapped) is
// dropped there. The test's side holds 10.215.0.254 on the router's
// uplink; host N is 10.215.N.2 behind the router's 10.215.N.1.
type Routed struct {
	router string
	// uplink is the test side's end of the router's uplink.
	uplink string
	// Gateway is the test side's address, where the hosts reach the
	// test's servers (through the router).
	Gateway string
}

// NewRouted makes the test's routed network; it is removed when the test
// ends. One test at a time on a machine has one.
func NewRouted(t testing.TB) *Routed {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprint(os.Getpid() % 100000)
	// A killed run's uplink (opx) and router (opy) go at the next claim;
	// its hosts' namespaces, cut off with the router, are left inert.
	if err := claimSubnet("routed", "the test's routed network", "10.215.0.0/16", "opx", "opy"); err != nil {
		t.Fatal(err)
	}
	r := &Routed{router: "opy" + tag, uplink: "opx" + tag, Gateway: "10.215.0.254"}
	t.Cleanup(func() {
		_ = run("ip", "netns", "del", r.router)
		_ = run("ip", "link", "del", r.uplink) // gone with the router's end
		release("routed")
	})
	inner := "opt" + tag
	for _, s := range [][]string{
		{"ip", "netns", "add", r.router},
		{"ip", "netns", "exec", r.router, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "-n", r.router, "link", "set", "lo", "up"},
		{"ip", "link", "add", r.uplink, "type", "veth", "peer", "name", inner},
		{"ip", "link", "set", inner, "netns", r.router},
		{"ip", "addr", "add", r.Gateway + "/24", "dev", r.uplink},
		{"ip", "link", "set", r.uplink, "up"},
		{"ip", "-n", r.router, "addr", "add", "10.215.0.1/24", "dev", inner},
		{"ip", "-n", r.router, "link", "set", inner, "up"},
		// The test's side reaches every host subnet through the router;
		// the route goes with the uplink.
		{"ip", "route", "add", "10.215.0.0/16", "via", "10.215.0.1", "dev", r.uplink},
	} {
		if err := run(s...); err != nil {
			t.Fatalf("make the test's routed network: %v", err)
		}
	}
	return r
}

// Host makes host n (1-250) behind the router, at 10.215.N.2 on a subnet
// of its own; it is removed when the test ends. Its link can be cut as a
// test host's.
func (r *Routed) Host(t testing.TB, n int) *Host {
	t.Helper()
	if n < 1 || n > 250 {
		t.Fatalf("netns: routed host number %d out of 1-250", n)
	}
	tag := fmt.Sprintf("%d%03d", os.Getpid()%100000, n)
	h := &Host{Name: "opw" + tag, Addr: fmt.Sprintf("10.215.%d.2", n), Gateway: fmt.Sprintf("10.215.%d.1", n), rootIf: "opu" + tag, linkNS: r.router}
	t.Cleanup(func() { _ = h.Close() })
	nsIf := "opv" + tag
	for _, s := range [][]string{
		{"ip", "netns", "add", h.Name},
		{"ip", "-n", h.Name, "link", "add", nsIf, "type", "veth", "peer", "name", h.rootIf, "netns", r.router},
		{"ip", "-n", r.router, "addr", "add", h.Gateway + "/24", "dev", h.rootIf},
		{"ip", "-n", r.router, "link", "set", h.rootIf, "up"},
		{"ip", "-n", h.Name, "addr", "add", h.Addr + "/24", "dev", nsIf},
		{"ip", "-n", h.Name, "link", "set", nsIf, "up"},
		{"ip", "-n", h.Name, "link", "set", "lo", "up"},
		{"ip", "-n", h.Name, "route", "add", "default", "via", h.Gateway},
	} {
		if err := run(s...); err != nil {
			t.Fatalf("make routed host %d: %v", n, err)
		}
	}
	return h
}
