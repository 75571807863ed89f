package netns

import (
	"fmt"
	"os"
	"testing"
)

// LAN is a link test hosts share, as machines on one switch do (routes
// to a node's pods via its address need the nodes on one link): a bridge
// on the test's side holding 10.214.0.254/24, its hosts 10.214.0.N.
type LAN struct {
	bridge string
	// Gateway is the test's side's address on the LAN, the hosts'
	// default route.
	Gateway string
}

// NewLAN makes the test's LAN; it is removed when the test ends. One
// test at a time on a machine has one.
func NewLAN(t testing.TB) *LAN {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	if err := claimSubnet("lan", "the test LAN", "10.214.0.0/24", "opl", ""); err != nil {
		t.Fatal(err)
	}
	l := &LAN{bridge: fmt.Sprintf("opl%d", os.Getpid()%100000), Gateway: "10.214.0.254"}
	t.Cleanup(func() {
		_ = run("ip", "link", "del", l.bridge)
		release("lan")
	})
	for _, s := range [][]string{
		{"ip", "link", "add", l.bridge, "type", "bridge"},
		{"ip", "addr", "add", l.Gateway + "/24", "dev", l.bridge},
		{"ip", "link", "set", l.bridge, "up"},
	} {
		if err := run(s...); err != nil {
			t.Fatalf("make the test LAN: %v", err)
		}
	}
	return l
}

// Host makes host n (1-250) of the LAN, at 10.214.0.N; it is removed
// when the test ends.
func (l *LAN) Host(t testing.TB, n int) *Host {
	t.Helper()
	if n < 1 || n > 250 {
		t.Fatalf("netns: LAN host number %d out of 1-250", n)
	}
	tag := fmt.Sprintf("%d%d", os.Getpid()%100000, 250+n)
	h := &Host{Name: "opm" + tag, Addr: fmt.Sprintf("10.214.0.%d", n), Gateway: l.Gateway, rootIf: "opq" + tag}
	t.Cleanup(func() { _ = h.Close() })
	nsIf := "opk" + tag
	for _, s := range [][]string{
		{"ip", "netns", "add", h.Name},
		{"ip", "link", "add", h.rootIf, "type", "veth", "peer", "name", nsIf},
		{"ip", "link", "set", nsIf, "netns", h.Name},
		{"ip", "link", "set", h.rootIf, "master", l.bridge},
		{"ip", "link", "set", h.rootIf, "up"},
		{"ip", "-n", h.Name, "addr", "add", h.Addr + "/24", "dev", nsIf},
		{"ip", "-n", h.Name, "link", "set", nsIf, "up"},
		{"ip", "-n", h.Name, "link", "set", "lo", "up"},
		{"ip", "-n", h.Name, "route", "add", "default", "via", h.Gateway},
	} {
		if err := run(s...); err != nil {
			t.Fatalf("make LAN host %d: %v", n, err)
		}
	}
	return h
}
