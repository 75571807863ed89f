package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A host reaches the test side through its link, and not once it is cut.
func TestCutAndRestore(t *testing.T) {
	Require(t)
	h := New(t, 201)
	ln := closingListener(t, h.Gateway)
	dial := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		// bash's /dev/tcp dials from inside the namespace without any
		// tool beyond bash.
		return h.Command(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+h.Gateway+"/"+portOf(ln)).Run()
	}
	if err := dial(); err != nil {
		t.Fatalf("dial from the host before the cut: %v", err)
	}
	h.Cut(t)
	if err := dial(); err == nil {
		t.Fatal("the host still reached the test side after the cut")
	}
	h.Restore(t)
	// The link takes a moment to carry traffic again.
	deadline := time.Now().Add(10 * time.Second)
	for err := dial(); err != nil; err = dial() {
		if time.Now().After(deadline) {
			t.Fatalf("dial after restore: %v", err)
		}
	}
}

// closingListener listens on a port of addr until the test ends,
// closing every connection it accepts: a dial that connects reached it.
func closingListener(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return ln
}

func portOf(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// Open makes a host without a test, and Close removes all of it: the
// namespace and the test side's link; closing again is no error.
func TestOpenClose(t *testing.T) {
	Require(t)
	h, err := Open(202)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := run("ip", "netns", "exec", h.Name, "true"); err != nil {
		t.Fatalf("namespace %s missing after Open: %v", h.Name, err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := run("ip", "netns", "exec", h.Name, "true"); err == nil {
		t.Fatalf("namespace %s still there after Close", h.Name)
	}
	if err := run("ip", "link", "show", h.rootIf); err == nil {
		t.Fatalf("link %s still there after Close", h.rootIf)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := Open(0); err == nil {
		t.Fatal("Open(0) succeeded, want an error naming the range")
	}
}

// A run killed before its cleanup leaves its namespace, link and route:
// the next Open of that number takes them back instead of making a second
// link on the same subnet (whose traffic would go to the dead namespace).
func TestOpenTakesBackAStaleHost(t *testing.T) {
	Require(t)
	const n = 203
	stale := []string{"ip", "netns", "add", "op99999203"}
	if err := run(stale...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run("ip", "netns", "del", "op99999203"); _ = run("ip", "link", "del", "opr99999203") })
	for _, s := range [][]string{
		{"ip", "link", "add", "opr99999203", "type", "veth", "peer", "name", "opn99999203"},
		{"ip", "link", "set", "opn99999203", "netns", "op99999203"},
		{"ip", "addr", "add", "10.213.203.1/24", "dev", "opr99999203"},
		{"ip", "link", "set", "opr99999203", "up"},
	} {
		if err := run(s...); err != nil {
			t.Fatal(err)
		}
	}
	// Its owner: a process that is not running (PID 1 with a start time
	// PID 1 never had).
	if err := os.MkdirAll(ownersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ownerFile(strconv.Itoa(n)), []byte("1 999999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	h := New(t, n)
	if err := run("ip", "link", "show", "opr99999203"); err == nil {
		t.Fatal("the stale link is still there")
	}
	if err := run("ip", "netns", "exec", "op99999203", "true"); err == nil {
		t.Fatal("the stale namespace is still there")
	}
	out, err := exec.Command("ip", "-o", "route", "get", h.Addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev "+h.rootIf+" ") {
		t.Fatalf("the new host's address is not routed to its link %s: %s %v", h.rootIf, out, err)
	}
}

// Two hosts with one number at once would share a subnet: the second is
// refused, naming who holds it.
func TestOpenRefusesAHostInUse(t *testing.T) {
	Require(t)
	New(t, 204)
	h, err := Open(204)
	if err == nil {
		_ = h.Close()
		t.Fatal("a second host 204 was made while the first runs")
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("in use by process %d", os.Getpid())) {
		t.Fatalf("error %q does not name the process holding it", err)
	}
}

// Hosts of a LAN share one link: each reaches the other directly, not
// through the test's side, as machines on one switch.
func TestLAN(t *testing.T) {
	Require(t)
	l := NewLAN(t)
	a, b := l.Host(t, 1), l.Host(t, 2)
	out, err := exec.Command("ip", "-n", a.Name, "-o", "route", "get", b.Addr).CombinedOutput()
	if err != nil || strings.Contains(string(out), " via ") {
		t.Fatalf("host 1 to host 2: %s %v, want a route on the link", out, err)
	}
	out, err = exec.Command("ip", "-n", a.Name, "-o", "route", "get", "192.0.2.1").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "via "+l.Gateway) {
		t.Fatalf("host 1 to elsewhere: %s %v, want via the test's side %s", out, err, l.Gateway)
	}
}

// Routed hosts are on subnets of their own: each reaches the other and
// the test's side through the router, which routes nothing else; a
// routed host's link is cut and restored as any host's.
func TestRouted(t *testing.T) {
	Require(t)
	r := NewRouted(t)
	a, b := r.Host(t, 1), r.Host(t, 2)
	out, err := exec.Command("ip", "-n", a.Name, "-o", "route", "get", b.Addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "via "+a.Gateway) {
		t.Fatalf("host 1 to host 2: %s %v, want via the router %s", out, err, a.Gateway)
	}
	if out, err := exec.Command("ip", "-n", r.router, "-o", "route", "get", "10.42.2.5").CombinedOutput(); err == nil {
		t.Fatalf("the router routes an address of no subnet of its: %s", out)
	}
	ln := closingListener(t, r.Gateway)
	dial := func(h *Host, addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return h.Command(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(addr, ":", "/", 1)).Run()
	}
	for _, h := range []*Host{a, b} {
		if err := dial(h, ln.Addr().String()); err != nil {
			t.Fatalf("%s to the test's side: %v", h.Addr, err)
		}
	}
	// host 1 to a port of host 2's: refused (RST) is reached.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, _ = a.Command(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+b.Addr+"/9").CombinedOutput()
	if !strings.Contains(string(out), "Connection refused") {
		t.Fatalf("host 1 to host 2's closed port: %q, want it refused by host 2", out)
	}
	a.Cut(t)
	if err := dial(a, ln.Addr().String()); err == nil {
		t.Fatal("host 1 still reached the test side after the cut")
	}
	a.Restore(t)
	deadline := time.Now().Add(10 * time.Second)
	for err := dial(a, ln.Addr().String()); err != nil; err = dial(a, ln.Addr().String()) {
		if time.Now().After(deadline) {
			t.Fatalf("dial after restore: %v", err)
		}
	}
}
