package gossip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Sentinel errors of the package.
var (
	// ErrConfig is wrapped by every error about a Config that cannot work.
	ErrConfig = errors.New("gossip: invalid configuration")
	// ErrClosed is returned by calls on a closed pool.
	ErrClosed = errors.New("gossip: pool closed")
)

// Role is what a member is in the cluster; it travels in the member's
// metadata.
type Role string

// Roles.
const (
	RoleServer Role = "server"
	RoleAgent  Role = "agent"
)

// State is a member's state as this pool last heard it.
type State string

// States. memberlist also has a "suspect" state between alive and dead,
// but it tells its users only of joins, updates and deaths, and its
// member list cannot be read without racing its own writes; the timings
// keep suspicion short instead (see Timing).
const (
	StateAlive State = "alive"
	// StateDead: the pool declared the member failed (it stopped
	// answering probes and did not refute the suspicion in time).
	StateDead State = "dead"
	// StateLeft: the member said goodbye (Leave) before going.
	StateLeft State = "left"
)

// Member is one member of the pool.
type Member struct {
	Name string
	Role Role
	// Addr is the member's gossip address, host:port.
	Addr string
	// API is a server's API URL ("" for agents): agents fail over to it.
	API   string
	State State
	// Since is when this pool learned of the member's current state.
	Since time.Time
}

// EventType says what happened to a member.
type EventType string

// Event types.
const (
	EventJoin   EventType = "join"   // the member is alive (new, or back)
	EventLeave  EventType = "leave"  // it left gracefully
	EventFail   EventType = "fail"   // it was declared dead
	EventUpdate EventType = "update" // its metadata (role) changed
)

// Event is one change of a member.
type Event struct {
	Type   EventType
	Member Member
}

// Config configures a pool.
type Config struct {
	// Name is the member's unique name: the raft server ID for servers,
	// the node name for agents. Required.
	Name string
	// Role is RoleServer or RoleAgent. Required.
	Role Role
	// BindAddr is the IP to listen on (UDP and TCP); default 0.0.0.0.
	BindAddr string
	// BindPort is the port; 0 picks a free one (tests), LocalAddr says
	// which.
	BindPort int
	// AdvertiseAddr is the IP others reach this member at; default:
	// BindAddr when it names one, else this host's private (RFC 1918)
	// address as memberlist picks it; Start fails on a host that has
	// none, so set it there.
	AdvertiseAddr string
	// Key encrypts and authenticates all gossip (AES-256-GCM); 32 bytes,
	// from KeyFromSecret. Required: a pool never gossips in clear.
	Key []byte
	// Join lists host:port addresses of members to join (the servers).
	Join []string
	// API is a server's API URL, gossiped in its metadata so that agents
	// learn every server they may fail over to.
	API string
	// Logger gets the pool's and memberlist's records; nil discards them.
	Logger *slog.Logger
	// Timing is the timing preset; default TimingDefault.
	Timing Timing

	// wrapTransport, when set (tests), wraps the network transport, to
	// cut a member off without stopping it.
	wrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
}

// meta is a member's metadata, JSON in memberlist's NodeMeta (512 bytes
// at most).
type meta struct {
	Role Role   `json:"role"`
	API  string `json:"api,omitempty"`
	// Leaving is set by Leave just before the member says goodbye:
	// memberlist tells its users of a death and of a departure alike.
	Leaving bool `json:"leaving,omitempty"`
}

