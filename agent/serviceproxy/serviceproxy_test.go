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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/internal/realtest"

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
	if why != "" {
		realtest.Require(t, why)
	}
}

// node is a network namespace of the test's own standing for a node,
// with two endpoints' addresses on its lo, each served by a
// listener that answers with its name.
type node struct {
	t  *testing.T
	ns string
}

// newNS is a network namespace of the test's own, so that nothing it
// does touches the host's table.
func newNS(tb testing.TB) string {
	tb.Helper()
	ns := filepath.Join(tb.TempDir(), "ns")
	if err := linuxns.New(ns); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = linuxns.Remove(ns) })
	return ns
}

func newNode(t *testing.T) *node {
	t.Helper()
	requireReal(t)
	n := &node{t: t, ns: newNS(t)}
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

// sampleServices are one Service of each kind: web with a node port,
// sticky with ClientIP affinity, empty without endpoints.
func sampleServices() []Service {
	return []Service{
		{Namespace: "default", Name: "web", ClusterIP: netip.MustParseAddr("10.43.0.10"),
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080, Endpoints: []Endpoint{epA, epB}}}},
		{Namespace: "default", Name: "sticky", ClusterIP: netip.MustParseAddr("10.43.0.11"), AffinityTimeout: time.Minute,
			Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA, epB}}}},
		{Namespace: "default", Name: "empty", ClusterIP: netip.MustParseAddr("10.43.0.12"),
			Ports: []Port{{Protocol: "TCP", Port: 80, NodePort: 30082}}},
	}
}

// The proxy's rules through the real nft (SPEC NET-3): a cluster IP's
// connections spread over its endpoints; ClientIP affinity keeps a client
// on one; a node port on a local address reaches the endpoints; a Service
// without endpoints refuses at once; a change replaces the rules (an
// endpoint gone gets nothing more); Remove leaves no table.
func TestProxyRealNftables(t *testing.T) {
	n := newNode(t)
	svcs := append(sampleServices(),
		Service{Namespace: "default", Name: "headless", Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}})
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

// table is the proxy's table in the node as nft lists it, normalized.
func (n *node) table() string {
	n.t.Helper()
	var out []byte
	n.run(func() (err error) {
		out, err = exec.Command("nft", "list", "table", "ip", Table).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list table: %w: %s", err, out)
		}
		return nil
	})
	return normalized(string(out))
}

// normalized is an nft listing of one table without what depends on the
// order things were added in: its sets and chains are sorted by their
// first line, and each set's elements sorted. Rules keep their order.
func normalized(listing string) string {
	var objs, cur []string
	lines := strings.Split(listing, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case cur == nil:
			if strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "\t\t") && strings.HasSuffix(l, "{") {
				cur = []string{l}
			}
		case l == "\t}":
			objs = append(objs, strings.Join(append(cur, l), "\n"))
			cur = nil
		case strings.HasPrefix(strings.TrimSpace(l), "elements = {"):
			// nft breaks long lists of elements over lines.
			text := strings.TrimSpace(l)
			for !strings.HasSuffix(text, "}") && i+1 < len(lines) {
				i++
				text += " " + strings.TrimSpace(lines[i])
			}
			elems := strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, "elements = {"), "}"), ",")
			for j := range elems {
				elems[j] = strings.TrimSpace(elems[j])
			}
			slices.Sort(elems)
			cur = append(cur, "\t\telements = { "+strings.Join(elems, ", ")+" }")
		default:
			cur = append(cur, l)
		}
	}
	slices.Sort(objs)
	return strings.Join(objs, "\n")
}

// lineDiff is the lines only one of got and want has, for a failure's
// message.
func lineDiff(got, want string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var b strings.Builder
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	return b.String()
}

// recordingProxy is a Proxy that writes through nft, keeps the scripts
// it wrote and logs those refused, and never writes whole for the time
// passed.
func recordingProxy(tb testing.TB, scripts *[]string) *Proxy {
	p := &Proxy{FullSyncPeriod: 24 * time.Hour}
	p.run = func(ctx context.Context, script string) error {
		*scripts = append(*scripts, script)
		err := apply(ctx, script)
		if err != nil {
			tb.Logf("refused:\n%s\n%v", script, err)
		}
		return err
	}
	return p
}

