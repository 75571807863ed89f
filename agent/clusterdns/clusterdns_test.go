package clusterdns_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/outpost-edge/outpost/agent/clusterdns"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// serve starts s on loopback and is its UDP and TCP addresses.
func serve(t *testing.T, s interface {
	ServeOn(context.Context, net.PacketConn, net.Listener) error
}) (udp, tcp string) {
	t.Helper()
	// One port for both, as a resolver's 53: a forward over TCP goes
	// where the UDP one went.
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; ln == nil; i++ {
		if i == 20 {
			t.Fatal("no port free for both UDP and TCP")
		}
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			_ = pc.Close()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeOn(ctx, pc, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return pc.LocalAddr().String(), ln.Addr().String()
}

// upstream answers every A question with 192.0.2.1, as the node's own
// resolver would answer names outside the cluster.
type upstream struct{}

func (upstream) ServeOn(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)})
		_ = w.WriteMsg(m)
	})
	srvs := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	for _, s := range srvs {
		go func() { _ = s.ActivateAndServe() }()
	}
	<-ctx.Done()
	for _, s := range srvs {
		_ = s.Shutdown()
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func cluster() ([]*api.Service, []*api.EndpointSlice) {
	svc := func(name, ip string, ports ...api.ServicePort) *api.Service {
		s := &api.Service{Spec: api.ServiceSpec{ClusterIP: ip, Ports: ports}}
		s.Name, s.Namespace = name, "shop"
		return s
	}
	ext := svc("mail", "")
	ext.Spec.Type, ext.Spec.ExternalName = api.ServiceTypeExternalName, "mail.example.com"
	front := svc("front", "")
	front.Spec.Type, front.Spec.ExternalName = api.ServiceTypeExternalName, "web.shop.svc.cluster.local"
	db := &api.EndpointSlice{
		Endpoints: []api.Endpoint{
			{Addresses: []string{"10.42.1.5"}, Hostname: "db-0", Conditions: api.EndpointConditions{Ready: ptr(true)}},
			{Addresses: []string{"10.42.2.6"}},
			{Addresses: []string{"10.42.2.7"}, Conditions: api.EndpointConditions{Ready: ptr(false)}},
		},
		Ports: []api.EndpointPort{{Name: "pg", Protocol: api.ProtocolTCP, Port: ptr(int32(5432))}},
	}
	db.Name, db.Namespace, db.Labels = "db-abc", "shop", map[string]string{api.LabelServiceName: "db"}
	return []*api.Service{
		svc("web", "10.43.0.20", api.ServicePort{Name: "http", Protocol: api.ProtocolTCP, Port: 80}),
		svc("db", "None"),
		ext,
		front,
	}, []*api.EndpointSlice{db}
}

func ask(t *testing.T, addr, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network}
	m, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), addr)
	if err != nil {
		t.Fatalf("%s %s: %v", name, dns.TypeToString[qtype], err)
	}
	return m
}

// answers is m's answer section as "TYPE VALUE" strings.
func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(f[3:], " "))
	}
	slices.Sort(out)
	return out
}

