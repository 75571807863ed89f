package agent

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/outpost-edge/outpost/agent/clusterdns"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// someNetwork is a pod network that is there (the resolver runs only
// with one); nothing of it is called.
type someNetwork struct{ PodNetwork }

// udpFrom is a ResponseWriter of a client at from, asking over UDP.
type udpFrom struct {
	dns.ResponseWriter
	from netip.Addr
	got  *dns.Msg
}

func (w *udpFrom) RemoteAddr() net.Addr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.from, 40000))
}
func (w *udpFrom) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(10, 43, 0, 10), Port: 53} }
func (w *udpFrom) WriteMsg(m *dns.Msg) error {
	w.got = m
	return nil
}

// The node's resolver answers the cluster's pods and the node, not the
// node's LAN (SPEC NET-4: no open resolver), from the cluster CIDR the
// node's object names; an agent restarted while cut off from the control
// plane keeps both the address and that range from the cluster DNS file.
func TestClusterDNSClients(t *testing.T) {
	dir := t.TempDir()
	newAgent := func() *Agent {
		a := &Agent{cfg: Config{DataDir: dir, PodNetwork: someNetwork{}, ClusterDNS: ClusterDNSAuto, ClusterDomain: "cluster.local"}, log: slog.New(slog.DiscardHandler)}
		a.dns = clusterdns.NewServer("cluster.local", nil, a.log)
		a.dns.SetRecords(clusterdns.Build("cluster.local", nil, nil))
		return a
	}
	rcode := func(a *Agent, from string) int {
		w := &udpFrom{from: netip.MustParseAddr(from)}
		a.dns.ServeDNS(w, new(dns.Msg).SetQuestion("web.default.svc.cluster.local.", dns.TypeA))
		return w.got.Rcode
	}
	a := newAgent()
	node := &api.Node{ObjectMeta: api.ObjectMeta{Name: "n1", Annotations: map[string]string{
		api.AnnotationClusterDNS: "10.43.0.10", api.AnnotationClusterCIDR: "10.42.0.0/16",
	}}, Spec: api.NodeSpec{PodCIDR: "10.42.3.0/24"}}
	a.learnClusterDNS(node)
	if rc := rcode(a, "10.42.7.9"); rc != dns.RcodeNameError {
		t.Errorf("a pod of another node: %s, want NXDOMAIN", dns.RcodeToString[rc])
	}
	if rc := rcode(a, "192.0.2.50"); rc != dns.RcodeRefused {
		t.Errorf("a host of the LAN: %s, want REFUSED", dns.RcodeToString[rc])
	}

	restarted := newAgent()
	addr, pods := restarted.savedClusterDNS()
	if addr != netip.MustParseAddr("10.43.0.10") || pods != netip.MustParsePrefix("10.42.0.0/16") || restarted.clusterDNS() != addr {
		t.Fatalf("after a restart: %v %v %v, want 10.43.0.10 10.42.0.0/16", addr, pods, restarted.clusterDNS())
	}
	restarted.setDNSClients(pods)
	if rc := rcode(restarted, "192.0.2.50"); rc != dns.RcodeRefused {
		t.Errorf("after a restart, a host of the LAN: %s, want REFUSED", dns.RcodeToString[rc])
	}
}
