package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// forwardTimeout bounds one question to one upstream resolver: a pod's
// resolver gives up after 5 s (resolv.conf's default), so two upstreams
// get a try each before it does.
const forwardTimeout = 2 * time.Second

// Server answers the cluster's names from the records it was last given
// and forwards every other question to the node's resolvers.
type Server struct {
	domain    string
	upstreams []string // host:port
	log       *slog.Logger
	records   atomic.Pointer[Records]
	clients   atomic.Pointer[[]netip.Prefix]
}

// NewServer is a server for domain (such as "cluster.local") that
// forwards other names to upstreams (addresses, port 53 unless given).
// Until SetRecords is first called, names in the domain are answered
// SERVFAIL: clients try again rather than cache a "no such name".
func NewServer(domain string, upstreams []string, log *slog.Logger) *Server {
	s := &Server{domain: dns.CanonicalName(domain), log: log}
	for _, u := range upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			u = net.JoinHostPort(u, "53")
		}
		s.upstreams = append(s.upstreams, u)
	}
	return s
}

// SetRecords makes r what the server answers from.
func (s *Server) SetRecords(r *Records) { s.records.Store(r) }

// SetClients limits who is answered to addresses in prefixes (the
// cluster's pods) and the node itself (loopback, and the server's own
// address, which the node's questions come from): a question from
// elsewhere, such as a host of the node's LAN that routes the address to
// the node, is refused, never forwarded (no open resolver). Until it is
// first called, everyone is answered.
func (s *Server) SetClients(prefixes []netip.Prefix) { s.clients.Store(&prefixes) }

// allowed reports whether the client of w is one to answer.
func (s *Server) allowed(w dns.ResponseWriter) bool {
	p := s.clients.Load()
	if p == nil {
		return true
	}
	from, to := addrOf(w.RemoteAddr()), addrOf(w.LocalAddr())
	if from.IsLoopback() || from == to {
		return true
	}
	for _, prefix := range *p {
		if prefix.Contains(from) {
			return true
		}
	}
	return false
}

// addrOf is a's IP address (IPv4 unmapped), invalid if it has none.
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Serve answers on addr (host:port), over UDP and TCP, until ctx ends.
// It returns at once when either cannot listen.
func (s *Server) Serve(ctx context.Context, addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("clusterdns: listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("clusterdns: listen: %w", err)
	}
	return s.ServeOn(ctx, pc, ln)
}

// ServeOn answers on pc (UDP) and ln (TCP) until ctx ends or either
// fails, then closes them and returns once nothing of it runs.
func (s *Server) ServeOn(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	servers := []*dns.Server{
		{PacketConn: pc, Handler: s, UDPSize: dns.DefaultMsgSize},
		{Listener: ln, Handler: s},
	}
	errc := make(chan error, len(servers))
	started := make([]chan struct{}, len(servers))
	exited := make([]chan struct{}, len(servers))
	for i, srv := range servers {
		started[i], exited[i] = make(chan struct{}), make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started[i]) }
		go func() {
			defer close(exited[i])
			errc <- srv.ActivateAndServe()
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	// Shutdown of a server not yet started fails and leaves it to
	// start: each is shut down once started, unless it already ended
	// (failed before it started).
	for i, srv := range servers {
		select {
		case <-started[i]:
			_ = srv.Shutdown()
		case <-exited[i]:
		}
		<-exited[i]
	}
	_ = pc.Close()
	_ = ln.Close()
	if err != nil {
		return fmt.Errorf("clusterdns: serve: %w", err)
	}
	return nil
}

// ServeDNS answers one question.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	if !s.allowed(w) {
		s.reply(w, new(dns.Msg).SetRcode(req, dns.RcodeRefused))
		return
	}
	if len(req.Question) != 1 {
		s.reply(w, new(dns.Msg).SetRcode(req, dns.RcodeFormatError))
		return
	}
	q := req.Question[0]
	name := dns.CanonicalName(q.Name)
	if dns.IsSubDomain(s.domain, name) || s.ownsReverse(name) {
		if m, ok := s.answer(req, name, q.Qtype); ok {
			if q.Qtype != dns.TypeCNAME && q.Qtype != dns.TypeANY {
				s.chase(m, network(w), q.Qtype)
			}
			s.reply(w, fit(w, req, m))
			return
		}
	}
	s.forward(w, req)
}

// maxChase bounds a chain of ExternalName Services naming each other.
const maxChase = 8