func isWhole(script string) bool {
	return strings.Contains(script, "delete table ip "+Table)
}

// A Proxy's updates leave the table as writing it whole does (SPEC NET-3,
// issue 14), through a sequence of the changes a cluster makes, each one
// update nft takes (none refused and followed by a whole write): in
// particular the removal of chains that map elements and rules jumped
// to, which nftables refuses before the references are gone.
func TestProxyUpdatesAsWhole(t *testing.T) {
	requireReal(t)
	updated, whole := newNode(t), &node{t: t, ns: newNS(t)}
	var scripts []string
	p := recordingProxy(t, &scripts)
	epC := Endpoint{Addr: netip.MustParseAddr("10.99.0.4"), Port: 9090}
	svcs := sampleServices()
	find := func(name string) *Service {
		for i := range svcs {
			if svcs[i].Name == name {
				return &svcs[i]
			}
		}
		t.Fatalf("no Service %s", name)
		return nil
	}
	steps := []struct {
		name   string
		change func()
	}{
		{"first", func() {}},
		{"nothing changed", func() {}},
		{"a Service added", func() {
			svcs = append(svcs, Service{Namespace: "kube-system", Name: "dns", ClusterIP: netip.MustParseAddr("10.43.0.53"),
				Ports: []Port{{Name: "dns", Protocol: "UDP", Port: 53, Endpoints: []Endpoint{epC}}}})
		}},
		{"an endpoint added", func() { find("dns").Ports[0].Endpoints = []Endpoint{epA, epC} }},
		{"an endpoint removed", func() { find("web").Ports[0].Endpoints = []Endpoint{epA} }},
		{"an endpoint's port changed", func() { find("web").Ports[0].Endpoints = []Endpoint{{Addr: epA.Addr, Port: 8081}} }},
		{"an affinity endpoint added", func() { find("sticky").Ports[0].Endpoints = []Endpoint{epA, epB, epC} }},
		{"an affinity endpoint removed", func() { find("sticky").Ports[0].Endpoints = []Endpoint{epB, epC} }},
		{"affinity timeout changed", func() { find("sticky").AffinityTimeout = 2 * time.Minute }},
		{"affinity on", func() { find("web").AffinityTimeout = time.Hour }},
		{"affinity off", func() { find("sticky").AffinityTimeout = 0 }},
		{"a node port added", func() { find("dns").Ports[0].NodePort = 30053 }},
		{"a node port removed", func() { find("web").Ports[0].NodePort = 0 }},
		{"a node port moved", func() { find("dns").Ports[0].NodePort = 30054 }},
		{"no endpoints left", func() { find("web").Ports[0].Endpoints = nil }},
		{"endpoints back", func() { find("web").Ports[0].Endpoints = []Endpoint{epA, epB} }},
		{"endpoints for the empty one", func() { find("empty").Ports[0].Endpoints = []Endpoint{epC} }},
		{"a port added", func() {
			s := find("web")
			s.Ports = append(s.Ports, Port{Name: "https", Protocol: "TCP", Port: 443, NodePort: 30443, Endpoints: []Endpoint{epB}})
		}},
		{"a port removed", func() { s := find("web"); s.Ports = s.Ports[1:] }},
		{"a port renamed (its chain too)", func() { find("dns").Ports[0].Name = "domain" }},
		{"cluster IP changed", func() { find("dns").ClusterIP = netip.MustParseAddr("10.43.0.54") }},
		{"a Service removed", func() {
			svcs = slices.DeleteFunc(svcs, func(s Service) bool { return s.Name == "sticky" })
		}},
		{"all removed", func() { svcs = nil }},
		{"all back", func() {
			svcs = []Service{{Namespace: "default", Name: "web", ClusterIP: netip.MustParseAddr("10.43.0.10"), AffinityTimeout: time.Minute,
				Ports: []Port{{Protocol: "TCP", Port: 80, NodePort: 30080, Endpoints: []Endpoint{epA, epB}}}}}
		}},
	}
	for i, step := range steps {
		step.change()
		scripts = nil
		updated.run(func() error { return p.Sync(context.Background(), svcs) })
		switch {
		case i == 0:
			if len(scripts) != 1 || !isWhole(scripts[0]) {
				t.Fatalf("%s: the first Sync wrote %q, want the table whole", step.name, scripts)
			}
		case step.name == "nothing changed":
			if len(scripts) != 0 {
				t.Errorf("%s: Sync wrote %q", step.name, scripts)
			}
		case len(scripts) != 1 || isWhole(scripts[0]):
			t.Fatalf("%s: Sync wrote %d scripts, want one update", step.name, len(scripts))
		}
		whole.apply(svcs)
		if got, want := updated.table(), whole.table(); got != want {
			t.Fatalf("%s: the updated table differs from the whole one (+ updated only, - whole only):\n%s\nthe update:\n%s", step.name, lineDiff(got, want), strings.Join(scripts, "\n"))
		}
	}
	// The updated rules carry connections too.
	for _, addr := range []string{"10.43.0.10:80", "10.99.0.2:30080"} {
		if got, err := updated.ask(addr); err != nil || (got != "a" && got != "b") {
			t.Errorf("%s after the updates: %q, %v", addr, got, err)
		}
	}
}

