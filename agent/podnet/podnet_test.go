package podnet

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

// requireReal skips without root and Debian's CNI plugins, unless
// OUTPOST_TEST_REAL=1 (make test) says they must be there.
func requireReal(t *testing.T) {
	t.Helper()
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "pod networks need root"
	default:
		if missing := MissingPlugins(DefaultBinDirs[:1], "bridge", "host-local", "loopback", "portmap", "firewall"); len(missing) > 0 {
			why = fmt.Sprintf("the CNI plugins (containernetworking-plugins) are not installed: %v missing from %s", missing, DefaultBinDirs[0])
		}
		if _, err := exec.LookPath("iptables"); err != nil {
			why = "iptables (for portmap and the bridge's masquerade) is not installed"
		}
	}
	if why != "" {
		realtest.Require(t, why)
	}
}

// testNetwork writes the default network for this test (a bridge of its
// own) and returns a Manager on it.
func testNetwork(t *testing.T, cidr string) (*Manager, Config) {
	t.Helper()
	requireReal(t)
	dir := t.TempDir()
	bridge := fmt.Sprintf("opb%d", os.Getpid()%100000)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })
	cfg := Config{ConfDir: filepath.Join(dir, "net.d"), StateDir: filepath.Join(dir, "netns"), CacheDir: filepath.Join(dir, "cache")}
	if _, err := WriteDefault(cfg.ConfDir, DefaultNetwork{Bridge: bridge, PodCIDR: netip.MustParsePrefix(cidr), IPAMDir: filepath.Join(cfg.CacheDir, "ipam")}); err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, cfg
}

