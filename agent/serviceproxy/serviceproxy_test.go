package serviceproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/internal/linuxns"
)

// requireReal skips without root and nft, unless OUTPOST_TEST_REAL=1
// (make test) says they must be there.
func requireReal(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "the service proxy needs root"
	} else if _, err := exec.LookPath("nft"); err != nil {
		why = "nft (Debian's nftables) is not installed"
	}
	if why == "" {
		return
	}
	if os.Getenv("OUTPOST_TEST_REAL") == "1" {
		t.Fatalf("OUTPOST_TEST_REAL=1 but %s", why)
	}
	t.Skip(why)
}

// node is a network namespace of the test's own standing for a node,
// with two endpoints' addresses on its lo, each served by a
// listener that answers with its name.
type node struct {
	t  *testing.T
	ns string
}

func newNode(t *testing.T) *node {
	t.Helper()
	requireReal(t)
	n := &node{t: t, ns: filepath.Join(t.TempDir(), "ns")}
	if err := linuxns.New(n.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = linuxns.Remove(n.ns) })
	n.run(func() error {
		for _, args := range [][]string{
			{"link", "set", "lo", "up"},
			{"addr", "add", "10.99.0.2/32", "dev", "lo"},
			{"addr", "add", "10.99.0.3/32", "dev", "lo"},
			// A node has a default route; cluster IPs are on no link.
			{"route", "add", "default", "dev", "lo"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("ip %v: %w: %s", args, err, out)
			}
		}
		return nil
	})
	for name, addr := range map[string]string{"a": "10.99.0.2:8080", "b": "10.99.0.3:8080"} {
		var ln net.Listener
		n.run(func() (err error) {
			ln, err = net.Listen("tcp", addr)
			return err
		})
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, name)
				c.Close()
			}
		}()
	}
	return n
}

func (n *node) run(f func() error) {
	n.t.Helper()
	if err := linuxns.Run(n.ns, f); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) apply(svcs []Service) {
	n.t.Helper()
	n.run(func() error { return Apply(context.Background(), svcs) })
}

// ask connects to addr from inside the node: the endpoint's name, or the
// error.
func (n *node) ask(addr string) (string, error) {
	var got string
	err := linuxns.Run(n.ns, func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

var (
	epA = Endpoint{Addr: netip.MustParseAddr("10.99.0.2"), Port: 8080}
	epB = Endpoint{Addr: netip.MustParseAddr("10.99.0.3"), Port: 8080}
)

// The proxy's rules through the real nft (SPEC NET-3): a cluster IP's
// connections spread over its endpoints; ClientIP affinity keeps a client
// on one; a node port on a local address reaches the endpoints; a Service
// without endpoints refuses at once; a change replaces the rules (an
// endpoint gone gets nothing more); Remove leaves no table.
func TestProxyRealNftables(t *testing.T) {
	n := newNode(t)
	svcs := []Service{
		{Namespace: "default", Name: "web", ClusterIP: netip.MustParseAddr("10.43.0.10"),
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080, Endpoints: []Endpoint{epA, epB}}}},
		{Namespace: "default", Name: "sticky", ClusterIP: netip.MustParseAddr("10.43.0.11"), AffinityTimeout: time.Minute,
			Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA, epB}}}},
		{Namespace: "default", Name: "empty", ClusterIP: netip.MustParseAddr("10.43.0.12"),
			Ports: []Port{{Protocol: "TCP", Port: 80}}},
		{Namespace: "default", Name: "headless", Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}},
	}
	n.apply(svcs)
	count := func(addr string, tries int) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for range tries {
			got, err := n.ask(addr)
			if err != nil {
				t.Fatalf("connect to %s: %v", addr, err)
			}
			seen[got]++
		}
		return seen
	}
	if seen := count("10.43.0.10:80", 30); seen["a"] == 0 || seen["b"] == 0 || len(seen) != 2 {
		t.Errorf("the cluster IP's connections went to %v, want both endpoints", seen)
	}
	if seen := count("10.43.0.11:80", 15); len(seen) != 1 {
		t.Errorf("with ClientIP affinity one client went to %v, want one endpoint", seen)
	}
	if seen := count("10.99.0.2:30080", 10); seen["a"]+seen["b"] != 10 {
		t.Errorf("the node port's connections went to %v", seen)
	}
	start := time.Now()
	_, err := n.ask("10.43.0.12:80")
	if err == nil || !strings.Contains(err.Error(), "refused") || time.Since(start) > time.Second {
		t.Errorf("a Service without endpoints: %v after %v, want refused at once", err, time.Since(start))
	}

	// web loses endpoint b.
	svcs[0].Ports[0].Endpoints = []Endpoint{epA}
	n.apply(svcs)
	if seen := count("10.43.0.10:80", 10); seen["a"] != 10 {
		t.Errorf("after b left: %v, want a only", seen)
	}

	var tables string
	n.run(func() error {
		if err := Remove(context.Background()); err != nil {
			return err
		}
		out, err := exec.Command("nft", "list", "tables").CombinedOutput()
		tables = string(out)
		return err
	})
	if strings.Contains(tables, Table) {
		t.Errorf("tables after Remove: %s", tables)
	}
}

