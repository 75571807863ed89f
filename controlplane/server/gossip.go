package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/gossip"
)

// DefaultGossipPort is the gossip pool's port (UDP and TCP).
const DefaultGossipPort = 6445

// gossipLeaveTimeout bounds how long a stopping server spends telling the
// pool it leaves.
const gossipLeaveTimeout = time.Second

// serverGossipName is a server's member name in the pool. Agents are
// named after their node, and a host may run a server and an agent under
// one host name (`outpost dev` does): the prefix, with a character node
// names cannot hold, keeps the two members apart.
func serverGossipName(id string) string { return "server:" + id }

// startGossip starts the server's member of the gossip pool, keyed with
// the cluster secret's gossip key, joining the other servers.
func (s *Server) startGossip(ctx context.Context) error {
	host, portStr, err := net.SplitHostPort(s.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("%w: GossipAddr %q: want IP:port", ErrConfig, s.cfg.GossipAddr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("%w: GossipAddr %q: bad port", ErrConfig, s.cfg.GossipAddr)
	}
	bind := host
	if host != "" && net.ParseIP(host) == nil {
		ip, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		if err != nil || len(ip) == 0 {
			return fmt.Errorf("%w: GossipAddr %q: host is not an IP and does not resolve: %w", ErrConfig, s.cfg.GossipAddr, err)
		}
		bind = ip[0].String()
	}
	adv := s.cfg.AdvertiseGossip
	if ip := net.ParseIP(bind); adv == "" && (ip == nil || ip.IsUnspecified()) {
		// Listening everywhere: advertise what raft advertises, which
		// other servers already reach.
		adv = firstHostIP()
		if h, _, err := net.SplitHostPort(s.node.Status().RaftAddr); err == nil {
			if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
				adv = h
			}
		}
	}
	seeds := s.cfg.GossipJoin
	if seeds == nil && port != 0 {
		// Servers share the gossip port (6445), as they share raft's:
		// the raft peers' hosts are the seeds.
		for _, j := range s.cfg.Join {
			if h, _, err := net.SplitHostPort(j); err == nil && h != "" {
				seeds = append(seeds, net.JoinHostPort(h, strconv.Itoa(port)))
			}
		}
	}
	s.gossipKey = gossip.KeyFromSecret(s.secret)
	pool, err := gossip.Start(ctx, gossip.Config{
		Name:          serverGossipName(s.cfg.ID),
		Role:          gossip.RoleServer,
		BindAddr:      bind,
		BindPort:      port,
		AdvertiseAddr: adv,
		Key:           s.gossipKey,
		Join:          seeds,
		API:           s.url,
		Logger:        s.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("gossip pool: %w", err)
	}
	s.gossip = pool
	if err := s.cfg.Registry.Register(gossipCollector{pool}); err != nil {
		_ = pool.Close()
		return fmt.Errorf("gossip metrics: %w", err)
	}
	return nil
}

// gossipMembersDesc describes outpost_gossip_members.
var gossipMembersDesc = prometheus.NewDesc("outpost_gossip_members",
	"Members of the gossip pool as this server sees them, by role and state.", []string{"role", "state"}, nil)

// gossipCollector reports the pool's members at each scrape.
type gossipCollector struct{ p *gossip.Pool }

func (c gossipCollector) Describe(ch chan<- *prometheus.Desc) { ch <- gossipMembersDesc }

func (c gossipCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct {
		role  gossip.Role
		state gossip.State
	}
	counts := map[key]int{}
	for _, m := range c.p.Members() {
		counts[key{m.Role, m.State}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(gossipMembersDesc, prometheus.GaugeValue, float64(n), string(k.role), string(k.state))
	}
}

// stopGossip leaves the pool (the others record a departure, not a
// failure) and stops the member.
func (s *Server) stopGossip() error {
	if s.gossip == nil {
		return nil
	}
	if err := s.gossip.Leave(gossipLeaveTimeout); err != nil {
		s.log.Warn("leaving the gossip pool", "err", err)
	}
	return s.gossip.Close()
}

// Gossip is the server's member of the gossip pool.
func (s *Server) Gossip() *gossip.Pool { return s.gossip }

// GossipKey is the pool's key (derived from the cluster secret), for
// agents' join replies.
func (s *Server) GossipKey() []byte { return slices.Clone(s.gossipKey) }

// GossipAddrs are the gossip addresses an agent should join: every live
// server this server's pool knows, itself first.
func (s *Server) GossipAddrs() []string {
	if s.gossip == nil {
		return nil
	}
	self := s.gossip.Name()
	var out []string
	for _, m := range s.gossip.Members() {
		if m.Role == gossip.RoleServer && m.State == gossip.StateAlive && m.Name != self {
			out = append(out, m.Addr)
		}
	}
	return append([]string{s.gossip.LocalAddr()}, out...)
}

// membership adapts the pool to the node lifecycle controller: a node is
// the agent member named after it.
type membership struct{ p *gossip.Pool }

func (m membership) MemberState(name string) (controllers.MemberState, time.Time, bool) {
	mem, ok := m.p.Member(name)
	if !ok || mem.Role != gossip.RoleAgent {
		return "", time.Time{}, false
	}
	return controllers.MemberState(mem.State), mem.Since, true
}

func (m membership) Subscribe() (<-chan string, func()) {
	events, cancel := m.p.Subscribe()
	names := make(chan string)
	done := make(chan struct{})
	go func() {
		defer close(names)
		for ev := range events {
			select {
			case names <- ev.Member.Name:
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return names, func() {
		once.Do(func() {
			close(done)
			cancel()
		})
	}
}

// nodeMembership is what the leader's node lifecycle controller reads,
// nil when there is no pool.
func (s *Server) nodeMembership() controllers.Membership {
	if s.gossip == nil {
		return nil
	}
	return membership{s.gossip}
}