// A Proxy whose table someone deleted, so that its update is refused,
// writes the table whole in the same Sync. (A change its update does not
// run into stays until the next whole write: TestProxyWhenWhole.)
func TestProxyRecoversAlteredTable(t *testing.T) {
	n := newNode(t)
	var scripts []string
	p := recordingProxy(t, &scripts)
	svcs := []Service{{Namespace: "default", Name: "web", ClusterIP: netip.MustParseAddr("10.43.0.10"),
		Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}}}
	sync := func() {
		t.Helper()
		n.run(func() error { return p.Sync(context.Background(), svcs) })
	}
	for _, alter := range [][]string{
		{"delete", "table", "ip", Table},
		{"flush", "ruleset"}, // as a firewall's reload does
	} {
		sync()
		n.run(func() error {
			if out, err := exec.Command("nft", alter...).CombinedOutput(); err != nil {
				return fmt.Errorf("nft %v: %w: %s", alter, err, out)
			}
			return nil
		})
		svcs[0].Ports[0].Endpoints = []Endpoint{epB}
		scripts = nil
		sync()
		if len(scripts) != 2 || isWhole(scripts[0]) || !isWhole(scripts[1]) {
			t.Fatalf("after nft %v Sync wrote %q, want an update refused, then the table whole", alter, scripts)
		}
		if got, err := n.ask("10.43.0.10:80"); err != nil || got != "b" {
			t.Errorf("after nft %v and a Sync: %q, %v, want b", alter, got, err)
		}
		svcs[0].Ports[0].Endpoints = []Endpoint{epA}
	}
}

// When a Proxy writes the table whole and when it only updates it; nft
// is not run.
func TestProxyWhenWhole(t *testing.T) {
	var scripts []string
	var refuse bool
	clock := time.Unix(1e9, 0)
	p := &Proxy{FullSyncPeriod: time.Minute, now: func() time.Time { return clock }}
	p.run = func(_ context.Context, script string) error {
		scripts = append(scripts, script)
		if refuse {
			return fmt.Errorf("refused")
		}
		return nil
	}
	svc := Service{Namespace: "default", Name: "web", ClusterIP: netip.MustParseAddr("10.43.0.10"),
		Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epA}}}}
	other := svc
	other.Ports = []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{epB}}}
	for _, step := range []struct {
		name   string
		before func()
		svcs   []Service
		want   string // one letter a script: w(hole) or u(pdate)
		err    bool
	}{
		{name: "first", svcs: []Service{svc}, want: "w"},
		{name: "the same", svcs: []Service{svc}, want: ""},
		{name: "changed", svcs: []Service{other}, want: "u"},
		{name: "the period nearly over", before: func() { clock = clock.Add(59 * time.Second) }, svcs: []Service{svc}, want: "u"},
		{name: "the period over", before: func() { clock = clock.Add(time.Second) }, svcs: []Service{svc}, want: "w"},
		{name: "after Reset", before: p.Reset, svcs: []Service{svc}, want: "w"},
		{name: "an update refused", before: func() { refuse = true }, svcs: []Service{other}, want: "uw", err: true},
		{name: "after a failure", before: func() { refuse = false }, svcs: []Service{other}, want: "w"},
	} {
		if step.before != nil {
			step.before()
		}
		scripts = nil
		err := p.Sync(context.Background(), step.svcs)
		var got strings.Builder
		for _, s := range scripts {
			if isWhole(s) {
				got.WriteString("w")
			} else {
				got.WriteString("u")
			}
		}
		if got.String() != step.want || (err != nil) != step.err {
			t.Errorf("%s: wrote %q, error %v; want %q, error %v", step.name, got.String(), err, step.want, step.err)
		}
	}
}