// Ruleset leaves headless Services and IPv6 out, and names chains the
// same whatever the order Services come in.
func TestRuleset(t *testing.T) {
	a := Service{Namespace: "default", Name: "a", ClusterIP: netip.MustParseAddr("10.43.0.1"), Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}}
	b := Service{Namespace: "default", Name: "b", ClusterIP: netip.MustParseAddr("10.43.0.2"), Ports: []Port{{Protocol: "UDP", Port: 53, Endpoints: []Endpoint{epB}}}}
	six := Service{Namespace: "default", Name: "six", ClusterIP: netip.MustParseAddr("fd00::1"), Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}}
	headless := Service{Namespace: "default", Name: "h", Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}}
	r1, r2 := Ruleset([]Service{a, b, six, headless}), Ruleset([]Service{headless, six, b, a})
	if r1 != r2 {
		t.Error("the ruleset depends on the order of the Services")
	}
	for _, want := range []string{"10.43.0.1 . tcp . 80 : goto svc-", "10.43.0.2 . udp . 53 : goto svc-"} {
		if !strings.Contains(r1, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, r1)
		}
	}
	if strings.Contains(r1, "fd00::1") {
		t.Errorf("an IPv6 Service in the IPv4 table:\n%s", r1)
	}
}

// BenchmarkApply1000Services is a whole sync of a large node's rules
// (issue 14's target: 1,000 Services × 10 endpoints under 200 ms):
// Ruleset and nft replacing the table, in a namespace of its own.
func BenchmarkApply1000Services(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the service proxy needs root")
	}
	ns := filepath.Join(b.TempDir(), "ns")
	if err := linuxns.New(ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = linuxns.Remove(ns) })
	svcs := make([]Service, 1000)
	for i := range svcs {
		var eps []Endpoint
		for j := range 10 {
			eps = append(eps, Endpoint{Addr: netip.AddrFrom4([4]byte{10, 42, byte(i / 200), byte(j + 10*(i%20))}), Port: 8080})
		}
		svcs[i] = Service{Namespace: "default", Name: fmt.Sprintf("svc-%d", i), ClusterIP: netip.AddrFrom4([4]byte{10, 43, byte(i / 250), byte(1 + i%250)}),
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: uint16(30000 + i), Endpoints: eps}}}
	}
	for i := 0; b.Loop(); i++ {
		svcs[i%len(svcs)].Ports[0].Endpoints[0].Port = uint16(8000 + i%100) // a change each sync
		if err := linuxns.Run(ns, func() error { return Apply(context.Background(), svcs) }); err != nil {
			b.Fatal(err)
		}
	}
}