// The cluster's names (SPEC NET-4), as a Kubernetes user expects them
// from kube-dns: a Service by its cluster IP, a headless one by its ready
// endpoints, named ports as SRV, ExternalName as a CNAME, pods by their
// dashed address, reverse names of cluster IPs; a name in the domain that
// does not exist is NXDOMAIN (with the SOA that bounds its caching) and
// one that exists without a record of the type asked is empty; names
// outside are the node's resolvers' answers, over UDP and TCP alike.
func TestClusterNames(t *testing.T) {
	up, _ := serve(t, upstream{})
	s := clusterdns.NewServer("cluster.local", []string{up}, slog.New(slog.DiscardHandler))
	udp, tcp := serve(t, s)

	if m := ask(t, udp, "udp", "web.shop.svc.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Errorf("before any records: %s, want SERVFAIL (clients must not cache a no)", dns.RcodeToString[m.Rcode])
	}
	svcs, eps := cluster()
	s.SetRecords(clusterdns.Build("cluster.local", svcs, eps))

	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"web.shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.43.0.20"}},
		{"WEB.Shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.43.0.20"}},
		{"web.shop.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"_http._tcp.web.shop.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 0 100 80 web.shop.svc.cluster.local."}},
		{"db.shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.42.1.5", "A 10.42.2.6"}},
		{"db-0.db.shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.42.1.5"}},
		{"_pg._tcp.db.shop.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 0 100 5432 10-42-2-6.db.shop.svc.cluster.local.", "SRV 0 100 5432 db-0.db.shop.svc.cluster.local."}},
		// A pod's stub resolver asks once: the CNAME comes with its
		// target's addresses, as CoreDNS answers an ExternalName.
		{"mail.shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 192.0.2.1", "CNAME mail.example.com."}},
		{"front.shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.43.0.20", "CNAME web.shop.svc.cluster.local."}},
		{"mail.shop.svc.cluster.local.", dns.TypeCNAME, dns.RcodeSuccess, []string{"CNAME mail.example.com."}},
		{"10-42-3-9.shop.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.42.3.9"}},
		{"20.0.43.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR web.shop.svc.cluster.local."}},
		{"nope.shop.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"web.other.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"shop.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"example.org.", dns.TypeA, dns.RcodeSuccess, []string{"A 192.0.2.1"}},
	} {
		m := ask(t, udp, "udp", tc.name, tc.qtype)
		if m.Rcode != tc.rcode || !slices.Equal(answers(m), tc.want) {
			t.Errorf("%s %s: %s %q, want %s %q", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[m.Rcode], answers(m), dns.RcodeToString[tc.rcode], tc.want)
		}
		inDomain := dns.IsSubDomain("cluster.local.", dns.CanonicalName(tc.name))
		if inDomain && !m.Authoritative {
			t.Errorf("%s: not authoritative", tc.name)
		}
		if inDomain && len(m.Answer) == 0 && (len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA || m.Ns[0].(*dns.SOA).Minttl != clusterdns.TTL) {
			t.Errorf("%s: negative answer without the zone's SOA: %v", tc.name, m.Ns)
		}
	}
	if m := ask(t, udp, "udp", "_pg._tcp.db.shop.svc.cluster.local.", dns.TypeSRV); len(m.Extra) != 2 {
		t.Errorf("SRV answer's targets' addresses: %v", m.Extra)
	}
	if m := ask(t, tcp, "tcp", "web.shop.svc.cluster.local.", dns.TypeA); !slices.Equal(answers(m), []string{"A 10.43.0.20"}) {
		t.Errorf("over TCP: %v", m)
	}
	if m := ask(t, tcp, "tcp", "example.org.", dns.TypeA); !slices.Equal(answers(m), []string{"A 192.0.2.1"}) {
		t.Errorf("forwarded over TCP: %v", m)
	}

	// New records replace the old at once: a Service gone is a name gone.
	s.SetRecords(clusterdns.Build("cluster.local", svcs[1:], eps))
	if m := ask(t, udp, "udp", "web.shop.svc.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("a deleted Service: %s, want NXDOMAIN", dns.RcodeToString[m.Rcode])
	}
}