// chase adds to m, which may end in an ExternalName Service's CNAME,
// the records of the type asked of its target, from the records or the
// node's resolvers, as CoreDNS does: a pod's stub resolver (glibc, musl)
// asks once and never asks again for the CNAME's target.
func (s *Server) chase(m *dns.Msg, network string, qtype uint16) {
	for range maxChase {
		if len(m.Answer) == 0 {
			return
		}
		c, ok := m.Answer[len(m.Answer)-1].(*dns.CNAME)
		if !ok {
			return
		}
		target := dns.CanonicalName(c.Target)
		q := new(dns.Msg).SetQuestion(target, qtype)
		var r *dns.Msg
		if dns.IsSubDomain(s.domain, target) {
			r, _ = s.answer(q, target, qtype)
		} else {
			q.SetEdns0(dns.DefaultMsgSize, false)
			var err error
			if r, err = s.exchange(network, q); err != nil {
				s.log.Debug("dns: no upstream answered", "name", target, "err", err)
				return
			}
		}
		m.Answer = append(m.Answer, r.Answer...)
		if len(r.Answer) == 0 && r.Rcode == dns.RcodeNameError {
			// The rcode speaks of the chain's last name (RFC 6604).
			m.Rcode = r.Rcode
		}
	}
}

func (s *Server) reply(w dns.ResponseWriter, m *dns.Msg) {
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns: write answer", "err", err)
	}
}

// fit is m cut to what the client takes: over UDP, 512 bytes or the
// buffer its EDNS0 record offers, with TC set when records were left
// out (a headless Service of many endpoints), so that it asks again over
// TCP (RFC 1035 4.2.1, RFC 6891).
func fit(w dns.ResponseWriter, req, m *dns.Msg) *dns.Msg {
	size := dns.MaxMsgSize
	if _, tcp := w.RemoteAddr().(*net.TCPAddr); !tcp {
		size = dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(size, int(opt.UDPSize()))
			m.SetEdns0(uint16(size), false)
		}
	}
	m.Truncate(size)
	return m
}

// ownsReverse reports whether name is a reverse name the records hold.
func (s *Server) ownsReverse(name string) bool {
	r := s.records.Load()
	return r != nil && r.ptr[name] != ""
}

// answer is the reply to a question for name in the domain; false means
// the name is not the server's to answer (forwarded instead).
func (s *Server) answer(req *dns.Msg, name string, qtype uint16) (*dns.Msg, bool) {
	m := new(dns.Msg).SetReply(req)
	m.Authoritative, m.RecursionAvailable = true, true
	r := s.records.Load()
	if r == nil {
		m.Authoritative = false
		m.Rcode = dns.RcodeServerFailure
		return m, true
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
	}
	exists := r.names[name]
	if target, ok := r.cname[name]; ok {
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: target})
		return m, true
	}
	addrs := r.addrs[name]
	if ip, ok := r.podAddr(name); ok {
		exists, addrs = true, append(addrs, ip)
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeANY:
		for _, ip := range addrs {
			switch {
			case ip.Is4() && qtype != dns.TypeAAAA:
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: ip.AsSlice()})
			case ip.Is6() && qtype != dns.TypeA:
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip.AsSlice()})
			}
		}
	case dns.TypeSRV:
		for _, t := range r.srv[name] {
			m.Answer = append(m.Answer, &dns.SRV{Hdr: hdr(dns.TypeSRV), Priority: 0, Weight: 100, Port: t.port, Target: t.target})
			for _, ip := range r.addrs[t.target] {
				if ip.Is4() {
					m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: t.target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL}, A: ip.AsSlice()})
				} else {
					m.Extra = append(m.Extra, &dns.AAAA{Hdr: dns.RR_Header{Name: t.target, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: TTL}, AAAA: ip.AsSlice()})
				}
			}
		}
	case dns.TypePTR:
		if target := r.ptr[name]; target != "" {
			exists = true
			m.Answer = append(m.Answer, &dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: target})
		}
	}
	if !dns.IsSubDomain(s.domain, name) && len(m.Answer) == 0 {
		return nil, false
	}
	if len(m.Answer) == 0 {
		if !exists {
			m.Rcode = dns.RcodeNameError
		}
		// Negative answers carry the zone's SOA, whose minimum TTL is
		// how long resolvers may cache them (RFC 2308).
		m.Ns = append(m.Ns, s.soa())
	}
	return m, true
}

func (s *Server) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: s.domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns:      "ns.dns." + s.domain,
		Mbox:    "hostmaster." + s.domain,
		Serial:  1,
		Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL,
	}
}

// forward asks the node's resolvers in turn, over the transport the
// client used (a truncated UDP answer goes back as it is; the client
// asks again over TCP, and so does the forward).
func (s *Server) forward(w dns.ResponseWriter, req *dns.Msg) {
	m, err := s.exchange(network(w), req)
	if err != nil {
		s.log.Debug("dns: no upstream answered", "name", strings.ToLower(req.Question[0].Name), "err", err)
		m = new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
	}
	s.reply(w, m)
}

// exchange is the first answer of the node's resolvers to req.
func (s *Server) exchange(network string, req *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: forwardTimeout, UDPSize: dns.DefaultMsgSize}
	if len(s.upstreams) == 0 {
		return nil, errors.New("the node names no resolver")
	}
	var errs []error
	for _, u := range s.upstreams {
		m, _, err := c.Exchange(req, u)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// network is the transport w's client asked over: "udp" or "tcp".
func network(w dns.ResponseWriter) string {
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		return "tcp"
	}
	return "udp"
}