// Pool is this process's membership in the gossip pool.
type Pool struct {
	cfg Config
	log *slog.Logger
	t   timings
	ml  *memberlist.Memberlist
	// delegate holds the metadata this member gossips.
	delegate *delegate

	mu      sync.Mutex
	members map[string]Member
	subs    map[*subscriber]struct{}
	seeds   []string
	closed  bool
	// joinHook, when set (tests), hears the outcome of every join
	// attempt: how many seeds answered, and the error when none did.
	joinHook func(answered int, err error)

	// kick wakes the join loop for an attempt now.
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Start starts a pool member and, when cfg.Join names seeds, joins them in
// the background (see Join). ctx bounds nothing after Start returns: it
// is only checked before the listeners open.
func Start(ctx context.Context, cfg Config) (*Pool, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "0.0.0.0"
	}
	p := &Pool{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "gossip", "member", cfg.Name),
		t:       cfg.Timing.timings(),
		members: map[string]Member{},
		subs:    map[*subscriber]struct{}{},
		kick:    make(chan struct{}, 1),
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertisePort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	if mc.AdvertiseAddr == "" {
		if ip := net.ParseIP(cfg.BindAddr); ip != nil && !ip.IsUnspecified() {
			mc.AdvertiseAddr = cfg.BindAddr
		}
	}
	mc.SecretKey = slices.Clone(cfg.Key)
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	p.delegate = &delegate{meta: meta{Role: cfg.Role, API: cfg.API}}
	mc.Delegate = p.delegate
	mc.Events = events{p}
	mc.Logger = log.New(logWriter{p.log}, "", 0)
	p.t.apply(mc)
	if cfg.wrapTransport != nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{cfg.BindAddr}, BindPort: cfg.BindPort, Logger: mc.Logger})
		if err != nil {
			return nil, fmt.Errorf("gossip: transport: %w", err)
		}
		mc.Transport = cfg.wrapTransport(nt)
		mc.BindPort = nt.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: starting member %s on %s: %w", cfg.Name, net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
	}
	p.ml = ml
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Go(p.joinLoop)
	p.log.Info("gossip pool started", "addr", p.LocalAddr(), "role", cfg.Role)
	if len(cfg.Join) > 0 {
		if err := p.Join(cfg.Join); err != nil {
			_ = p.Close()
			return nil, err
		}
	}
	return p, nil
}

// check reports what cannot work in c.
func (c Config) check() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: Name is required", ErrConfig)
	case len(c.Name) > 253:
		return fmt.Errorf("%w: Name has %d characters, at most 253", ErrConfig, len(c.Name))
	case c.Role != RoleServer && c.Role != RoleAgent:
		return fmt.Errorf("%w: Role %q: want %q or %q", ErrConfig, c.Role, RoleServer, RoleAgent)
	case len(c.Key) != KeyLen:
		return fmt.Errorf("%w: Key has %d bytes, want %d (KeyFromSecret)", ErrConfig, len(c.Key), KeyLen)
	case c.BindPort < 0 || c.BindPort > 65535:
		return fmt.Errorf("%w: BindPort %d is not a port", ErrConfig, c.BindPort)
	case c.BindAddr != "" && net.ParseIP(c.BindAddr) == nil:
		return fmt.Errorf("%w: BindAddr %q is not an IP address", ErrConfig, c.BindAddr)
	case c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil:
		return fmt.Errorf("%w: AdvertiseAddr %q is not an IP address", ErrConfig, c.AdvertiseAddr)
	case c.Timing != TimingDefault && c.Timing != TimingFast:
		return fmt.Errorf("%w: Timing %d is not a preset", ErrConfig, c.Timing)
	}
	return checkAddrs(c.Join)
}

// checkAddrs checks that every seed is host:port.
func checkAddrs(addrs []string) error {
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return fmt.Errorf("%w: join address %q: want host:port", ErrConfig, a)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("%w: join address %q: bad port", ErrConfig, a)
		}
	}
	return nil
}

// LocalAddr is this member's advertised gossip address, host:port (with
// the real port when BindPort was 0).
func (p *Pool) LocalAddr() string {
	n := p.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Name is this member's name.
func (p *Pool) Name() string { return p.cfg.Name }

// Members returns every member this pool has heard of, itself included,
// dead and departed ones too, sorted by name.
func (p *Pool) Members() []Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Member, 0, len(p.members))
	for _, m := range p.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Member returns the member named name and whether the pool has heard of
// it.
func (p *Pool) Member(name string) (Member, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[name]
	return m, ok
}

// Join adds addrs (host:port) to the seeds and tries to join them now, in
// the background; it returns at once, with an error only for a malformed
// address. While no seed answers, attempts go on with back-off (1 s
// doubling to 30 s by default); once joined, the pool checks every few
// seconds that it still sees another live server, and joins its seeds
// again when it does not: after a long cut both sides have declared each
// other dead and memberlist would never talk to the other side again.
func (p *Pool) Join(addrs []string) error {
	if err := checkAddrs(addrs); err != nil {
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	for _, a := range addrs {
		if !slices.Contains(p.seeds, a) {
			p.seeds = append(p.seeds, a)
		}
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return nil
}

// joinLoop joins the seeds when asked to and whenever the pool sees no
// other live server, until the pool closes.
func (p *Pool) joinLoop() {
	backoff := p.t.joinRetryMin
	var wait <-chan time.Time // nil: no seeds yet, wait for a kick
	force := false
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
			force = true
		case <-wait:
		}
		p.mu.Lock()
		seeds := slices.Clone(p.seeds)
		p.mu.Unlock()
		if len(seeds) == 0 {
			wait = nil
			continue
		}
		if !force && p.seesServer() {
			backoff = p.t.joinRetryMin
			wait = time.After(p.t.rejoinCheck)
			continue
		}
		force = false
		n, err := p.ml.Join(seeds)
		if p.ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		hook := p.joinHook
		p.mu.Unlock()
		if hook != nil {
			hook(n, err)
		}
		if n > 0 {
			p.log.Info("joined the gossip pool", "seeds", seeds, "answered", n, "members", p.ml.NumMembers())
			backoff = p.t.joinRetryMin
			wait = time.After(p.t.rejoinCheck)
			continue
		}
		p.log.Warn("cannot join the gossip pool; retrying", "seeds", seeds, "err", err, "retry_in", backoff)
		wait = time.After(backoff)
		backoff = min(2*backoff, p.t.joinRetryMax)
	}
}