// An update removing a Service port deletes the map elements that jump to
// its chain before the chain, and the chain's rules before the map they
// use: nftables refuses the other order within one transaction.
func TestDiffOrder(t *testing.T) {
	withWeb := build([]Service{{Namespace: "default", Name: "web", ClusterIP: netip.MustParseAddr("10.43.0.10"),
		Ports: []Port{{Protocol: "TCP", Port: 80, NodePort: 30080, Endpoints: []Endpoint{epA}}}}}, nil)
	script := diff(withWeb, build(nil, nil))
	var at []int
	for _, stmt := range []string{"delete element ip " + Table + " " + serviceIPs, "delete element ip " + Table + " " + serviceNodePorts, "flush chain", "delete chain", "delete map"} {
		i := strings.Index(script, stmt)
		if i < 0 {
			t.Fatalf("the update lacks %q:\n%s", stmt, script)
		}
		at = append(at, i)
	}
	if !slices.IsSorted(at) {
		t.Errorf("the update's statements are out of order:\n%s", script)
	}
	if s := diff(withWeb, withWeb); s != "" {
		t.Errorf("an update of nothing: %q", s)
	}
}

// benchServices is a large node's Services: 1,000 NodePort Services with
// 10 endpoints each.
func benchServices() []Service {
	svcs := make([]Service, 1000)
	for i := range svcs {
		var eps []Endpoint
		for j := range 10 {
			eps = append(eps, Endpoint{Addr: netip.AddrFrom4([4]byte{10, 42, byte(i / 200), byte(j + 10*(i%20))}), Port: 8080})
		}
		svcs[i] = Service{Namespace: "default", Name: fmt.Sprintf("svc-%d", i), ClusterIP: netip.AddrFrom4([4]byte{10, 43, byte(i / 250), byte(1 + i%250)}),
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: uint16(30000 + i), Endpoints: eps}}}
	}
	return svcs
}

// BenchmarkApply1000Services is a whole sync of a large node's rules
// (issue 14's target: 1,000 Services × 10 endpoints under 200 ms):
// Ruleset and nft replacing the table, in a namespace of its own.
func BenchmarkApply1000Services(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the service proxy needs root")
	}
	ns := newNS(b)
	svcs := benchServices()
	for i := 0; b.Loop(); i++ {
		svcs[i%len(svcs)].Ports[0].Endpoints[0].Port = uint16(8000 + i%100) // a change each sync
		if err := linuxns.Run(ns, func() error { return Apply(context.Background(), svcs) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncOneEndpointChange1000Services is the usual sync of a large
// node: one endpoint of one of its 1,000 Services changed, and a Proxy
// updating the table.
func BenchmarkSyncOneEndpointChange1000Services(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the service proxy needs root")
	}
	ns := newNS(b)
	svcs := benchServices()
	var scripts []string
	p := recordingProxy(b, &scripts)
	sync := func() {
		if err := linuxns.Run(ns, func() error { return p.Sync(context.Background(), svcs) }); err != nil {
			b.Fatal(err)
		}
	}
	sync()
	for i := 0; b.Loop(); i++ {
		svcs[i%len(svcs)].Ports[0].Endpoints[0].Port = uint16(8000 + i%100)
		scripts = scripts[:0]
		sync()
		if len(scripts) != 1 || isWhole(scripts[0]) {
			b.Fatalf("Sync wrote %d scripts, want one update", len(scripts))
		}
	}
}