// A node whose resolvers do not answer gives SERVFAIL for names outside
// the cluster, never a made-up answer, and still answers its own.
func TestUpstreamDown(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	_ = pc.Close()
	s := clusterdns.NewServer("cluster.local", []string{dead}, slog.New(slog.DiscardHandler))
	svcs, eps := cluster()
	s.SetRecords(clusterdns.Build("cluster.local", svcs, eps))
	udp, _ := serve(t, s)
	if m := ask(t, udp, "udp", "example.org.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Errorf("upstream down: %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	if m := ask(t, udp, "udp", "web.shop.svc.cluster.local.", dns.TypeA); len(m.Answer) != 1 {
		t.Errorf("own name with upstream down: %v", m)
	}
}

// A pod's resolv.conf by its dnsPolicy (SPEC NET-4, Kubernetes' rules):
// ClusterFirst names the cluster resolver with the namespace's search
// path and ndots:5, after which the node's search domains come; a
// hostNetwork pod gets the node's unless ClusterFirstWithHostNet; Default
// is the node's; None is only dnsConfig, which the others get added
// (an option of the pod's replacing the policy's of its name; at most 3
// nameservers).
func TestPodResolvConf(t *testing.T) {
	host := clusterdns.ResolvConf{Nameservers: []string{"192.0.2.53"}, Searches: []string{"lab.example"}, Options: []string{"edns0"}}
	d := clusterdns.PodDNS{Host: host, ClusterDNS: netip.MustParseAddr("10.43.0.10"), Domain: "cluster.local"}
	pod := func(policy string, hostNet bool, c *api.PodDNSConfig) *api.Pod {
		p := &api.Pod{Spec: api.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: c}}
		p.Namespace = "shop"
		return p
	}
	clusterFirst := "search shop.svc.cluster.local svc.cluster.local cluster.local lab.example\nnameserver 10.43.0.10\noptions ndots:5\n"
	nodes := "search lab.example\nnameserver 192.0.2.53\noptions edns0\n"
	for _, tc := range []struct {
		name string
		d    clusterdns.PodDNS
		pod  *api.Pod
		want string
	}{
		{"ClusterFirst", d, pod(api.DNSClusterFirst, false, nil), clusterFirst},
		{"empty policy is ClusterFirst", d, pod("", false, nil), clusterFirst},
		{"hostNetwork ClusterFirst", d, pod(api.DNSClusterFirst, true, nil), nodes},
		{"ClusterFirstWithHostNet", d, pod(api.DNSClusterFirstWithHostNet, true, nil), clusterFirst},
		{"Default", d, pod(api.DNSDefault, false, nil), nodes},
		{"no cluster resolver", clusterdns.PodDNS{Host: host, Domain: "cluster.local"}, pod(api.DNSClusterFirst, false, nil), nodes},
		{"None", d, pod(api.DNSNone, false, &api.PodDNSConfig{Nameservers: []string{"192.0.2.9"}, Searches: []string{"a.example"}, Options: []api.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}),
			"search a.example\nnameserver 192.0.2.9\noptions ndots:2\n"},
		{"ClusterFirst with dnsConfig", d, pod(api.DNSClusterFirst, false, &api.PodDNSConfig{
			Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, Searches: []string{"svc.cluster.local", "b.example"},
			Options: []api.PodDNSConfigOption{{Name: "ndots", Value: ptr("1")}, {Name: "single-request"}},
		}), "search shop.svc.cluster.local svc.cluster.local cluster.local lab.example b.example\nnameserver 10.43.0.10\nnameserver 192.0.2.1\nnameserver 192.0.2.2\noptions ndots:1 single-request\n"},
	} {
		if got := string(tc.d.For(tc.pod).Bytes()); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// The node's resolv.conf as glibc reads it: the last search or domain
// line wins, options add up, comments are skipped.
func TestParseResolvConf(t *testing.T) {
	path := t.TempDir() + "/resolv.conf"
	data := "# generated\ndomain old.example\nsearch a.example b.example\nnameserver 192.0.2.1\n; x\nnameserver 192.0.2.2\noptions ndots:2\noptions edns0\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := clusterdns.ParseResolvConf(path)
	if err != nil {
		t.Fatal(err)
	}
	want := clusterdns.ResolvConf{Nameservers: []string{"192.0.2.1", "192.0.2.2"}, Searches: []string{"a.example", "b.example"}, Options: []string{"ndots:2", "edns0"}}
	if !slices.Equal(rc.Nameservers, want.Nameservers) || !slices.Equal(rc.Searches, want.Searches) || !slices.Equal(rc.Options, want.Options) {
		t.Errorf("got %+v, want %+v", rc, want)
	}
	if rc, err := clusterdns.ParseResolvConf(path + ".missing"); err != nil || len(rc.Nameservers) != 0 {
		t.Errorf("a missing file: %+v %v", rc, err)
	}
}

// A headless Service with more endpoints than a 512-byte UDP answer
// holds is answered truncated (TC) over UDP, as much as fits, so that the
// client asks again over TCP and gets them all; a client that offers a
// bigger buffer (EDNS0) gets up to that.
func TestLargeAnswerTruncated(t *testing.T) {
	s := clusterdns.NewServer("cluster.local", nil, slog.New(slog.DiscardHandler))
	svc := &api.Service{Spec: api.ServiceSpec{ClusterIP: "None"}}
	svc.Name, svc.Namespace = "many", "shop"
	es := &api.EndpointSlice{}
	es.Name, es.Namespace, es.Labels = "many-abc", "shop", map[string]string{api.LabelServiceName: "many"}
	for i := range 200 {
		es.Endpoints = append(es.Endpoints, api.Endpoint{Addresses: []string{fmt.Sprintf("10.42.%d.%d", i/250, 1+i%250)}})
	}
	s.SetRecords(clusterdns.Build("cluster.local", []*api.Service{svc}, []*api.EndpointSlice{es}))
	udp, tcp := serve(t, s)
	const name = "many.shop.svc.cluster.local."
	// size is m's length on the wire, as it came (compressed).
	size := func(m *dns.Msg) int {
		m.Compress = true
		return m.Len()
	}
	m, _, err := (&dns.Client{Net: "udp"}).Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), udp)
	if err != nil || !m.Truncated || len(m.Answer) == 0 || size(m) > dns.MinMsgSize {
		t.Errorf("over UDP: %v; want a truncated answer within 512 bytes", err)
	}
	big := new(dns.Msg).SetQuestion(name, dns.TypeA).SetEdns0(1232, false)
	if m, _, err := (&dns.Client{Net: "udp", UDPSize: 1232}).Exchange(big, udp); err != nil || !m.Truncated || size(m) > 1232 || size(m) <= dns.MinMsgSize {
		t.Errorf("over UDP with EDNS0 1232: %v; want truncated within 1232 bytes", err)
	}
	if m := ask(t, tcp, "tcp", name, dns.TypeA); m.Truncated || len(m.Answer) != 200 {
		t.Errorf("over TCP: %d answers (truncated %v), want 200", len(m.Answer), m.Truncated)
	}
}