// seesServer reports whether the pool knows a live server other than
// itself.
func (p *Pool) seesServer() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, m := range p.members {
		if name != p.cfg.Name && m.Role == RoleServer && m.State == StateAlive {
			return true
		}
	}
	return false
}

// Leave tells the pool this member is going (the others record it as
// left, not failed) and waits up to timeout for that to spread. The pool
// stays open until Close.
func (p *Pool) Leave(timeout time.Duration) error {
	// First the intent, as a metadata update, so that the others record
	// the goodbye that follows as a departure.
	began := time.Now()
	p.delegate.setLeaving()
	if err := p.ml.UpdateNode(timeout); err != nil {
		p.log.Warn("could not announce leaving; the others may record a failure", "err", err)
	}
	if err := p.ml.Leave(max(timeout-time.Since(began), timeout/2)); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// Close stops the member without saying goodbye (the others declare it
// dead; call Leave first for a graceful exit), stops the join loop and
// ends every subscription. Safe to call more than once.
func (p *Pool) Close() error {
	var err error
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		if serr := p.ml.Shutdown(); serr != nil {
			err = fmt.Errorf("gossip: shutdown: %w", serr)
		}
		p.wg.Wait()
		p.mu.Lock()
		subs := p.subs
		p.subs = map[*subscriber]struct{}{}
		p.mu.Unlock()
		for s := range subs {
			s.stop()
		}
		p.log.Info("gossip pool stopped")
	})
	return err
}

// record notes a member's change and tells subscribers; memberlist calls
// it with its node lock held, so it must not block or call memberlist.
func (p *Pool) record(typ EventType, n *memberlist.Node) {
	md := metaOf(n.Meta)
	m := Member{Name: n.Name, Role: md.Role, Addr: n.Address(), API: md.API, Since: time.Now()}
	switch typ {
	case EventJoin, EventUpdate:
		m.State = StateAlive
	case EventLeave:
		// n.State is not kept current by memberlist; the metadata's
		// leaving flag, sent by Leave before the goodbye, tells a
		// departure from a failure.
		m.State = StateDead
		if md.Leaving {
			m.State = StateLeft
		} else {
			typ = EventFail
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.members[m.Name]; ok && prev.State == m.State {
		m.Since = prev.Since // an update changes metadata, not the state's age
	}
	p.members[m.Name] = m
	ev := Event{Type: typ, Member: m}
	for s := range p.subs {
		s.push(ev)
	}
	lvl := slog.LevelInfo
	if typ == EventFail {
		lvl = slog.LevelWarn
	}
	p.log.Log(context.Background(), lvl, "gossip member "+string(typ), "name", m.Name, "role", m.Role, "addr", m.Addr)
}

// metaOf reads a member's metadata; the zero meta (no role) when it has
// none this version understands.
func metaOf(b []byte) meta {
	var md meta
	if len(b) == 0 || json.Unmarshal(b, &md) != nil {
		return meta{}
	}
	return md
}

// events receives memberlist's notifications.
type events struct{ p *Pool }

func (e events) NotifyJoin(n *memberlist.Node)   { e.p.record(EventJoin, n) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.p.record(EventLeave, n) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.p.record(EventUpdate, n) }

// delegate gives memberlist this member's metadata; the pool sends no
// messages or state of its own.
type delegate struct {
	mu   sync.Mutex
	meta meta
}

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := json.Marshal(d.meta)
	if err != nil || len(b) > limit {
		return nil
	}
	return b
}

func (d *delegate) setLeaving() {
	d.mu.Lock()
	d.meta.Leaving = true
	d.mu.Unlock()
}
func (*delegate) NotifyMsg([]byte)                           {}
func (*delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*delegate) LocalState(join bool) []byte                { return nil }
func (*delegate) MergeRemoteState(buf []byte, join bool)     {}