// serve answers every connection to port in the pod's namespace with
// its name.
func serve(t *testing.T, n Network, name string, port int) {
	t.Helper()
	var ln net.Listener
	if err := linuxns.Run(n.NetNS, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatalf("pod %s listens on %d: %v", name, port, err)
	}
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

// ask connects to addr (from the namespace at ns, or this host's when
// empty) and returns what the server said.
func ask(t *testing.T, ns, addr string) string {
	t.Helper()
	var c net.Conn
	dial := func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}
	var err error
	if ns == "" {
		err = dial()
	} else {
		err = linuxns.Run(ns, dial)
	}
	if err != nil {
		t.Fatalf("connect to %s (from %q): %v", addr, ns, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	return string(b)
}

// Pods get networks of their own through the real CNI plugins (SPEC
// NET-1): an address each from the node's pod CIDR; two pods bind one
// port; they reach each other and the host reaches them; a hostPort
// forwards to its pod; a pod set up again, or by an agent restarted,
// keeps its address; a pod torn down loses its namespace and address
// lease.
func TestPodNetworksRealPlugins(t *testing.T) {
	m, cfg := testNetwork(t, "10.198.0.0/24")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cidr := netip.MustParsePrefix("10.198.0.0/24")
	setup := func(m *Manager, p Pod) Network {
		t.Helper()
		n, err := m.Setup(ctx, p)
		if err != nil {
			t.Fatalf("set up %s: %v", p.Name, err)
		}
		if len(n.IPs) != 1 || !cidr.Contains(n.IPs[0]) {
			t.Fatalf("pod %s: addresses %v, want one of %s", p.Name, n.IPs, cidr)
		}
		return n
	}
	pa := Pod{Namespace: "default", Name: "a", UID: "uid-a"}
	pb := Pod{Namespace: "default", Name: "b", UID: "uid-b"}
	pc := Pod{Namespace: "default", Name: "c", UID: "uid-c", Ports: []PortMapping{{HostPort: 31999, ContainerPort: 8080, Protocol: "tcp"}}}
	a, b, c := setup(m, pa), setup(m, pb), setup(m, pc)
	if a.IPs[0] == b.IPs[0] || b.IPs[0] == c.IPs[0] || a.IPs[0] == c.IPs[0] {
		t.Fatalf("addresses shared: %v %v %v", a.IPs, b.IPs, c.IPs)
	}
	serve(t, a, "a", 8080)
	serve(t, b, "b", 8080) // the same port as a: namespaces of their own
	serve(t, c, "c", 8080)
	if got := ask(t, b.NetNS, net.JoinHostPort(a.IPs[0].String(), "8080")); got != "a" {
		t.Errorf("b to a: %q", got)
	}
	if got := ask(t, a.NetNS, net.JoinHostPort(b.IPs[0].String(), "8080")); got != "b" {
		t.Errorf("a to b: %q", got)
	}
	if got := ask(t, "", net.JoinHostPort(b.IPs[0].String(), "8080")); got != "b" {
		t.Errorf("host to b: %q", got)
	}
	gw := cidr.Addr().Next() // the bridge's address, one of this host's
	if got := ask(t, "", net.JoinHostPort(gw.String(), "31999")); got != "c" {
		t.Errorf("host port 31999 to c: %q", got)
	}

	// Set up again, and by a new Manager (an agent restarted): the same.
	if again := setup(m, pa); again.IPs[0] != a.IPs[0] || again.NetNS != a.NetNS {
		t.Errorf("a set up again: %+v, was %+v", again, a)
	}
	m2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !m2.Has(pa.UID) {
		t.Error("a restarted agent does not see a's namespace")
	}
	if again := setup(m2, pa); again.IPs[0] != a.IPs[0] {
		t.Errorf("a after a restart: %v, was %v", again.IPs, a.IPs)
	}
	if got := ask(t, b.NetNS, net.JoinHostPort(a.IPs[0].String(), "8080")); got != "a" {
		t.Errorf("b to a after a restart: %q", got)
	}

	// Torn down: the namespace and the lease go; again is no error.
	for _, p := range []Pod{pa, pb, pc} {
		if err := m2.Teardown(ctx, p); err != nil {
			t.Fatalf("tear down %s: %v", p.Name, err)
		}
	}
	if m2.Has(pa.UID) {
		t.Error("a's namespace is still there")
	}
	if _, err := os.Stat(filepath.Join(cfg.CacheDir, "ipam", "outpost", a.IPs[0].String())); !os.IsNotExist(err) {
		t.Errorf("a's address lease is still held: %v", err)
	}
	if err := m2.Teardown(ctx, pa); err != nil {
		t.Errorf("tear down a again: %v", err)
	}
}

// Without a network configuration a pod is refused saying where the
// configuration is looked for, and nothing is left behind.
func TestSetupWithoutConfiguration(t *testing.T) {
	requireReal(t)
	dir := t.TempDir()
	m, err := New(Config{ConfDir: filepath.Join(dir, "none"), StateDir: filepath.Join(dir, "netns"), CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Setup(t.Context(), Pod{Namespace: "default", Name: "a", UID: "uid-a"})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "none")) {
		t.Fatalf("setup without a configuration: %v", err)
	}
	if m.Has("uid-a") {
		t.Error("a namespace was left behind")
	}
}

// BenchmarkPodNetworkSetup is what a pod network adds to a pod's start
// (issue 14's target: p50 ≤ 20 ms): namespace, loopback, bridge,
// host-local, portmap and firewall through the real plugins; teardown
// timed apart.
func BenchmarkPodNetworkSetup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("pod networks need root")
	}
	dir := b.TempDir()
	bridge := fmt.Sprintf("opb%d", os.Getpid()%100000)
	b.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })
	cfg := Config{ConfDir: filepath.Join(dir, "net.d"), StateDir: filepath.Join(dir, "netns"), CacheDir: filepath.Join(dir, "cache")}
	if _, err := WriteDefault(cfg.ConfDir, DefaultNetwork{Bridge: bridge, PodCIDR: netip.MustParsePrefix("10.198.0.0/22"), IPAMDir: filepath.Join(cfg.CacheDir, "ipam")}); err != nil {
		b.Fatal(err)
	}
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var setup, teardown []time.Duration
	for i := 0; b.Loop(); i++ {
		p := Pod{Namespace: "default", Name: fmt.Sprintf("p%d", i), UID: fmt.Sprintf("uid-%d", i)}
		t0 := time.Now()
		if _, err := m.Setup(ctx, p); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := m.Teardown(ctx, p); err != nil {
			b.Fatal(err)
		}
		setup, teardown = append(setup, t1.Sub(t0)), append(teardown, time.Since(t1))
	}
	slices.Sort(setup)
	slices.Sort(teardown)
	b.ReportMetric(float64(setup[len(setup)/2].Microseconds())/1000, "setup-p50-ms")
	b.ReportMetric(float64(setup[len(setup)*99/100].Microseconds())/1000, "setup-p99-ms")
	b.ReportMetric(float64(teardown[len(teardown)/2].Microseconds())/1000, "teardown-p50-ms")
}