// A server that cannot serve on one of its sockets returns at once and
// leaves nothing behind: the other socket is closed (the agent's next try
// listens on the same address) and no serving goroutine outlives the
// call.
func TestServeOnFailureLeavesNothing(t *testing.T) {
	s := clusterdns.NewServer("cluster.local", nil, slog.New(slog.DiscardHandler))
	for range 50 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_ = pc.Close() // the UDP server fails before it starts
		if err := s.ServeOn(context.Background(), pc, ln); err == nil {
			t.Fatal("ServeOn on a closed socket: no error")
		}
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			_ = c.Close()
			t.Fatal("the TCP listener still accepts after ServeOn returned")
		}
	}
}

// writer is a ResponseWriter of a client at from, asking the server at
// to over UDP; it keeps the reply.
type writer struct {
	dns.ResponseWriter
	from, to netip.Addr
	got      *dns.Msg
}

func (w *writer) RemoteAddr() net.Addr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.from, 40000))
}
func (w *writer) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.to, 53)) }
func (w *writer) WriteMsg(m *dns.Msg) error {
	w.got = m
	return nil
}

// The resolver is no open one (SPEC NET-4): once told its clients (the
// cluster's pods), a question from anywhere else, such as a host of the
// node's LAN that routes the cluster DNS address to the node, is refused,
// never forwarded; the node itself (its loopback, or the resolver's own
// address, the source of a hostNetwork pod's question) is answered.
func TestClientsOnly(t *testing.T) {
	up, _ := serve(t, upstream{})
	s := clusterdns.NewServer("cluster.local", []string{up}, slog.New(slog.DiscardHandler))
	svcs, eps := cluster()
	s.SetRecords(clusterdns.Build("cluster.local", svcs, eps))
	self := netip.MustParseAddr("10.43.0.10")
	ask := func(from, name string) int {
		w := &writer{from: netip.MustParseAddr(from), to: self}
		s.ServeDNS(w, new(dns.Msg).SetQuestion(name, dns.TypeA))
		return w.got.Rcode
	}
	if rc := ask("192.0.2.50", "example.org."); rc != dns.RcodeSuccess {
		t.Errorf("before the clients are known: %s, want answered", dns.RcodeToString[rc])
	}
	s.SetClients([]netip.Prefix{netip.MustParsePrefix("10.42.0.0/16")})
	for _, tc := range []struct {
		from, name string
		rcode      int
	}{
		{"10.42.1.5", "example.org.", dns.RcodeSuccess},
		{"10.42.1.5", "web.shop.svc.cluster.local.", dns.RcodeSuccess},
		{"10.43.0.10", "example.org.", dns.RcodeSuccess},
		{"127.0.0.1", "example.org.", dns.RcodeSuccess},
		{"::ffff:10.42.1.5", "example.org.", dns.RcodeSuccess},
		{"192.0.2.50", "example.org.", dns.RcodeRefused},
		{"192.0.2.50", "web.shop.svc.cluster.local.", dns.RcodeRefused},
		{"2001:db8::1", "example.org.", dns.RcodeRefused},
	} {
		if rc := ask(tc.from, tc.name); rc != tc.rcode {
			t.Errorf("%s from %s: %s, want %s", tc.name, tc.from, dns.RcodeToString[rc], dns.RcodeToString[tc.rcode])
		}
	}
}
